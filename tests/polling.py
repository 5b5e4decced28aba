"""Waiting for a condition in tests: the one polling helper.

A test never sleeps a fixed time and hopes; it polls a condition until a deadline. Deadlines are
generous and grow with ``NAMESRV_TEST_LOAD_FACTOR`` (default 1; CI on a busy machine may set 3):
a slow machine makes a test slower, never red. Timing itself is measured by benchmarks.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable

LOAD_FACTOR = max(1.0, float(os.environ.get("NAMESRV_TEST_LOAD_FACTOR", "1") or 1))
INTERVAL_S = 0.05


def scaled(seconds: float) -> float:
    """A deadline of ``seconds`` on a quiet machine, on this one."""
    return seconds * LOAD_FACTOR


async def eventually(
    check: Callable[[], Awaitable[object] | object], timeout: float = 10.0, what: str = ""
) -> None:
    """Poll ``check()`` (awaited when it returns an awaitable) until it is truthy; fail after
    ``scaled(timeout)`` seconds."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {scaled(timeout):.0f} s: {what or check}")
        await asyncio.sleep(INTERVAL_S)


def wait_until(check: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """:func:`eventually` for plain functions (tests outside an event loop)."""
    deadline = time.monotonic() + scaled(timeout)
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {scaled(timeout):.0f} s: {what or check}")
        time.sleep(INTERVAL_S)
