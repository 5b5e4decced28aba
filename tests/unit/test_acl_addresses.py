"""plain_acl.yml address patterns (RocketMQ 4.9.8 forms, plus CIDR) and peer parsing."""

from __future__ import annotations

import ipaddress

import pytest

from namesrv.security.addresses import AddressPatternError, parse_cidrs, parse_pattern, peer_ip


def matches(pattern: str, address: str) -> bool:
    parsed = parse_pattern(pattern)
    assert parsed is not None
    return parsed.matches(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("*.*.*.*", ["10.0.0.1"], []),
        ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2"]),
        ("192.168.0.1,10.0.0.7", ["192.168.0.1", "10.0.0.7"], ["10.0.0.8"]),
        ("192.168.1.{1,2,30}", ["192.168.1.1", "192.168.1.30"], ["192.168.1.3", "192.168.2.1"]),
        ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
        ("192.168.*", ["192.168.7.9"], ["192.169.0.1"]),
        ("192.168.*.*", ["192.168.200.1"], ["10.168.0.1"]),
        ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.0", "192.168.1.101"]),
        ("10.1-20.*.*", ["10.1.0.0", "10.20.255.255"], ["10.21.0.0", "10.0.9.9"]),
        ("10.0.0.0/8", ["10.255.0.1"], ["11.0.0.1"]),
        ("fe80::1", ["fe80:0:0:0:0:0:0:1"], ["fe80::2"]),
        ("fe80::{1,a}", ["fe80::a"], ["fe80::b"]),
        ("fc00::/7,127.0.0.1", ["fd00::5", "127.0.0.1"], ["127.0.0.2", "fe80::1"]),
    ],
)
def test_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    assert [matches(pattern, a) for a in inside] == [True] * len(inside)
    assert [matches(pattern, a) for a in outside] == [False] * len(outside)


def test_a_blank_pattern_sets_no_restriction() -> None:
    assert parse_pattern("") is None
    assert parse_pattern("   ") is None


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("192.168.1.300", "is not an IP address"),
        ("192.168.1.100-1", "runs backwards"),
        ("192.168.*.1", "groups after a range must be '*'"),
        ("fe80::1-ff", "IPv6 ranges are not supported"),
        ("192.168.1{1,2}", "a set is written"),
        ("10.0.0.0/33", "is not a CIDR block"),
        ("host.example", "is not an IP address"),
    ],
)
def test_bad_patterns_are_refused_with_the_entry_named(pattern: str, error: str) -> None:
    with pytest.raises(AddressPatternError, match=error):
        parse_pattern(pattern)


@pytest.mark.parametrize(
    ("peer", "ip"),
    [
        ("127.0.0.1:5555", "127.0.0.1"),
        ("::1:5555", "::1"),
        ("[fe80::1]:0", "fe80::1"),
        ("::ffff:10.1.2.3:80", "10.1.2.3"),
        ("10.0.0.1", "10.0.0.1"),
    ],
)
def test_peer_ip(peer: str, ip: str) -> None:
    assert peer_ip(peer) == ipaddress.ip_address(ip)


def test_peer_that_is_not_an_address() -> None:
    assert peer_ip("?") is None
    one = parse_pattern("10.0.0.1")
    assert one is not None and one.matches(None) is False


def test_cidr_list() -> None:
    assert parse_cidrs("127.0.0.0/8, ::1/128,10.0.0.1") == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
        ipaddress.ip_network("10.0.0.1/32"),
    )
    assert parse_cidrs("") == ()
