"""The pieces of the resource limits that need no server: remarks, rate-limited logs, the fd limit,
and the partial-frame accounting of the remoting guard."""

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


def test_max_connections() -> None:
    g = guard(maxConnections=2)
    assert (g.admit(0, "p"), g.admit(1, "p"), g.admit(2, "p")) == (True, True, False)


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
