"""Task helpers that stay correct on Python 3.11, where ``asyncio.wait_for`` (used by redis-py for
socket writes) can swallow a cancellation that races with the write completing (fixed in 3.12).
A swallowed cancel leaves the task running with ``cancelling() > 0``; these helpers notice."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


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
