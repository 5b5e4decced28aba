"""RouteReads: a connection that starts a lookup past the bound stops being read until half of the
lookups are done."""

from __future__ import annotations

from namesrv.remoting.route_reads import REASON, RouteReads


class Conn:
    def __init__(self) -> None:
        self.holds: list[tuple[str, str]] = []

    def hold_reading(self, reason: str) -> None:
        self.holds.append(("hold", reason))

    def release_reading(self, reason: str) -> None:
        self.holds.append(("release", reason))


def test_held_at_the_bound_released_at_half() -> None:
    paused: list[int] = []
    reads = RouteReads(4, lambda: paused.append(1))
    a, b = Conn(), Conn()
    for _ in range(3):
        reads.started(a)
    assert a.holds == []
    reads.started(a)  # the 4th: a is no longer read
    reads.started(b)
    reads.started(a)  # held already: not again
    assert (a.holds, b.holds, reads.pauses, len(paused)) == ([("hold", REASON)], [("hold", REASON)], 2, 2)
    for _ in range(3):
        reads.finished()
    assert reads.running == 3 and a.holds == [("hold", REASON)]  # 3 > 4 // 2
    reads.finished()
    assert a.holds == b.holds == [("hold", REASON), ("release", REASON)]
    reads.finished()
    reads.finished()
    assert reads.running == 0


def test_a_closed_connection_is_not_released() -> None:
    reads = RouteReads(2)
    a = Conn()
    reads.started(a)
    reads.started(a)
    reads.forget(a)
    reads.finished()
    reads.finished()
    assert a.holds == [("hold", REASON)]
