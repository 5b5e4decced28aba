"""The one access decision both transports ask: may this request run?

Without ACL (``aclEnable=false``, the default) every request runs except the admin codes, which
run only for peers in ``adminAllowFrom`` (loopback and private ranges by default). With ACL on, a
request runs when it comes from a ``globalWhiteRemoteAddresses`` address (unsigned 4.x brokers),
or when it is signed by a known account and comes from that account's ``whiteRemoteAddress`` (when
one is set); admin codes always need a signed account with ``admin: true``. UNREGISTER_BROKER
must also come from the broker itself (:meth:`Authorizer.check_unregister`). ``aclMode=permissive``
serves every request but logs and counts what enforcing would refuse.

A refusal happens before any handler runs, so it changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from namesrv.config import ConfigError, Settings
from namesrv.domain.codes import RequestCode
from namesrv.security.acl_file import AclConfig, AclFileError, load_acl
from namesrv.security.addresses import IP, AddressPatternError, Network, in_networks, parse_cidrs, peer_ip
from namesrv.security.signature import ACCESS_KEY

log = logging.getLogger(__name__)

ADMIN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.REGISTER_TOPIC_IN_NAMESRV,
        RequestCode.UPDATE_NAMESRV_CONFIG,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
    }
)
ENFORCING, PERMISSIVE = "enforcing", "permissive"
# An AccessKey is quoted in remarks and logs: a bounded slice of it, never an attacker's megabyte.
QUOTE_MAX = 64
# A refusal (or, in permissive mode, a would-be refusal) is logged once per (reason, address)
# per this many seconds.
LOG_EVERY_S = 60.0
LOG_KEYS_MAX = 10000
PEER_CACHE_MAX = 4096


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str  # the metric label: low cardinality, one word
    remark: str = ""  # why a refusal is one, sent to the client


ALLOWED_OPEN = Decision(True, "open")
ALLOWED_GLOBAL_WHITE = Decision(True, "global_white")
ALLOWED_SIGNED = Decision(True, "signed")


def _quote(text: str) -> str:
    return repr(text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "...")


class Authorizer:
    """Built once per worker from the settings; holds the ACL file's current contents."""

    def __init__(
        self,
        *,
        admin_allow_from: tuple[Network, ...],
        acl_path: Path | None = None,
        mode: str = ENFORCING,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.admin_allow_from = admin_allow_from
        self.acl_path = acl_path
        self.acl_enabled = acl_path is not None
        self.mode = mode if self.acl_enabled else "off"
        self.acl: AclConfig = AclConfig((), {})
        self._stamp: tuple[int, int, int] | None = None
        # Per peer ("ip:port", so per connection): its address and whether the global white list
        # covers it, so a lookup on a long-lived connection does not parse or match again.
        self._ips: dict[str, IP | None] = {}
        self._white: dict[str, bool] = {}
        self._logged: dict[tuple[str, str], float] = {}
        self.decisions = Counter(
            "namesrv_acl_decisions",
            "Access decisions on admin requests (ACL off) or on every request (ACL on), by mode "
            "(off, enforcing, permissive), result (allowed, refused, would_refuse) and reason",
            ["mode", "result", "reason"],
            registry=registry,
        )
        self.reloads = Counter(
            "namesrv_acl_reloads",
            "ACL file loads, by result (ok, error: the previous contents stay in force)",
            ["result"],
            registry=registry,
        )
        self._series: dict[tuple[str, str], Any] = {}
        if acl_path is not None:
            self._stamp = self._file_stamp()  # before reading: a change in between is seen later
            self.acl = load_acl(acl_path)  # a bad file at start-up stops the worker
            self.reloads.labels("ok").inc()
            log.info(
                "ACL %s from %s: %d account(s), %d global white address pattern(s)",
                mode,
                acl_path,
                len(self.acl.accounts),
                len(self.acl.global_white),
            )

    @classmethod
    def from_settings(cls, settings: Settings, registry: CollectorRegistry | None = None) -> Authorizer:
        """Raises :class:`ConfigError` naming the key when the security settings cannot be used."""
        try:
            allow = parse_cidrs(settings.adminAllowFrom)
        except AddressPatternError as exc:
            raise ConfigError(f"adminAllowFrom: {exc}") from None
        path: Path | None = None
        if settings.aclEnable:
            if not settings.aclFile:
                raise ConfigError("aclEnable is true but aclFile is not set")
            path = Path(settings.aclFile)
        try:
            return cls(admin_allow_from=allow, acl_path=path, mode=settings.aclMode, registry=registry)
        except AclFileError as exc:
            raise ConfigError(f"aclFile: {exc}") from None

    # ---- decisions ----
    def _ip(self, peer: str) -> IP | None:
        ip = self._ips.get(peer, False)
        if ip is False:
            if len(self._ips) >= PEER_CACHE_MAX:
                self._ips.clear()
            ip = self._ips[peer] = peer_ip(peer)
        return ip  # type: ignore[return-value]

    def _globally_white(self, peer: str, ip: IP | None) -> bool:
        white = self._white.get(peer)
        if white is None:
            if len(self._white) >= PEER_CACHE_MAX:
                self._white.clear()
            white = self._white[peer] = any(p.matches(ip) for p in self.acl.global_white)
        return white

    def decide(self, code: int, fields: Mapping[str, str], body: bytes | None, peer: str) -> Decision:
        """The decision alone: no counting, no logging."""
        admin = code in ADMIN_CODES
        if not self.acl_enabled:
            if not admin:
                return ALLOWED_OPEN
            ip = self._ip(peer)
            if in_networks(ip, self.admin_allow_from):
                return Decision(True, "admin_allow_from")
            return Decision(
                False,
                "address_not_allowed",
                f"address not allowed: request code {code} is an admin request, accepted only from "
                f"adminAllowFrom (or from an admin account when aclEnable is true); "
                f"{ip or peer} is not in it",
            )
        acl = self.acl
        ip = self._ip(peer)
        if not admin and self._globally_white(peer, ip):
            return ALLOWED_GLOBAL_WHITE
        access_key = fields.get(ACCESS_KEY)
        if not access_key:
            why = (
                "an admin request must be signed by an admin account"
                if admin
                else f"{ip or peer} is not in globalWhiteRemoteAddresses"
            )
            return Decision(False, "unsigned", f"not signed: request code {code} has no AccessKey and {why}")
        account = acl.accounts.get(access_key)
        if account is None:
            return Decision(False, "unknown_key", f"unknown AccessKey {_quote(access_key)}")
        if not account.signer.matches(fields, body):
            return Decision(
                False,
                "bad_signature",
                f"bad signature: the request is not signed by AccessKey {_quote(access_key)}",
            )
        if account.white_remote_address is not None and not account.white_remote_address.matches(ip):
            return Decision(
                False,
                "address_not_allowed",
                f"address not allowed: {ip or peer} is not in the whiteRemoteAddress of AccessKey "
                f"{_quote(access_key)}",
            )
        if admin and not account.admin:
            return Decision(
                False,
                "not_admin",
                f"not admin: request code {code} needs an admin account; AccessKey {_quote(access_key)} "
                "is not admin",
            )
        return ALLOWED_SIGNED

    def check(self, code: int, fields: Mapping[str, str] | None, body: bytes | None, peer: str) -> str | None:
        """Decide, count, log: the remark to refuse with, or None to serve the request."""
        if not self.acl_enabled and code not in ADMIN_CODES:
            return None  # the hot path without ACL: nothing to decide, nothing to count
        return self._enforce(self.decide(code, fields or {}, body, peer), peer)

    def check_unregister(
        self, fields: Mapping[str, str] | None, peer: str, broker_addr: str, registered_here: bool
    ) -> str | None:
        """UNREGISTER_BROKER, once :meth:`check` let it through: with ACL on, only the broker may
        remove itself: the connection that registered it, its own address (the host of
        ``brokerAddr``), a ``globalWhiteRemoteAddresses`` address (where brokers run unsigned), or
        an admin account. Any other account removing a broker it does not run would take every
        route of it away until its next registration. With ACL off anyone may, as in Java."""
        if not self.acl_enabled:
            return None
        return self._enforce(self._owner(fields or {}, peer, broker_addr, registered_here), peer)

    def _owner(
        self, fields: Mapping[str, str], peer: str, broker_addr: str, registered_here: bool
    ) -> Decision:
        if registered_here:
            return Decision(True, "own_connection")
        ip = self._ip(peer)
        if ip is not None and ip == peer_ip(broker_addr):
            return Decision(True, "own_address")
        if self._globally_white(peer, ip):
            return ALLOWED_GLOBAL_WHITE
        account = self.acl.accounts.get(fields.get(ACCESS_KEY) or "")
        if account is not None and account.admin:  # check() verified the signature already
            return Decision(True, "admin")
        return Decision(
            False,
            "not_owner",
            f"not the broker's: request code {int(RequestCode.UNREGISTER_BROKER)} for {broker_addr[:200]} "
            "is accepted only from the broker (the connection that registered it, its own address, "
            "globalWhiteRemoteAddresses) or an admin account",
        )

    def _enforce(self, decision: Decision, peer: str) -> str | None:
        if decision.allowed:
            self._count("allowed", decision.reason)
            return None
        if self.mode == PERMISSIVE:
            self._count("would_refuse", decision.reason)
            self._log_limited(decision, peer, "ACL permissive: would refuse a request from %s: %s")
            return None
        self._count("refused", decision.reason)
        self._log_limited(decision, peer, "refused a request from %s: %s")
        return decision.remark

    def admits_route_fast(self, fields: Mapping[str, str] | None, body: bytes | None, peer: str) -> bool:
        """May a route lookup the cache can answer be answered at once (no task)? Counts an
        admission; a refusal or would-be refusal says no, and :meth:`check` in the dispatcher
        decides again and counts it there, once."""
        decision = self.decide(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields or {}, body, peer)
        if decision.allowed:
            self._count("allowed", decision.reason)
        return decision.allowed

    def _count(self, result: str, reason: str) -> None:
        child = self._series.get((result, reason))
        if child is None:
            child = self._series[(result, reason)] = self.decisions.labels(self.mode, result, reason)
        child.inc()

    def _log_limited(self, decision: Decision, peer: str, text: str) -> None:
        """One line per reason and address per minute: a flood of refused requests is counted in
        the metric, not copied into the logs."""
        key = (decision.reason, peer.rsplit(":", 1)[0])
        now = time.monotonic()
        if now - self._logged.get(key, -LOG_EVERY_S) < LOG_EVERY_S:
            return
        if len(self._logged) >= LOG_KEYS_MAX:
            self._logged.clear()
        self._logged[key] = now
        log.warning(text, peer, decision.remark)

    # ---- reloading ----
    def _file_stamp(self) -> tuple[int, int, int] | None:
        assert self.acl_path is not None
        try:
            st = self.acl_path.stat()  # follows the symlinks a Kubernetes Secret volume swaps
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def reload(self, reason: str = "SIGHUP") -> bool:
        """Read the ACL file again; a file that cannot be used leaves the current ACL in force."""
        if self.acl_path is None:
            return False
        stamp = self._file_stamp()
        try:
            acl = load_acl(self.acl_path)
        except AclFileError as exc:
            self.reloads.labels("error").inc()
            self._stamp = stamp  # do not retry the same broken file every poll
            log.error("ACL reload (%s) failed, keeping the previous ACL: %s", reason, exc)
            return False
        self.acl, self._stamp = acl, stamp
        self._white.clear()
        self.reloads.labels("ok").inc()
        log.info(
            "ACL reloaded (%s) from %s: %d account(s), %d global white address pattern(s)",
            reason,
            self.acl_path,
            len(acl.accounts),
            len(acl.global_white),
        )
        return True

    def reload_if_changed(self) -> bool:
        if self.acl_path is None or self._file_stamp() == self._stamp:
            return False
        return self.reload("file changed")
