"""Route lookups (GET_ROUTEINFO_BY_TOPIC over remoting, GET /v1/routes/{topic} over HTTP):
peak throughput (closed loop), latency at a fraction of that peak (open loop), against 1..N
workers and against the same number of bare ceiling processes, with the same load generator.

Each measurement records, over its window only: requests/s, latency percentiles, errors, the CPU
cores used by the load generator, the servers under test, Redis, and everything else on the
machine, and what Redis did per request (commands and microseconds, from INFO commandstats),
plus any Lua call of 1 ms or more (SLOWLOG).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.core_speed import CoreSpeedProbe
from bench.core_speed import describe as describe_core_speed
from bench.fleet import Bench, worker_counters
from bench.load_jobs import LoadJob, LoadResult, Protocol
from bench.procs import CpuMeter, CpuWaitMeter, settle, with_other
from bench.redisstats import LUA_COMMANDS, commandstats, lua_summary, reset_stats
from bench.stats import bucket_p99s

SLOW_LUA_US = 1000  # during lookups only calls of 1 ms or more are logged (the steady-state target)


@dataclass(frozen=True)
class Scenario:
    protocol: Protocol
    server: str  # "fleet", "ceiling" or a peer's name
    size: int  # worker (or ceiling) processes
    pattern: str  # "hot" or "spread"
    load: str  # "peak", "80%" or "warm-up"

    @property
    def key(self) -> str:
        if self.server in ("fleet", "ceiling"):
            servers = "workers" if self.server == "fleet" else "ceiling"
            return f"{self.protocol}/{servers}={self.size}/{self.pattern}/{self.load}"
        return f"{self.protocol}/peer={self.server}/{self.pattern}/{self.load}"


def window_p99s(raw: list[LoadResult], duration: float) -> list[float | None]:
    """p99 (ms, rounded) of every 100 ms of an open-loop window's first ``duration`` s, by when each
    request was meant to be sent."""
    offsets = [o for r in raw for o in r.offsets]
    latencies = [x for r in raw for x in r.latencies]
    return [None if p is None else round(p, 2) for p in bucket_p99s(offsets, latencies, 0.0, duration)]


async def measure(b: Bench, scenario: Scenario, rate: float = 0.0) -> dict[str, Any]:
    cfg = b.cfg
    peer = b.peer(scenario.server)
    servers = b.workers[: scenario.size] if scenario.server == "fleet" else b.ceilings[: scenario.size]
    if peer is not None:
        servers = []
    targets = tuple(s.remoting if scenario.protocol == "remoting" else s.http for s in servers)
    if peer is not None:
        targets = (peer.remoting,)
    job = _job(b, scenario, targets, rate=rate, warmup=cfg.warmup, duration=cfg.duration)
    pids = b.pids()
    tested = [s.proc.pid for s in servers]
    if peer is not None and peer.pid is not None:
        tested = [peer.pid]
    roles = {
        "load": pids["load"],
        "server": tested,
        "redis": pids["redis"],
        "bench": pids["bench"],
        "idle_servers": [p for p in pids["workers"] + pids["ceilings"] if p not in tested],
    }
    meter = CpuMeter(roles)
    waits = CpuWaitMeter(tested)
    speed = CoreSpeedProbe()
    cores_speed: dict[str, Any] = {}
    waited: dict[str, Any] = {}
    cores: dict[str, float] = {}
    redis_stats: dict[str, dict[str, float]] = {}
    slowlog = b.log()
    fleet_urls = [w.url for w in b.workers[: scenario.size]] if scenario.server == "fleet" else []
    counted_before: dict[str, float] = {}
    counted: dict[str, float] = {}

    async def before_window() -> None:
        await speed.launch()
        # in the warm-up: a scrape of /metrics at the window's start made its first 100 ms a tail
        if fleet_urls:
            counted_before.update(await worker_counters(fleet_urls))

    async def window_start() -> None:
        await reset_stats(b.redis)
        await slowlog.collect()  # drop what the warm-up logged
        meter.start()
        waits.start()
        await speed.start()

    async def window_end() -> None:
        cores.update(meter.stop())
        waited.update(waits.stop() or {})
        cores_speed.update(await speed.stop() or {})
        redis_stats.update(await commandstats(b.redis))
        after = await worker_counters(fleet_urls)
        counted.update({k: v - counted_before.get(k, 0.0) for k, v in after.items()})

    settled = await settle(pids["workers"] + pids["ceilings"])
    raw: list[LoadResult] = []
    summary = await b.load_pool().run(
        job,
        before_window=before_window,
        on_window_start=window_start,
        on_window_end=window_end,
        raw=raw,
    )
    lua = lua_summary(await slowlog.collect())
    cores = with_other(cores)
    # our own INFO/CONFIG/SLOWLOG calls are a handful per window: negligible next to the load
    redis_calls = sum(v["calls"] for v in redis_stats.values())
    redis_us = sum(v["usec"] for v in redis_stats.values())
    lua_calls = sum(v["calls"] for k, v in redis_stats.items() if k in LUA_COMMANDS)
    done = max(summary.completed, 1)
    return {
        "scenario": scenario.__dict__,
        **summary.as_dict(),
        "cores": cores,
        # open loop: when in the window the slow replies were (a one-off stall or a steady tail)
        "p99_ms_by_bucket": window_p99s(raw, cfg.duration) if rate else None,
        # CPU the servers under test spent per successful lookup: comparable with the ceiling's
        "server_us_per_request": (
            cores.get("server", 0.0) * 1e6 / summary.rps if summary.rps and tested else None
        ),
        "redis_calls_per_request": redis_calls / done,
        "redis_lua_calls_per_request": lua_calls / done,
        "redis_us_per_request": redis_us / done,
        "redis_commands": redis_stats,
        "lua_over_1ms": lua,
        # the workers' route cache over the window: hit / miss / bypass (change feed not fresh)
        "route_cache": {k.removeprefix("cache."): v for k, v in counted.items() if k.startswith("cache.")},
        # by the workers' own clocks: requests and GC pauses of the window, and those over 5 ms
        "worker_side": {k: v for k, v in counted.items() if not k.startswith("cache.")},
        # how long the servers under test were runnable but waiting for a CPU (kernel schedstat;
        # None where it keeps none): a tail the servers did not make themselves
        "server_cpu_wait": waited or None,
        # how fast each core ran, step by step (a probe's fixed work): a worker that fell behind
        # while its core ran at the slow speed was given less CPU than the peak was measured with
        "core_speed": cores_speed or None,
        "settle_seconds": settled,
    }


async def run_lookups(b: Bench, protocol: Protocol, progress: Any) -> list[dict[str, Any]]:
    cfg = b.cfg
    rows: list[dict[str, Any]] = []
    await b.log().start(SLOW_LUA_US, max_len=100_000)
    try:
        if protocol == "remoting":
            for peer in cfg.peers:
                await _warm_up(b, peer.name, progress)
        for size in cfg.fleet_sizes:
            # peers run right after one worker, pattern by pattern, so both see the same machine
            turns = ["fleet"] + ([p.name for p in cfg.peers] if size == 1 and protocol == "remoting" else [])
            plan = [(server, pattern) for pattern in ("hot", "spread") for server in turns]
            plan.append(("ceiling", "hot"))  # a ceiling answers every topic alike: one pattern is enough
            for server, pattern in plan:
                peak_scenario = Scenario(protocol, server, size, pattern, "peak")
                progress(f"{peak_scenario.key} ...")
                peak = await measure(b, peak_scenario)
                rows.append(peak)
                progress(_line(peak))
                if protocol == "remoting" and peak["rps"] > 0 and cfg.load_fraction > 0:
                    scenario = Scenario(protocol, server, size, pattern, f"{cfg.load_fraction:.0%}")
                    progress(f"{scenario.key} ...")
                    row = await measure(b, scenario, rate=peak["rps"] * cfg.load_fraction)
                    rows.append(row)
                    progress(_line(row))
    finally:
        await b.log().stop()
    return rows


async def _warm_up(b: Bench, name: str, progress: Any) -> None:
    """Closed-loop lookups to a peer before anything is measured (our workers need none: Python
    does not compile as it goes, and their caches were filled at setup)."""
    peer = b.peer(name)
    if peer is None or b.cfg.peer_warmup <= 0:
        return
    progress(f"warming up {name} for {b.cfg.peer_warmup:g} s (JIT)")
    for pattern in ("hot", "spread"):
        scenario = Scenario("remoting", name, 1, pattern, "warm-up")
        warmup = max(0.0, b.cfg.peer_warmup / 2 - 0.5)
        await b.load_pool().run(_job(b, scenario, (peer.remoting,), warmup=warmup, duration=0.5))


def _job(
    b: Bench,
    scenario: Scenario,
    targets: tuple[tuple[str, int], ...],
    *,
    warmup: float,
    duration: float,
    rate: float = 0.0,
) -> LoadJob:
    """The load of one scenario: its topics, and the connections of its protocol."""
    remoting = scenario.protocol == "remoting"
    return LoadJob(
        name=scenario.key,
        protocol=scenario.protocol,
        targets=targets,
        topics=tuple(b.hot if scenario.pattern == "hot" else b.topics),
        uniform=scenario.pattern == "spread",
        conns=b.cfg.conns if remoting else b.cfg.http_conns,
        depth=b.cfg.depth if remoting else b.cfg.http_depth,
        rate=rate,
        warmup=warmup,
        duration=duration,
    )


def _line(row: dict[str, Any]) -> str:
    c = row["cores"]
    cache = row.get("route_cache") or {}
    total = sum(cache.values())
    outcome = "  cache " + " ".join(f"{k} {v / total:.0%}" for k, v in sorted(cache.items())) if total else ""
    seen = row.get("worker_side") or {}
    if seen.get("requests"):
        slow, gc, loop = seen.get("requests.slow", 0), seen.get("gc.slow", 0), seen.get("loop.slow", 0)
        full = f"{seen.get('gc2.slow', 0):,.0f} of {seen.get('gc2', 0):,.0f} full"
        outcome += (
            f"  worker-side >5 ms: {slow:,.0f} requests, {gc:,.0f} GC pauses ({full}), "
            f"{loop:,.0f} late loop ticks"
        )
        caught = [f"{how} {seen.get(f'catch_up.{how}', 0):,.0f}" for how in ("in_flight", "read", "failed")]
        outcome += "  catch-ups: " + ", ".join(caught)
        outcome += f"  probe vouched {seen.get('probe.vouched', 0):,.0f}"
    waited = row.get("server_cpu_wait")
    if waited:
        most = waited["max_step_ms"]
        outcome += f"  waited for a CPU {waited['ms']:,.0f} ms (one at most {most:.0f} ms of 100 ms)"
    slow_cores = describe_core_speed(row.get("core_speed"))
    if slow_cores:
        outcome += f"  {slow_cores}"
    return (
        f"  {row['rps']:>9,.0f} req/s  p50 {row['p50_ms']:.2f} ms  p99 {row['p99_ms']:.2f} ms  "
        f"errors {row['errors']}  cores: load {c.get('load', 0):.2f} server {c.get('server', 0):.2f} "
        f"redis {c.get('redis', 0):.2f} other {c.get('other', 0):.2f}{outcome}"
    )
