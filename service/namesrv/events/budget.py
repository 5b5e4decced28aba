"""Keep the change-log stream within a memory budget, not only an entry count.

Every XADD trims the stream to about ``eventsMaxLen`` entries, which bounds memory only as far as
entries are small. Entries are bounded (no KV value is copied into the log, names are at most 255
characters, a registration writes at most ``registerChunkTopics`` queues per entry), but their
sizes still differ by three orders of magnitude. So every worker also asks Redis, every few
seconds, how much memory the stream uses (``MEMORY USAGE`` with a few samples: O(samples)) and,
when it is over ``eventsMaxBytes``, trims it (XTRIM MAXLEN ~) to the entry count that fits 90% of
the budget at the stream's current average entry size. Workers may do this concurrently: a trim
is idempotent. Between two checks the stream can exceed the budget by what the fleet writes in
one interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from namesrv.aio import cancel_and_wait, raise_if_cancelling

log = logging.getLogger(__name__)
TRIM_TARGET = 0.9  # of the budget: leave room so the next check does not trim again at once
MEMORY_SAMPLES = 16
MAX_TRIM_CALLS = 1000  # of at most ~10,000 entries each


@dataclass(frozen=True)
class BudgetCheck:
    bytes_used: int
    entries: int
    trimmed: int


async def trim_to_budget(redis: Any, stream: str, max_bytes: int) -> BudgetCheck:
    """One check: the stream's memory, and the entries trimmed to bring it under ``max_bytes``."""
    used = await redis.memory_usage(stream, samples=MEMORY_SAMPLES)
    if not used:
        return BudgetCheck(0, 0, 0)
    used = int(used)
    if used <= max_bytes:
        return BudgetCheck(used, -1, 0)
    entries = int(await redis.xlen(stream))
    if entries == 0:
        return BudgetCheck(used, 0, 0)
    keep = max(1, int(entries * max_bytes * TRIM_TARGET / used))
    # An approximate XTRIM removes at most 100 nodes' worth of entries per call (Redis' default
    # LIMIT), which keeps each call short; call again until it has nothing left to remove.
    trimmed = 0
    for _ in range(MAX_TRIM_CALLS):
        removed = int(await redis.xtrim(stream, maxlen=keep, approximate=True))
        trimmed += removed
        if not removed:
            break
    return BudgetCheck(used, entries, trimmed)


async def keep_within_budget(
    redis: Any,
    stream: str,
    max_bytes: int,
    interval: float,
    observe: Callable[[BudgetCheck], None],
    ready: Callable[[], bool] = lambda: True,
) -> None:
    """Run :func:`trim_to_budget` every ``interval`` seconds until cancelled; ``observe`` gets
    each :class:`BudgetCheck`."""
    while True:
        raise_if_cancelling()
        if not ready():  # Redis not reachable yet (or any more): the change feed reports that
            await asyncio.sleep(interval)
            continue
        try:
            check = await trim_to_budget(redis, stream, max_bytes)
            observe(check)
            if check.trimmed:
                log.info(
                    "change log used %d bytes (budget %d, eventsMaxBytes): trimmed %d of %d entries",
                    check.bytes_used,
                    max_bytes,
                    check.trimmed,
                    check.entries,
                )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("change-log budget check failed (%s: %s); will retry", type(exc).__name__, exc)
        await asyncio.sleep(interval)


async def events_budget_ctx(app: Any) -> AsyncIterator[None]:
    """aiohttp cleanup context of a worker: the budget loop, every sweep interval."""
    from namesrv.keys import HEALTH, METRICS, REDIS, STORE, WORKER

    worker, metrics = app[WORKER], app[METRICS]

    def observe(check: BudgetCheck) -> None:
        metrics.events_bytes.set(check.bytes_used)
        if check.trimmed:
            metrics.events_trimmed.inc(check.trimmed)

    task = asyncio.create_task(
        keep_within_budget(
            app[REDIS],
            app[STORE].k.events,
            worker.base.eventsMaxBytes,
            max(1.0, worker.base.scanNotActiveBrokerInterval / 1000),
            observe,
            lambda: worker.scripts_loaded and app[HEALTH].reachable,
        ),
        name="events-budget",
    )
    try:
        yield
    finally:
        await cancel_and_wait(task)
