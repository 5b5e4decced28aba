"""RocketMQ's ``plain_acl.yml``: the parts a NameServer uses.

Read: ``globalWhiteRemoteAddresses`` and, per account, ``accessKey``, ``secretKey``,
``whiteRemoteAddress`` and ``admin``. Topic and group permissions (``defaultTopicPerm``,
``topicPerms``, ...) are broker matters: accepted and ignored, so the broker's file can be reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from namesrv.security.addresses import AddressPattern, AddressPatternError, parse_pattern, parse_patterns
from namesrv.security.signature import Signer


class AclFileError(ValueError):
    """The ACL file cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    admin: bool
    white_remote_address: AddressPattern | None  # None: any address
    signer: Signer = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signer", Signer(self.secret_key))

    def __repr__(self) -> str:  # a secret stays out of every log line and traceback
        return f"Account(access_key={self.access_key!r}, admin={self.admin})"


@dataclass(frozen=True)
class AclConfig:
    global_white: tuple[AddressPattern, ...]
    accounts: dict[str, Account]


def _text(value: Any) -> str:
    # YAML reads `secretKey: 12345678` as a number; Java's loader takes it as the text it is
    return "" if value is None else str(value).strip()


def _flag(value: Any, where: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclFileError(f"{where}: admin must be true or false, not {value!r}")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where, without PyYAML's quote of the line: it may hold a secretKey."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return type(exc).__name__


def parse_acl(text: str, source: str) -> AclConfig:  # noqa: C901 - one check per documented key of plain_acl.yml, each with its own error
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclFileError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AclFileError(f"{source}: expected a mapping with globalWhiteRemoteAddresses and accounts")
    white_raw = data.get("globalWhiteRemoteAddresses") or []
    if isinstance(white_raw, str):
        white_raw = [white_raw]
    if not isinstance(white_raw, list):
        raise AclFileError(f"{source}: globalWhiteRemoteAddresses must be a list")
    try:
        global_white = parse_patterns(_text(w) for w in white_raw)
    except AddressPatternError as exc:
        raise AclFileError(f"{source}: globalWhiteRemoteAddresses: {exc}") from None
    accounts: dict[str, Account] = {}
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclFileError(f"{source}: accounts must be a list")
    for i, raw in enumerate(raw_accounts):
        where = f"{source}: accounts[{i}]"
        if not isinstance(raw, dict):
            raise AclFileError(f"{where}: expected a mapping")
        access_key, secret_key = _text(raw.get("accessKey")), _text(raw.get("secretKey"))
        if not access_key or not secret_key:
            raise AclFileError(f"{where}: accessKey and secretKey are required")
        if access_key in accounts:
            raise AclFileError(f"{where}: accessKey {access_key!r} is listed twice")
        try:
            white = parse_pattern(_text(raw.get("whiteRemoteAddress")))
        except AddressPatternError as exc:
            raise AclFileError(f"{where} ({access_key}): whiteRemoteAddress: {exc}") from None
        accounts[access_key] = Account(access_key, secret_key, _flag(raw.get("admin"), where), white)
    return AclConfig(global_white, accounts)


def load_acl(path: Path) -> AclConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AclFileError(f"cannot read ACL file {path}: {exc}") from None
    return parse_acl(text, str(path))
