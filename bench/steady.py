"""Steady state: what every Lua call costs Redis while the fleet does its everyday work.

For ``steady_seconds`` the fleet serves route lookups at a moderate open-loop rate (uniform over
all topics, spread over every worker) while small brokers heartbeat (BROKER_HEARTBEAT, oneway)
and re-register unchanged, and each big broker holding all lookup topics re-registers unchanged
once: time compressed, but the same mix as brokers re-registering every 30 s. SLOWLOG logs every
command (threshold 0), so each script's longest call is exact, not sampled. The target is that
no call here takes 1 ms or more.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.fleet import LONG_TIMEOUT_MS, Bench
from bench.load_jobs import LoadJob
from bench.procs import CpuMeter, with_other
from bench.redisstats import lua_summary
from namesrv.sim.broker import SimBroker, topic_configs


async def run_steady(b: Bench) -> dict[str, Any]:
    cfg = b.cfg
    small: list[SimBroker] = []
    for i in range(cfg.steady_heartbeat_brokers):
        client = await b.connect(i % len(b.workers))
        broker = SimBroker(
            client,
            "BenchSteady",
            f"steady-{i}",
            f"127.0.2.{i + 1}:10911",
            topics=topic_configs([f"steady-{i}-{t}" for t in range(10)]),
            timeout_ms=LONG_TIMEOUT_MS,
        )
        await broker.register()
        small.append(broker)
    b.keepalive.extend(small)
    # pre-encode the unchanged registrations so the bench's own encoding does not get timed
    big = [(br, br.body()) for br in b.spread_brokers]
    job = LoadJob(
        name="steady/reads",
        protocol="remoting",
        targets=tuple(w.remoting for w in b.workers),
        topics=tuple(b.topics),
        uniform=True,
        conns=1,
        depth=1,
        rate=cfg.steady_read_rate,
        warmup=0.2,
        duration=cfg.steady_seconds,
    )
    slowlog = b.log()
    counts = {"heartbeats": 0, "unchanged_small": 0, "unchanged_big": 0}
    big_latencies: list[float] = []
    stop = asyncio.Event()

    async def brokers() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        big_every = cfg.steady_seconds / (len(big) + 1)
        next_big, next_small = start + big_every / 2, start
        big_index = 0
        while not stop.is_set():
            for broker in small:
                broker.heartbeat()
            counts["heartbeats"] += len(small)
            now = loop.time()
            if now >= next_small:
                await asyncio.gather(*(br.register() for br in small))
                counts["unchanged_small"] += len(small)
                next_small = now + 1.0
            if big_index < len(big) and now >= next_big:
                broker, body = big[big_index]
                started = time.perf_counter()
                await broker.client.invoke(103, broker.header(body), body, timeout=60)
                big_latencies.append(time.perf_counter() - started)
                counts["unchanged_big"] += 1
                big_index += 1
                next_big = now + big_every
            await asyncio.sleep(cfg.steady_heartbeat_interval)

    driver: list[asyncio.Task[None]] = []

    meter = CpuMeter(b.roles())
    cores: dict[str, float] = {}

    async def window_start() -> None:
        await slowlog.start(0, max_len=1_000_000)
        meter.start()
        driver.append(asyncio.create_task(brokers()))

    async def window_end() -> None:
        stop.set()
        for task in driver:
            await task
        cores.update(meter.stop())
        await slowlog.stop()

    reads = await b.load_pool().run(job, on_window_start=window_start, on_window_end=window_end)
    lua = lua_summary(await slowlog.collect())
    return {
        "seconds": cfg.steady_seconds,
        "reads": reads.as_dict(),
        "counts": counts,
        "unchanged_big_ms": [x * 1000 for x in big_latencies],
        "lua": lua,
        "cores": with_other(cores),
    }
