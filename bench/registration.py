"""REGISTER_BROKER (code 103) latency, as a broker sees it, and what each registration costs Redis.

For each size (topics per broker) three kinds, ``reg_reps`` times each, one at a time, with no
other load:

- **new**: a broker name never seen before, on its own new connection (the first one creates the
  topics; the next ones add their queues to existing topics, as brokers of one cluster do);
- **unchanged**: the first broker again with the same DataVersion (its every-30-s re-register);
- **bumped**: the same broker after one of its topics changed (its queue count) and ``bump()``
  (DataVersion counter + 1), as a broker does when a topic is created or altered.

Each row also gives the share of the time spent decoding (the same decoder the worker runs, timed
in the bench process on the same body: an estimate of the worker's share), in Lua (SLOWLOG) and
the rest (the wire, the worker's other work, waiting). For **new**, ``floor_ms`` is what Redis needs
for the same writes as plain commands in one pipelined batch (HSET of each topic's queue, SADD of
the topic sets, the liveness keys), in a scratch namespace; ``floor_server_ms`` is Redis' own time
in that batch (INFO commandstats), what no implementation with this key schema can go below.

The body is encoded before the clock starts, so the latency is the request on the wire, the
worker's work and its Lua calls, and the reply: what RocketMQ's broker waits for. SLOWLOG runs
with a 20 µs threshold around each registration (``SLOWLOG_US``), giving its longest single Lua
call, the number of calls and their total time in Redis. The worker sends a chunk while it builds
the next, so decode, Lua and the rest overlap a little: the rest is what is left of the total.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from redis.asyncio import Redis

from bench.fleet import LONG_TIMEOUT_MS, Bench
from bench.loops import GC_THRESHOLDS
from bench.procs import CpuMeter, with_other
from bench.stats import median
from namesrv.domain.model import DataVersion, RawBody, TopicConfig
from namesrv.protocol.body_delta import RegisterBodyDecoder
from namesrv.protocol.fastjson import quote
from namesrv.sim.bodies import register_body_json
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient

REGISTER_BROKER = 103
# what the workers run in the background (expiry sweeps, change-feed polls, the bench's
# keep-alive heartbeats): not part of any registration
BACKGROUND_SCRIPTS = frozenset({"expireBrokers", "brokerHeartbeat", "readChanges"})
# Redis 7 logs the commands a script runs too: at threshold 0 a new 10k-topic broker's chunks
# log 10,000 HSETs, which slows them by about a fifth. Every script call of a registration takes
# longer than this; the commands inside it (about 1 µs each) do not.
SLOWLOG_US = 20


def _decode_ms(decoder: RegisterBodyDecoder, broker: SimBroker, body: bytes) -> float:
    """The worker's decoder on the same body, in this process (it remembers bodies as the
    worker does, so a bumped body is decoded as a delta here too)."""
    raw = RawBody(body, broker.client.version, broker.compressed)
    # The worker's collector: its long-lived objects frozen, young ones collected rarely. With
    # Python's defaults this process (holding the run's results) doubles the figure.
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        started = time.perf_counter()
        decoder.decode(raw, broker.addr, 0)
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    decoder.prepare(broker.addr)  # the worker does this in the background, after replying
    return elapsed


FLOOR_COMMANDS = ("hset", "sadd", "zadd", "xadd")


async def _server_usec(redis: Redis) -> float:
    """Redis' own time so far in the commands a floor batch sends (INFO commandstats)."""
    stats = await redis.info("commandstats")
    return float(sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in FLOOR_COMMANDS))


async def redis_floor_ms(
    redis: Redis, broker_name: str, configs: dict[str, TopicConfig]
) -> tuple[float, float]:
    """A new broker's writes as plain commands in one pipelined batch, in a scratch namespace:
    (the batch's wall time, Redis' own time in it). The wall time is mostly the client's: redis-py
    packs and parses 10,000 commands in Python; Redis' time is what the writes cost it."""
    ns = "{benchfloor}"
    quoted = quote(broker_name)
    pipe = redis.pipeline(transaction=False)
    names = list(configs)
    for name, tc in configs.items():
        pipe.hset(f"{ns}:topic:{name}", broker_name, tc.queue_data_json(quoted))
    for i in range(0, len(names), 500):
        pipe.sadd(f"{ns}:topics", *names[i : i + 500])
        pipe.sadd(f"{ns}:btopics:{broker_name}", *names[i : i + 500])
    pipe.hset(f"{ns}:brokers", broker_name, "{}")
    pipe.hset(f"{ns}:live", broker_name, "{}")
    pipe.zadd(f"{ns}:deadlines", {broker_name: 1})
    pipe.hset(f"{ns}:dataversions", broker_name, "{}")
    pipe.xadd(f"{ns}:events", {"kind": "registerQueues", "n": len(names)})
    server_before = await _server_usec(redis)
    started = time.perf_counter()
    await pipe.execute()
    elapsed = (time.perf_counter() - started) * 1000
    server_ms = (await _server_usec(redis) - server_before) / 1000
    keys = [f"{ns}:topic:{n}" for n in names]
    for i in range(0, len(keys), 1000):
        await redis.delete(*keys[i : i + 1000])
    await redis.delete(
        f"{ns}:topics",
        f"{ns}:btopics:{broker_name}",
        f"{ns}:brokers",
        f"{ns}:live",
        f"{ns}:deadlines",
        f"{ns}:dataversions",
        f"{ns}:events",
    )
    return elapsed, server_ms


