"""Overload and recovery (#26): one worker, hot topics, an open-loop load at 100% and then 120%
of the peak it measured just before, for ``overload_seconds``, then straight down to 50% for
``recovery_seconds`` in the same run (so whatever queued during the overload is still there when
the load drops). Each row: p99 during the overload (from the write, and from the moment a request
was meant to be sent, which counts queueing in the generator too), what the worker refused
(SYSTEM_BUSY), the time until p99 is back under 5 ms after the drop (see recovery_seconds) and
how many 100 ms buckets after that still had their own p99 over 5 ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bench.fleet import Bench, worker_counters
from bench.load_jobs import LoadResult
from bench.lookups import Scenario, _job, measure, window_p99s
from bench.stats import bucketed, percentile_ms
from bench.tables import num, table

RECOVERED_P99_S = 0.005
BUCKET_S = 0.1
LEVELS = (1.0, 1.2)
AFTER = 0.5


def _within_p99(over: int, count: int) -> bool:
    """Nearest-rank p99 of ``count`` values, ``over`` of them above the bound, is within it."""
    return count > 0 and over <= count - math.ceil(0.99 * count)


def recovery_seconds(
    offsets: Sequence[float],
    latencies: Sequence[float],
    drop_at: float,
    end: float,
    *,
    bound_s: float = RECOVERED_P99_S,
    bucket_s: float = BUCKET_S,
) -> float | None:
    """Seconds from ``drop_at`` (in ``bucket_s`` steps) until the worker is back: the first
    bucket from which on the p99 of every request meant to be sent until ``end`` is within
    ``bound_s``, that bucket's own p99 included (so a backlog still draining in it counts).
    The same measure as the other rows' p99 over a window: an isolated hiccup later on (a
    scheduler delay at 50% load) is counted by :func:`slow_buckets_after`, not taken for the
    overload's backlog. None: not back by ``end``."""
    samples = bucketed(offsets, latencies, drop_at, end, bucket_s)
    overs = [sum(1 for x in values if x > bound_s) for values in samples]
    tail_over = tail_count = 0
    tails: list[tuple[int, int]] = []
    for values, over in zip(reversed(samples), reversed(overs), strict=True):
        tail_over, tail_count = tail_over + over, tail_count + len(values)
        tails.append((tail_over, tail_count))
    tails.reverse()
    for i, (values, over) in enumerate(zip(samples, overs, strict=True)):
        if values and _within_p99(over, len(values)) and _within_p99(*tails[i]):
            return round(i * bucket_s, 3)
    return None


def slow_buckets_after(
    p99s: Sequence[float | None], drop_index: int, recovered_s: float | None, *, bucket_s: float = BUCKET_S
) -> int | None:
    """Buckets after the recovery whose own p99 is over the bound (isolated hiccups)."""
    if recovered_s is None:
        return None
    first = drop_index + round(recovered_s / bucket_s)
    return sum(1 for p in p99s[first:] if p is not None and p > RECOVERED_P99_S * 1000)


def _window(results: Sequence[LoadResult], lo: float, hi: float) -> tuple[list[float], list[float]]:
    written, intended = [], []
    for r in results:
        for offset, latency, late in zip(r.offsets, r.latencies, r.intended, strict=True):
            if lo <= offset < hi:
                written.append(latency)
                intended.append(late)
    return sorted(written), sorted(intended)


