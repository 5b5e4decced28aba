"""Address allow-lists: RocketMQ's ``plain_acl.yml`` patterns and plain CIDR lists.

RocketMQ 4.9.8 patterns (``RemoteAddressStrategyFactory``), all supported:

* ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*`` — every address;
* ``192.168.1.10`` or ``fe80::1`` — one address (IPv6 compared in canonical form);
* ``192.168.1.10,192.168.1.11`` — a list of addresses;
* ``192.168.1.{10,11,12}`` (IPv4) or ``fe80::{1,2}`` (IPv6) — a set in the last group;
* ``192.168.*``, ``192.168.*.*``, ``192.168.1.*``, ``192.168.1.1-100``, ``10.1-20.*.*`` — a range
  (``*`` or ``lo-hi``) in one IPv4 group after the first; groups after it must be ``*``.

Ours, beyond 4.9.8: ``10.0.0.0/8`` CIDR blocks (IPv4 and IPv6), also inside a comma list.
Not supported: IPv6 ranges (``fe80::1-ff``, ``fe80::*``); write them as CIDR blocks instead.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
EVERYWHERE = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


class AddressPatternError(ValueError):
    """An allow-list entry this module cannot read; the message quotes it."""


def peer_ip(peer: str) -> IP | None:
    """The IP of a ``host:port`` peer (``[v6]:port`` or ``v6:port``); None when it is not one."""
    if peer.startswith("["):
        host = peer[1 : peer.find("]")]
    elif ":" in peer:
        host = peer.rsplit(":", 1)[0]  # the port is after the last colon, IPv6 or not
    else:
        host = peer
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # a dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d
    return ip


@dataclass(frozen=True)
class _Range:
    """One IPv4 group in [lo, hi] after a fixed head of groups (RocketMQ's range strategy)."""

    head: tuple[int, ...]
    lo: int
    hi: int

    def matches(self, ip: IP) -> bool:
        if not isinstance(ip, ipaddress.IPv4Address):
            return False
        groups = ip.packed
        n = len(self.head)
        return tuple(groups[:n]) == self.head and self.lo <= groups[n] <= self.hi


@dataclass(frozen=True)
class AddressPattern:
    """One allow-list entry; ``matches`` is what the ACL asks."""

    text: str
    everything: bool = False
    exact: frozenset[IP] = frozenset()
    networks: tuple[Network, ...] = ()
    ranges: tuple[_Range, ...] = ()

    def matches(self, ip: IP | None) -> bool:
        if self.everything:
            return True
        if ip is None:
            return False
        if ip in self.exact:
            return True
        return any(ip in n for n in self.networks) or any(r.matches(ip) for r in self.ranges)


def _address(text: str, whole: str) -> IP:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise AddressPatternError(f"{whole!r}: {text.strip()!r} is not an IP address") from None


def _network(text: str, whole: str) -> Network:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise AddressPatternError(f"{whole!r}: {text.strip()!r} is not a CIDR block") from None


def _group(text: str, whole: str) -> int:
    if not text.isdigit() or int(text) > 255:
        raise AddressPatternError(f"{whole!r}: {text!r} is not a number from 0 to 255")
    return int(text)


def _ipv4_range(text: str) -> _Range:
    groups = [g.strip() for g in text.split(".")]
    if not 3 <= len(groups) <= 4:
        raise AddressPatternError(f"{text!r}: an IPv4 range has 3 or 4 groups")
    groups += ["*"] * (4 - len(groups))
    for i in range(1, 4):
        g = groups[i]
        if g == "*":
            lo, hi = 0, 255
        elif "-" in g:
            first, _, last = g.partition("-")
            lo, hi = _group(first, text), _group(last, text)
            if lo > hi:
                raise AddressPatternError(f"{text!r}: range {g} runs backwards")
        else:
            continue
        if any(rest != "*" for rest in groups[i + 1 :]):
            raise AddressPatternError(f"{text!r}: groups after a range must be '*'")
        return _Range(tuple(_group(h, text) for h in groups[:i]), lo, hi)
    raise AddressPatternError(f"{text!r}: no range group found")


def parse_pattern(text: str) -> AddressPattern | None:
    """A RocketMQ ``whiteRemoteAddress`` entry; None for a blank one (no restriction set)."""
    text = text.strip()
    if not text:
        return None
    if text in EVERYWHERE:
        return AddressPattern(text, everything=True)
    if text.endswith("}"):
        head, brace, members = text.partition("{")
        if not brace or not head.endswith((".", ":")):
            raise AddressPatternError(f"{text!r}: a set is written a.b.c.{{1,2}} or x:y::{{1,2}}")
        items = [m.strip() for m in members[:-1].split(",") if m.strip()]
        if not items:
            raise AddressPatternError(f"{text!r}: the set is empty")
        return AddressPattern(text, exact=frozenset(_address(head + m, text) for m in items))
    exact: set[IP] = set()
    networks: list[Network] = []
    ranges: list[_Range] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if "/" in item:
            networks.append(_network(item, text))
        elif ":" in item:
            if "*" in item or "-" in item:
                raise AddressPatternError(f"{text!r}: IPv6 ranges are not supported; use a CIDR block")
            exact.add(_address(item, text))
        elif "*" in item or "-" in item:
            ranges.append(_ipv4_range(item))
        else:
            exact.add(_address(item, text))
    return AddressPattern(text, exact=frozenset(exact), networks=tuple(networks), ranges=tuple(ranges))


def parse_patterns(texts: Iterable[str]) -> tuple[AddressPattern, ...]:
    return tuple(p for p in (parse_pattern(t) for t in texts) if p is not None)


def parse_cidrs(text: str) -> tuple[Network, ...]:
    """A comma-separated CIDR list (``adminAllowFrom``); a bare address is its own /32 or /128."""
    return tuple(_network(item, text) for item in text.split(",") if item.strip())


def in_networks(ip: IP | None, networks: tuple[Network, ...]) -> bool:
    return ip is not None and any(ip in n for n in networks)
