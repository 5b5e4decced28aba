"""``within``: a deadline that holds even when the awaited code swallows its cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from namesrv.aio import within


async def _stubborn(release: asyncio.Event) -> str:
    """Swallows the first cancel, as a library racing a socket write did, then waits on."""
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(10)
    await release.wait()
    return "late"


async def test_a_call_that_swallows_its_cancel_still_times_out_at_the_deadline() -> None:
    release = asyncio.Event()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await within(0.05, _stubborn(release))
    assert time.monotonic() - started < 5.0  # at the deadline, not after the 10 s the call sleeps
    # asyncio.timeout cancels once: the same call under it waits until released.
    waiter = asyncio.ensure_future(_under_asyncio_timeout(release))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    release.set()
    assert await waiter == "late"


async def _under_asyncio_timeout(release: asyncio.Event) -> str:
    async with asyncio.timeout(0.05):
        return await _stubborn(release)


async def test_the_result_and_the_error_of_a_call_in_time_come_through() -> None:
    async def value() -> int:
        return 7

    async def failing() -> None:
        raise ValueError("boom")

    assert await within(1.0, value()) == 7
    with pytest.raises(ValueError, match="boom"):
        await within(1.0, failing())


async def test_cancelling_the_caller_cancels_the_call() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow() -> None:
        entered.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.ensure_future(within(5.0, slow()))
    await entered.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait_for(cancelled.wait(), 1.0)