async def run_overload(b: Bench, progress: Any) -> dict[str, Any]:
    cfg = b.cfg
    worker = b.workers[0]
    peak_scenario = Scenario("remoting", "fleet", 1, "hot", "peak")
    progress(f"{peak_scenario.key} (the overload row's 100%) ...")
    peak = await measure(b, peak_scenario)
    rows: list[dict[str, Any]] = []
    for level in LEVELS:
        scenario = Scenario("remoting", "fleet", 1, "hot", f"{level:.0%} then {AFTER:.0%}")
        steps = ((cfg.overload_seconds, level), (cfg.recovery_seconds, AFTER))
        base = _job(b, scenario, (worker.remoting,), warmup=0.5, duration=sum(s for s, _ in steps))
        job = base.__class__(**{**base.__dict__, "rate": peak["rps"], "steps": steps})
        progress(f"{scenario.key} for {cfg.overload_seconds:g} s + {cfg.recovery_seconds:g} s ...")
        before = await worker_counters([worker.url])
        raw: list[LoadResult] = []
        summary = await b.load_pool().run(job, raw=raw)
        after = await worker_counters([worker.url])
        drop_at = cfg.overload_seconds
        written, intended = _window(raw, 0.0, drop_at)
        offsets = [o for r in raw for o in r.offsets]
        latencies = [x for r in raw for x in r.latencies]
        lates = [x for r in raw for x in r.intended]
        end = drop_at + cfg.recovery_seconds
        p99s = window_p99s(raw, end)
        recovered = recovery_seconds(offsets, latencies, drop_at, end)
        row = {
            "scenario": scenario.__dict__,
            "peak_rps": peak["rps"],
            "rate": peak["rps"] * level,
            "overload_seconds": cfg.overload_seconds,
            "recovery_window_seconds": cfg.recovery_seconds,
            "overload_p99_ms": percentile_ms(written, 99),
            "overload_intended_p99_ms": percentile_ms(intended, 99),
            "overload_answered_per_s": len(written) / cfg.overload_seconds,
            "recovery_s": recovered,
            "slow_buckets_after": slow_buckets_after(p99s, round(drop_at / BUCKET_S), recovered),
            "recovery_intended_s": recovery_seconds(offsets, lates, drop_at, end),
            "p99_ms_by_bucket": p99s,
            "errors": summary.errors,
            "error_codes": summary.error_codes,
            "skipped": summary.skipped,
            "worker_side": {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after},
        }
        rows.append(row)
        progress(line(row))
    return {"peak": peak, "rows": rows}


def line(row: dict[str, Any]) -> str:
    def secs(value: float | None) -> str:
        return "never" if value is None else f"{value:.1f} s"

    return (
        f"  {row['rate']:>9,.0f} req/s offered  answered {row['overload_answered_per_s']:,.0f}/s  "
        f"p99 {row['overload_p99_ms']:.2f} ms (from schedule {row['overload_intended_p99_ms']:.2f} ms)  "
        f"busy/errors {row['errors']:,}  recovered after {secs(row['recovery_s'])} "
        f"(from schedule {secs(row['recovery_intended_s'])}), then {_slow(row)} of 100 ms over 5 ms"
    )


def _slow(row: dict[str, Any]) -> str:
    slow = row.get("slow_buckets_after")
    return "-" if slow is None else f"{slow} buckets"


def section(result: dict[str, Any]) -> list[str]:
    """The report's overload table."""
    overload = result.get("overload")
    if not overload:
        return []
    rows = overload["rows"]
    out = [
        f"Overload, 1 worker, hot topics: peak {overload['peak']['rps']:,.0f} req/s, then each level for "
        f"{rows[0]['overload_seconds']:g} s and {AFTER:.0%} for {rows[0]['recovery_window_seconds']:g} s "
        f"(recovered: p99 ≤ {RECOVERED_P99_S * 1000:g} ms from that {BUCKET_S * 1000:g} ms bucket "
        "to the end, that bucket included; then: buckets whose own p99 was over it afterwards)"
    ]
    out += table(
        ["offered", "answered/s", "p99 ms", "p99 from schedule", "busy+errors", "recovered after", "then"],
        [
            [
                row["scenario"]["load"],
                f"{row['overload_answered_per_s']:,.0f}",
                num(row["overload_p99_ms"], ".2f"),
                num(row["overload_intended_p99_ms"], ".2f"),
                f"{row['errors']:,}",
                "never" if row["recovery_s"] is None else f"{row['recovery_s']:.1f} s",
                _slow(row),
            ]
            for row in rows
        ],
        right={1, 2, 3, 4, 5, 6},
    )
    out.append("")
    return out