async def _timed(
    b: Bench, broker: SimBroker, body: bytes, decoder: RegisterBodyDecoder | None
) -> dict[str, Any]:
    """``decoder`` None: the worker does not decode this body (the unchanged re-registration)."""
    slowlog = b.log()
    header = broker.header(body)
    decode_ms = _decode_ms(decoder, broker, body) if decoder is not None else 0.0
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
        "decode_ms": decode_ms,
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
        "decode_ms": median([r["decode_ms"] for r in runs]),
        # decode_ms is measured apart (in this process), so a noisy run can make the difference negative
        "rest_ms": median([max(0.0, r["ms"] - r["lua_total_ms"] - r["decode_ms"]) for r in runs]),
    }


async def run_registration(b: Bench, progress: Any) -> list[dict[str, Any]]:
    """Ours (worker-0) and then every peer, size by size, so each pair sees the same machine."""
    cfg = b.cfg
    rows: list[dict[str, Any]] = []
    await b.log().start(SLOWLOG_US, max_len=100_000)
    created: list[SimBroker] = []
    meter = CpuMeter(b.roles())
    meter.start()
    targets = [("fleet", f"127.0.0.1:{b.workers[0].remoting_port}")] + [(p.name, p.addr) for p in cfg.peers]
    try:
        for s, size in enumerate(cfg.reg_sizes):
            configs = topic_configs([f"reg{size}-{i:05d}" for i in range(size)])
            for target, address in targets:
                ours = target == "fleet"
                found = await _register_kinds(b, target, address, s, size, configs, created, ours)
                for row in found:
                    row["target"] = target
                    progress(_line(row))
                rows += found
        cores = with_other(meter.stop())
        for row in rows:
            row["phase_cores"] = cores
    finally:
        await b.log().stop()
        for broker in created:  # leave the registries as they were for the phases after this one
            try:
                await broker.unregister()
            except Exception as exc:  # the run's result stands; say what was left behind
                progress(f"  (could not unregister {broker.name}: {exc})")
    return rows


async def _register_kinds(
    b: Bench,
    target: str,
    address: str,
    s: int,
    size: int,
    configs: dict[str, TopicConfig],
    created: list[SimBroker],
    ours: bool,
) -> list[dict[str, Any]]:
    """new, unchanged and bumped registrations of ``size`` topics against one NameServer. Lua,
    decode and the Redis floor are measured for ours only (a peer's insides are not visible)."""
    cfg = b.cfg
    decoder = RegisterBodyDecoder() if ours else None
    if decoder is not None:  # the first decode in a process pays one-time costs: not the worker's
        decoder.decode(RawBody(register_body_json(configs, DataVersion(1, 0, 0)), 399, False), "warm-up", 0)
    rows: list[dict[str, Any]] = []
    new_runs: list[dict[str, Any]] = []
    body = b""
    mine: list[SimBroker] = []
    for i in range(cfg.reg_reps):
        client = await RemotingClient.connect(address)
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
        new_runs.append(await _timed(b, broker, body, decoder))
        created.append(broker)
        mine.append(broker)
    rows.append(_summary("new", size, len(body), new_runs))
    if ours:
        floors = [await redis_floor_ms(b.redis, f"floor{size}-{i}", configs) for i in range(cfg.reg_reps)]
        rows[-1]["floor_ms"] = median([wall for wall, _ in floors])
        rows[-1]["floor_server_ms"] = median([server for _, server in floors])
    first = mine[0]
    body = first.body()
    unchanged = [await _timed(b, first, body, None) for _ in range(cfg.reg_reps)]
    rows.append(_summary("unchanged", size, len(body), unchanged))
    bumped: list[dict[str, Any]] = []
    first.topics = dict(first.topics)  # the brokers of this size share one table
    for rep in range(cfg.reg_reps):
        name = next(iter(first.topics)) if rep % 2 else list(first.topics)[size // 2]
        queues = 4 if first.topics[name].readQueueNums != 4 else 8
        first.topics[name] = TopicConfig(name, queues, queues, first.topics[name].perm)
        first.bump()
        body = first.body()
        bumped.append(await _timed(b, first, body, decoder))
    rows.append(_summary("bumped", size, len(body), bumped))
    return rows


def _line(row: dict[str, Any]) -> str:
    return (
        f"  {row['target']:<8} register {row['kind']:<9} {row['topics']:>6} topics: "
        f"median {row['median_ms']:.1f} ms, "
        f"max {row['max_ms']:.1f} ms, longest Lua {row['lua_max_ms']:.2f} ms ({row['lua_max_script']}), "
        f"{row['lua_calls']:.0f} Lua calls / {row['lua_total_ms']:.1f} ms in Redis, "
        f"decode ~{row['decode_ms']:.1f} ms, rest {row['rest_ms']:.1f} ms"
        + (
            f"; Redis floor {row['floor_ms']:.1f} ms ({row['floor_server_ms']:.1f} ms in Redis)"
            if "floor_ms" in row
            else ""
        )
    )
