"""REGISTER_BROKER (code 103) latency, as a broker sees it, and what each registration costs Redis.

For each size (topics per broker) three kinds, ``reg_reps`` times each, one at a time, with no
other load:

- **new**: a broker name never seen before, on its own new connection (the first one creates the
  topics; the next ones add their queues to existing topics, as brokers of one cluster do);
- **unchanged**: the first broker again with the same DataVersion (its every-30-s re-register);
- **bumped**: the same broker after ``bump()`` (its topic table changed: DataVersion counter + 1).

The body is encoded before the clock starts, so the latency is the request on the wire, the
worker's work and its Lua calls, and the reply: what RocketMQ's broker waits for. SLOWLOG runs
with threshold 0 around each registration, giving its longest single Lua call, the number of
calls and their total time in Redis.
"""

from __future__ import annotations

import time
from typing import Any

from bench.fleet import LONG_TIMEOUT_MS, Bench
from bench.procs import CpuMeter, with_other
from bench.stats import median
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient

REGISTER_BROKER = 103
# what the workers run in the background (expiry sweeps, the bench's keep-alive heartbeats):
# not part of any registration
BACKGROUND_SCRIPTS = frozenset({"expireBrokers", "brokerHeartbeat"})


async def _timed(b: Bench, broker: SimBroker, body: bytes) -> dict[str, Any]:
    slowlog = b.log()
    header = broker.header(body)
    await slowlog.collect()
    started = time.perf_counter()
    reply = await broker.client.invoke(REGISTER_BROKER, header, body, timeout=120)
    elapsed = time.perf_counter() - started
    calls = [c for c in await slowlog.collect() if c.script not in BACKGROUND_SCRIPTS]
    if reply.code != 0:
        raise RuntimeError(f"REGISTER_BROKER of {broker.name} answered {reply.code}: {reply.remark}")
    longest = max(calls, key=lambda c: c.micros, default=None)
    return {
        "ms": elapsed * 1000,
        "lua_calls": len(calls),
        "lua_total_ms": sum(c.micros for c in calls) / 1000,
        "lua_max_ms": longest.micros / 1000 if longest else 0.0,
        "lua_max_script": longest.script if longest else "",
        "scripts": sorted({c.script for c in calls}),
    }


def _summary(kind: str, size: int, body: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    ms = [r["ms"] for r in runs]
    return {
        "kind": kind,
        "topics": size,
        "body_bytes": body,
        "runs": runs,
        "median_ms": median(ms),
        "max_ms": max(ms),
        "lua_max_ms": max(r["lua_max_ms"] for r in runs),
        "lua_max_script": max(runs, key=lambda r: r["lua_max_ms"])["lua_max_script"],
        "lua_calls": median([float(r["lua_calls"]) for r in runs]),
        "lua_total_ms": median([r["lua_total_ms"] for r in runs]),
    }


async def run_registration(b: Bench, progress: Any) -> list[dict[str, Any]]:
    cfg = b.cfg
    rows: list[dict[str, Any]] = []
    await b.log().start(0, max_len=100_000)
    created: list[SimBroker] = []
    meter = CpuMeter(b.roles())
    meter.start()
    try:
        for s, size in enumerate(cfg.reg_sizes):
            configs = topic_configs([f"reg{size}-{i:05d}" for i in range(size)])
            new_runs: list[dict[str, Any]] = []
            body = b""
            for i in range(cfg.reg_reps):
                client = await RemotingClient.connect(f"127.0.0.1:{b.workers[0].remoting_port}")
                b.clients.append(client)
                broker = SimBroker(
                    client,
                    "BenchReg",
                    f"reg{size}-new-{i}",
                    f"127.0.{3 + s}.{i + 1}:10911",
                    topics=configs,
                    timeout_ms=LONG_TIMEOUT_MS,
                )
                body = broker.body()
                new_runs.append(await _timed(b, broker, body))
                created.append(broker)
            rows.append(_summary("new", size, len(body), new_runs))
            progress(_line(rows[-1]))
            first = created[-cfg.reg_reps]
            body = first.body()
            rows.append(
                _summary(
                    "unchanged", size, len(body), [await _timed(b, first, body) for _ in range(cfg.reg_reps)]
                )
            )
            progress(_line(rows[-1]))
            bumped: list[dict[str, Any]] = []
            for _ in range(cfg.reg_reps):
                first.bump()
                body = first.body()
                bumped.append(await _timed(b, first, body))
            rows.append(_summary("bumped", size, len(body), bumped))
            progress(_line(rows[-1]))
        cores = with_other(meter.stop())
        for row in rows:
            row["phase_cores"] = cores
    finally:
        await b.log().stop()
        for broker in created:  # leave the registry as it was for the phases after this one
            try:
                await broker.unregister()
            except Exception as exc:  # the run's result stands; say what was left behind
                progress(f"  (could not unregister {broker.name}: {exc})")
    return rows


def _line(row: dict[str, Any]) -> str:
    return (
        f"  register {row['kind']:<9} {row['topics']:>6} topics: median {row['median_ms']:.1f} ms, "
        f"max {row['max_ms']:.1f} ms, longest Lua {row['lua_max_ms']:.2f} ms ({row['lua_max_script']}), "
        f"{row['lua_calls']:.0f} Lua calls / {row['lua_total_ms']:.1f} ms in Redis"
    )
