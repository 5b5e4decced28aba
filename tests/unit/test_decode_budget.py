"""decodeBudgetBytes: reservations wait in line for a bounded time, charges from threads never
wait, nothing ever holds more than the budget, and every refusal is counted."""

from __future__ import annotations

import asyncio
import threading

import pytest

from namesrv.decode_budget import IDLE_AFTER_BYTES, DecodeBudget
from namesrv.domain.codes import OVERLOAD_REMARK, ResponseCode
from namesrv.domain.errors import Busy, TooLarge

MIB = 1 << 20


def budget(capacity: int = 10 * MIB, wait_s: float = 5.0) -> tuple[DecodeBudget, list[str]]:
    refused: list[str] = []
    return DecodeBudget(capacity, wait_s, count_refusal=refused.append), refused


async def test_reservations_within_the_budget_are_granted_at_once() -> None:
    b, refused = budget()
    one = await b.reserve(4 * MIB, "one")
    two = await b.reserve(6 * MIB, "two")
    assert (b.held, b.high_water) == (10 * MIB, 10 * MIB)
    one.release()
    two.release()
    one.release()  # twice is harmless
    assert (b.held, b.high_water, refused) == (0, 10 * MIB, [])


async def test_a_reservation_waits_for_room_and_what_fits_goes_ahead() -> None:
    b, _ = budget()
    first = await b.reserve(6 * MIB, "first")
    big = asyncio.create_task(b.reserve(6 * MIB, "big"))
    bigger = asyncio.create_task(b.reserve(9 * MIB, "bigger"))
    await asyncio.sleep(0.05)
    assert not big.done() and not bigger.done()
    small = await b.reserve(1 * MIB, "small")  # fits: it does not wait behind them
    first.release()
    granted = await big  # the first in line that fits now
    assert not bigger.done() and b.held == 7 * MIB
    granted.release()
    small.release()
    (await bigger).release()
    assert b.held == 0


async def test_a_reservation_not_granted_in_time_is_busy() -> None:
    b, refused = budget(wait_s=0.1)
    held = await b.reserve(9 * MIB, "held")
    with pytest.raises(Busy) as busy:
        await b.reserve(2 * MIB, "the REGISTER_BROKER body")
    assert busy.value.code == ResponseCode.SYSTEM_BUSY
    assert busy.value.remark == (
        f"{OVERLOAD_REMARK}: bodies being decoded hold the worker's decoding budget "
        f"({9 * MIB} of {10 * MIB} bytes, decodeBudgetBytes); the REGISTER_BROKER body was not decoded"
    )
    assert refused == ["decodeBudgetBytes"]
    held.release()
    assert b.held == 0
    (await b.reserve(10 * MIB, "all of it")).release()  # the one that gave up left no trace


async def test_a_body_needing_more_than_the_whole_budget_is_refused_at_once() -> None:
    b, refused = budget()
    with pytest.raises(TooLarge) as too_large:
        await b.reserve(10 * MIB + 1, "the request body")
    assert too_large.value.limit == "decodeBudgetBytes"
    assert too_large.value.remark == (
        f"the request body needs about {10 * MIB + 1} bytes of memory to decode, more than the "
        f"worker's whole budget for decoding ({10 * MIB} bytes, decodeBudgetBytes)"
    )
    assert (refused, b.held) == (["decodeBudgetBytes"], 0)


async def test_a_cancelled_waiter_gives_back_what_it_was_granted_and_leaves_the_line() -> None:
    b, _ = budget()
    held = await b.reserve(10 * MIB, "held")
    waiting = asyncio.create_task(b.reserve(5 * MIB, "waiting"))
    behind = asyncio.create_task(b.reserve(5 * MIB, "behind"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    held.release()
    (await behind).release()
    assert b.held == 0


async def test_charges_from_threads_take_more_without_waiting_and_never_pass_the_budget() -> None:
    b, refused = budget(capacity=10 * MIB)
    reservations = [await b.reserve(1 * MIB, f"body {i}") for i in range(4)]
    outcomes: list[str] = []
    lock = threading.Lock()

    def decode(i: int) -> None:
        r = reservations[i]
        try:
            for _ in range(16):
                r.charge(256 * 1024)  # 4 MiB in all: four of them cannot all fit
            outcome = "done"
        except Busy:
            outcome = "busy"
        with lock:
            outcomes.append(outcome)

    await asyncio.gather(*(asyncio.to_thread(decode, i) for i in range(4)))
    # 16 MiB asked for in 256 KiB steps: the budget fills exactly, and whoever asks next is busy
    assert b.high_water == b.capacity
    assert outcomes.count("busy") >= 1
    assert refused == ["decodeBudgetBytes"] * outcomes.count("busy")
    for r in reservations:
        r.release()
    assert b.held == 0


async def test_a_charge_within_the_reservation_takes_nothing_more() -> None:
    b, _ = budget()
    r = await b.reserve(3 * MIB, "body")
    r.charge(2 * MIB)
    r.charge(1 * MIB)
    assert b.held == 3 * MIB
    r.charge(1)
    assert b.held == 3 * MIB + 1
    with pytest.raises(TooLarge):
        r.charge(10 * MIB)  # this body alone would need more than the whole budget
    r.release()
    assert b.held == 0


async def test_on_idle_runs_when_a_burst_is_over() -> None:
    b, _ = budget(capacity=4 * IDLE_AFTER_BYTES)
    idle: list[int] = []
    b.on_idle = lambda: idle.append(b.held)
    small = await b.reserve(1 * MIB, "small")
    small.release()
    assert idle == []  # too little given back to be worth it
    one = await b.reserve(IDLE_AFTER_BYTES, "one")
    two = await b.reserve(1 * MIB, "two")
    one.release()
    assert idle == []  # still decoding
    two.release()
    assert idle == [0]
