"""The event loop every benchmark process runs: uvloop when installed, as the workers do."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Coroutine
from types import ModuleType
from typing import Any, TypeVar

from support.quiet_gc import GC_THRESHOLDS, quiet_gc

__all__ = ["GC_THRESHOLDS", "quiet_gc"]  # re-exported: bench modules reach them here

T = TypeVar("T")


def _uvloop() -> ModuleType | None:
    try:
        return importlib.import_module("uvloop")
    except ImportError:  # pragma: no cover - uvloop is a dependency of the service on Linux
        return None


UVLOOP = _uvloop()


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
