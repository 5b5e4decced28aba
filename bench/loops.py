"""The event loop every benchmark process runs: uvloop when installed, as the workers do."""

from __future__ import annotations

import asyncio
import gc
import importlib
from collections.abc import Coroutine
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")


def _uvloop() -> ModuleType | None:
    try:
        return importlib.import_module("uvloop")
    except ImportError:  # pragma: no cover - uvloop is a dependency of the service on Linux
        return None


UVLOOP = _uvloop()


# The workers' own setting (namesrv.runner.GC_THRESHOLDS): a load generator or a ceiling server
# with Python's defaults pauses for its own full collections, and those pauses would be charged
# to the server under test as latency.
GC_THRESHOLDS = (10_000, 10, 100)


def quiet_gc() -> None:
    """Collect, freeze what lives now, and collect rarely from here on."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def loop_name() -> str:
    return f"uvloop {UVLOOP.__version__}" if UVLOOP is not None else "asyncio (no uvloop)"


def run_fast(coro: Coroutine[Any, Any, T]) -> T:
    if UVLOOP is not None:
        result: T = UVLOOP.run(coro)
        return result
    return asyncio.run(coro)


def new_loop() -> asyncio.AbstractEventLoop:
    if UVLOOP is not None:
        loop: asyncio.AbstractEventLoop = UVLOOP.new_event_loop()
        return loop
    return asyncio.new_event_loop()
