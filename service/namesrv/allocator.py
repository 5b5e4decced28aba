"""Let a worker hand memory back to the system after a burst of big decodes (glibc only).

Measured on a worker that decoded four 14.6 MB REGISTER_BROKER bodies: RSS stayed 150 MiB
above its start, then 220 MiB after a second round, although Python held less than a third of
that. Two glibc defaults keep freed memory:

- the mmap threshold is dynamic: once a 16 MB buffer (a frame, a body) is freed, buffers up to
  that size come from the heap instead of their own mapping, and a heap gives memory back only
  from its top. A fixed threshold keeps every big buffer in a mapping, unmapped when freed;
- every thread that allocates may get an arena of its own (up to eight per core), each keeping
  its free memory; decodes run in threads. Two arenas are enough for one event loop and the
  few threads that decode, and leave less memory stranded.

With both, the same rounds left 84 and 103 MiB (most of it the bodies the decoder remembers on
purpose, registerBodyCacheBytes); ``malloc_trim`` after a burst gave back 7-10 MiB more.
Elsewhere (musl, macOS) these are no-ops.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import platform
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, now fixed
ARENA_MAX = 2
# Fixing the mmap threshold also fixes the trim threshold at glibc's 128 KB: every free that left
# more than that at the heap's top gave it back, and the next allocations faulted it in again. A
# worker behind on wide routes answers 64 replies of 21 KB a turn (1.3 MB), allocated at the top
# and freed once written: 270 page faults a turn, 4-5 per lookup, and half again the CPU per
# lookup, so a worker that fell behind could not catch up. Up to this much stays (at most the
# replies in flight: 4 MB per connection before its writes hold); trim() after big decodes still
# gives everything back.
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024
# A trim runs this long after it is asked for: the decode that asked has given its budget back,
# and its objects are gone once the registration's reply is written.
TRIM_DELAY_S = 0.2


def _glibc() -> Any:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _glibc()


def tune() -> bool:
    """Fix the mmap and trim thresholds and cap the arenas (before the worker starts threads);
    False where this is not glibc or it refused."""
    if _LIBC is None:
        return False
    done = (
        bool(_LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
        and bool(_LIBC.mallopt(M_ARENA_MAX, ARENA_MAX))
        and bool(_LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    )
    if not done:
        log.warning(
            "glibc refused the malloc settings: memory freed after big decodes may stay with the worker"
        )
    return done


def trim() -> bool:
    """Give free heap memory back to the system (all arenas); True when some was."""
    return _LIBC is not None and bool(_LIBC.malloc_trim(0))


_pending: set[asyncio.TimerHandle | asyncio.Future[bool]] = set()


def trim_soon() -> None:
    """On the event loop: :func:`trim` in a thread shortly, unless one is already on its way
    (it walks every arena: a few ms that must not hold up requests)."""
    if _LIBC is None or _pending:
        return
    loop = asyncio.get_running_loop()

    def start() -> None:
        _pending.clear()
        future = loop.run_in_executor(None, trim)
        _pending.add(future)
        future.add_done_callback(_pending.discard)

    _pending.add(loop.call_later(TRIM_DELAY_S, start))


# ---- memory held by reference cycles ----
GUARD_EVERY_S = 1.0
GUARD_GROWTH_BYTES = 64 * 1024 * 1024


def rss_bytes() -> int:
    """The process' resident memory now (Linux), 0 where /proc is not there."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return 0


_PAGE = 4096
with contextlib.suppress(ValueError, OSError, AttributeError):
    _PAGE = os.sysconf("SC_PAGE_SIZE")


async def guard_memory(collected: Callable[[int], None] = lambda freed: None) -> None:
    """Collect reference cycles when the worker's memory grew by ``GUARD_GROWTH_BYTES`` since the
    last collection, then give the freed memory back.

    A worker runs with a frozen heap and high GC thresholds (full collections stall the event
    loop), so garbage in cycles can wait long for one: a request that a library refuses with an
    exception holding its input (aiohttp's HTTP parser, a 10 MB request line: 13-16 MB each) kept
    hundreds of MB until then. Checked every second; a collection runs only after such growth,
    and the new level counts from there, so steady memory (caches filling) costs one more each
    64 MiB at most."""
    floor = rss_bytes()
    while True:
        await asyncio.sleep(GUARD_EVERY_S)
        now = rss_bytes()
        if now - floor < GUARD_GROWTH_BYTES:
            floor = min(floor, now)
            continue
        gc.collect()
        trim()
        after = rss_bytes()
        collected(max(0, now - after))
        floor = after
