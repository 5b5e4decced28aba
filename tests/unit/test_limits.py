"""The pieces of the resource limits that need no server: remarks, rate-limited logs, the fd limit,
the partial-frame accounting of the remoting guard, and connection slots (global and per peer)."""

from __future__ import annotations

import dataclasses
import logging
import subprocess
import sys

import pytest

from namesrv.config import ConfigError, Settings
from namesrv.limits import MAX_REMARK_CHARS, RateLimitedLog, bounded_remark, utf8_length
from namesrv.metrics import Metrics
from namesrv.remoting.guard import FrameGuard, PartialFrame
from namesrv.remoting.slots import ConnectionSlots, peer_host


def test_short_remarks_are_kept() -> None:
    assert bounded_remark(None) is None
    assert bounded_remark("x" * MAX_REMARK_CHARS) == "x" * MAX_REMARK_CHARS


def test_long_remarks_are_cut_and_say_so() -> None:
    assert (
        bounded_remark("y" * (MAX_REMARK_CHARS + 10))
        == "y" * MAX_REMARK_CHARS + "... (10 more characters cut)"
    )


def test_utf8_length() -> None:
    assert (utf8_length("abc"), utf8_length("é"), utf8_length("日本"), utf8_length("\U0001f600")) == (
        3,
        2,
        6,
        4,
    )


def test_rate_limited_log_folds_a_flood(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimitedLog(logging.getLogger("t"), interval=3600)
    caplog.set_level(logging.WARNING)
    assert [limited.warning("refused %s", i) for i in range(5)] == [True, False, False, False, False]
    assert [r.getMessage() for r in caplog.records] == ["refused 0"]
    limited._last -= 3600  # the interval has passed
    assert limited.warning("refused %s", 5)
    assert caplog.records[-1].getMessage() == "refused 5 (4 more since the last such line)"


def test_soft_fd_limit_is_raised_to_the_hard_limit() -> None:
    script = (
        "import resource; from namesrv.limits import raise_fd_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "print(raise_fd_limit(100) == hard, resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def guard(**limits: int | float) -> FrameGuard:
    return FrameGuard(dataclasses.replace(Settings(), **limits), Metrics())  # type: ignore[arg-type]


def test_guard_counts_bytes_held_across_connections() -> None:
    g = guard(frameMaxLength=1024, partialFramesMaxBytes=2000)
    a, b = PartialFrame(), PartialFrame()
    assert g.hold(a, 900) and g.hold(b, 900)
    assert g.partial_bytes == 1800
    assert not g.hold(b, 1200)  # 2100 > 2000: the connection that grew is to be closed
    g.release(b)
    g.release(a)
    assert g.partial_bytes == 0


def test_deadline_starts_at_the_first_byte_of_each_frame() -> None:
    g = guard(frameDeadlineSeconds=5.0)
    frame = PartialFrame()
    g.hold(frame, 10)
    started = frame.since
    assert not g.overdue(frame, started + 4.9)
    g.hold(frame, 20)  # more of the same frame: the clock keeps running
    assert frame.since == started
    assert g.overdue(frame, started + 5.1)
    frame.since = started - 1.0
    g.hold(frame, 30, completed=True)  # a frame finished and a new one began
    assert frame.since >= started
    g.release(frame)
    assert not g.overdue(frame, frame.since + 100)  # nothing held: nothing overdue


def refused(metrics: Metrics, limit: str) -> float:
    value: float = metrics.limit_refusals.labels(limit)._value.get()
    return value


def test_max_connections() -> None:
    metrics = Metrics()
    slots = ConnectionSlots(2, 2, metrics)
    taken = [slots.take("10.0.0.1"), slots.take("10.0.0.2"), slots.take("10.0.0.3")]
    assert [s is not None for s in taken] == [True, True, False]
    assert refused(metrics, "maxConnections") == 1


def test_one_peer_gets_at_most_max_connections_per_peer() -> None:
    metrics = Metrics()
    slots = ConnectionSlots(10, 2, metrics)
    a1, a2, a3 = slots.take("10.0.0.1"), slots.take("10.0.0.1"), slots.take("10.0.0.1")
    assert a1 is not None and a2 is not None and a3 is None
    b = slots.take("10.0.0.2")  # another address is not locked out
    assert b is not None
    assert (slots.total, slots.per_peer) == (3, {"10.0.0.1": 2, "10.0.0.2": 1})
    assert refused(metrics, "maxConnectionsPerPeer") == 1
    assert refused(metrics, "maxConnections") == 0


def test_a_slot_is_given_back_once_however_often_it_is_released() -> None:
    metrics = Metrics()
    slots = ConnectionSlots(10, 5, metrics)
    first, second = slots.take("p"), slots.take("p")
    assert first is not None and second is not None
    first.release()
    first.release()  # a second close path of the same connection
    assert (slots.total, slots.per_peer) == (1, {"p": 1})
    second.release()
    assert (slots.total, slots.per_peer) == (0, {})
    assert (metrics.connections._value.get(), metrics.connection_peers._value.get()) == (0, 0)


def test_per_peer_cap_never_exceeds_max_connections() -> None:
    assert ConnectionSlots(5, 1000, Metrics()).max_per_peer == 5


@pytest.mark.parametrize(
    ("sockaddr", "peer"),
    [
        (("10.1.2.3", 4000), "10.1.2.3"),
        (("::ffff:10.1.2.3", 4000, 0, 0), "10.1.2.3"),  # IPv4-mapped: the same host
        (("::1", 4000, 0, 0), "::1"),
        (("fe80::1%eth0", 4000, 0, 2), "fe80::1"),
        (("2001:DB8::1", 1, 0, 0), "2001:db8::1"),
        ("/run/namesrv.sock", "/run/namesrv.sock"),
    ],
)
def test_peer_host(sockaddr: object, peer: str) -> None:
    assert peer_host(sockaddr) == peer


def test_budget_below_one_frame_is_refused() -> None:
    with pytest.raises(ConfigError, match="partialFramesMaxBytes .* must be at least frameMaxLength"):
        guard(frameMaxLength=4096, partialFramesMaxBytes=2048)


def test_max_connections_is_lowered_to_fit_the_fd_limit() -> None:
    script = (
        "import resource, dataclasses\n"
        "from namesrv.config import Settings\n"
        "from namesrv.remoting.guard import effective_max_connections\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1000, hard))\n"
        "print(effective_max_connections(Settings()), "
        "effective_max_connections(dataclasses.replace(Settings(), maxConnections=100)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["680", "100"]  # 1000 - 64 Redis connections - 256 headroom
    assert "does not fit the open-file limit 1000" in out.stderr
