"""Task helpers that stay correct on Python 3.11, where ``asyncio.wait_for`` (used by redis-py for
socket writes) can swallow a cancellation that races with the write completing (fixed in 3.12).
A swallowed cancel leaves the task running with ``cancelling() > 0``; these helpers notice."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that a library swallowed."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()


async def cancel_and_wait(task: asyncio.Task[object], *, grace: float = 5.0, attempts: int = 10) -> None:
    """Cancel ``task`` and wait for it to finish, cancelling again if a cancel was swallowed."""
    for _ in range(attempts):
        if task.done():
            break
        task.cancel()
        await asyncio.wait({task}, timeout=grace / attempts)
    if not task.done():
        log.error("task %s did not stop after %d cancellations", task.get_name(), attempts)
        return
    if not task.cancelled() and task.exception() is not None:
        log.error("task %s failed: %r", task.get_name(), task.exception())


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """``awaitable``'s result, or TimeoutError once ``seconds`` (plus at most ``ABANDON_GRACE_S``)
    have passed, whatever it does.

    ``asyncio.timeout`` cancels once; if the code under it swallows that cancel, nothing stops it
    again. A redis-py connection did exactly that on a Redis that had just resumed from a stall,
    and then waited on its socket for good: the change feed's poll hung with it, and the worker
    reported Redis down long after Redis answered. Here the call runs as its own task. At the
    deadline it is cancelled and given a moment to clean up (close its connection), as it would
    under ``asyncio.timeout``; only a call that is still running then is left behind, its outcome
    retrieved whenever it ends. A caller that is itself cancelled (a shutdown) waits as long for
    the call's clean-up, so connections are not closed twice at once."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        await _stop(task)
        raise
    if not done:
        await _stop(task)
        if not task.done() or task.cancelled():
            raise TimeoutError
    return task.result()


ABANDON_GRACE_S = 0.05


async def _stop(task: asyncio.Future[Any]) -> None:
    task.cancel()
    await asyncio.wait({task}, timeout=ABANDON_GRACE_S)
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an abandoned call's failure is expected: nobody must log it as lost
