"""RocketMQ's request signature (4.x ``AclClientRPCHook`` / ``PlainAccessValidator``).

The signed content is the values of every ext field except ``Signature`` (and the broker's
``_UNIQUE_KEY_QUERY`` flag), concatenated in the order of their keys as a Java ``TreeMap`` sorts
them (UTF-16 code units), encoded UTF-8, followed by the body bytes. The ``AccessKey`` field is
one of those values. Signature = Base64(HmacSHA1(secretKey, content)).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
# Java leaves this flag out of the signed content too (MixAll.UNIQUE_MSG_QUERY_FLAG).
UNSIGNED_FIELDS = frozenset({SIGNATURE, "_UNIQUE_KEY_QUERY"})


def _java_order(key: str) -> bytes:
    # Java compares strings by UTF-16 code units; UTF-16-BE bytes sort the same way.
    return key.encode("utf-16-be", "surrogatepass")


def signed_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    keys = sorted(k for k in ext_fields if k not in UNSIGNED_FIELDS)
    if not all(k.isascii() for k in keys):
        # code points and UTF-16 units order differently only beyond ASCII: sort as Java does
        keys.sort(key=_java_order)
    text = "".join(ext_fields[k] for k in keys if ext_fields[k] is not None)
    content = text.encode("utf-8")
    return content + body if body else content


class Signer:
    """One secret key, its HMAC key schedule computed once: each signature then costs a copy."""

    __slots__ = ("_keyed",)

    def __init__(self, secret_key: str) -> None:
        self._keyed = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha1)

    def __repr__(self) -> str:
        return "Signer(***)"

    def sign(self, ext_fields: Mapping[str, str], body: bytes | None = None) -> str:
        mac = self._keyed.copy()
        mac.update(signed_content(ext_fields, body))
        return base64.b64encode(mac.digest()).decode("ascii")

    def matches(self, ext_fields: Mapping[str, str], body: bytes | None) -> bool:
        given = ext_fields.get(SIGNATURE)
        if not given:
            return False
        # constant time, so the comparison leaks nothing about how much of a guess was right
        return hmac.compare_digest(self.sign(ext_fields, body).encode(), given.encode("utf-8", "replace"))


def sign(secret_key: str, ext_fields: Mapping[str, str], body: bytes | None = None) -> str:
    """The ``Signature`` a RocketMQ 4.x client puts on a request with these fields and body."""
    return Signer(secret_key).sign(ext_fields, body)


def signature_matches(secret_key: str, ext_fields: Mapping[str, str], body: bytes | None) -> bool:
    return Signer(secret_key).matches(ext_fields, body)


def signed_fields(
    access_key: str, secret_key: str, ext_fields: Mapping[str, str] | None = None, body: bytes | None = None
) -> dict[str, str]:
    """``ext_fields`` plus ``AccessKey`` and ``Signature``, as ``AclClientRPCHook`` sends them."""
    fields = {**(ext_fields or {}), ACCESS_KEY: access_key}
    fields[SIGNATURE] = sign(secret_key, fields, body)
    return fields
