"""The system under test, set up once per run: Redis, the workers, the simulated brokers that hold
the lookup topics, the bare ceiling servers and the load generator pool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from redis.asyncio import Redis

from bench import procs
from bench.config import BenchConfig
from bench.loadgen import LoadPool
from bench.peers import Peer, PeerSetup, spread_broker
from bench.redisstats import Slowlog, key_memory, memory, script_names
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient

LONG_TIMEOUT_MS = 3_600_000  # brokers that must outlive the run; kept alive by heartbeats anyway
KEEPALIVE_S = 10.0  # under serverChannelMaxIdleTimeSeconds (120 s), as real brokers do (30 s)
ROUTE_VERSION = 479  # a 5.3.3 client: asks for standard JSON
SYSTEM_ERROR = 1  # with remark "Redis unavailable: ...": Redis did not answer within the deadline
SYSTEM_BUSY = 2
BUSY_RETRIES = 20
# Answers that say "not now" rather than "no route": the warm-up asks again.
TRANSIENT = {SYSTEM_ERROR, SYSTEM_BUSY}


@dataclass
class Bench:
    cfg: BenchConfig
    log_dir: Path
    redis_proc: procs.Proc
    redis_url: str
    redis: Redis
    workers: list[procs.Worker] = field(default_factory=list)
    ceilings: list[procs.Ceiling] = field(default_factory=list)
    pool: LoadPool | None = None
    slowlog: Slowlog | None = None
    topics: list[str] = field(default_factory=list)
    hot: list[str] = field(default_factory=list)
    spread_brokers: list[SimBroker] = field(default_factory=list)
    clients: list[RemotingClient] = field(default_factory=list)
    keepalive: list[SimBroker] = field(default_factory=list)
    route_body: bytes = b""
    http_body: bytes = b""
    peer_setup: PeerSetup = field(default_factory=PeerSetup)
    _keepalive_task: asyncio.Task[None] | None = None

    def peer(self, name: str) -> Peer | None:
        return next((p for p in self.cfg.peers if p.name == name), None)

    @property
    def events_key(self) -> str:
        return "{" + self.cfg.namespace + "}:events"

    def load_pool(self) -> LoadPool:
        assert self.pool is not None
        return self.pool

    def log(self) -> Slowlog:
        assert self.slowlog is not None
        return self.slowlog

    def worker_env(self) -> dict[str, str]:
        env = {"NAMESRV_SCAN_NOT_ACTIVE_BROKER_INTERVAL": str(self.cfg.sweep_ms)}
        env.update(dict(self.cfg.worker_env))
        return env

    async def connect(self, worker: int = 0) -> RemotingClient:
        client = await RemotingClient.connect(f"127.0.0.1:{self.workers[worker].remoting_port}")
        self.clients.append(client)
        return client

    # ---- start-up ----
    async def start_workers(self, count: int) -> None:
        for i in range(count):
            self.workers.append(
                procs.start_worker(
                    f"worker-{i}", self.redis_url, self.cfg.namespace, self.log_dir, self.worker_env()
                )
            )
        await asyncio.gather(*(procs.wait_http_ready(w.proc, f"{w.url}/readyz") for w in self.workers))
        self.slowlog = Slowlog(self.redis, script_names())
        await self.redis.config_set("slowlog-log-slower-than", -1)

    async def register_spread(self) -> dict[str, object]:
        """Register the lookup topics on ``spread_brokers`` brokers (each holds all of them, as
        topics created on every broker of a cluster), measuring Redis memory as it grows."""
        cfg = self.cfg
        self.topics = [f"bench-{i:05d}" for i in range(cfg.topics)]
        self.hot = self.topics[: cfg.hot_topics]
        configs = topic_configs(self.topics)
        samples: list[dict[str, int]] = []

        async def sample() -> None:
            await asyncio.sleep(0.3)  # let Redis release the query buffers of the big calls
            snapshot = await memory(self.redis)
            snapshot["events_bytes"] = await key_memory(self.redis, self.events_key)
            samples.append(snapshot)

        await sample()
        for i in range(cfg.spread_brokers):
            client = await self.connect(i % len(self.workers))
            broker = spread_broker(client, i, configs, LONG_TIMEOUT_MS)
            await broker.register()
            self.spread_brokers.append(broker)
            self.keepalive.append(broker)
            await sample()
        self._keepalive_task = asyncio.create_task(self._keep_alive(), name="bench-keepalive")
        return _memory_report(samples, cfg.topics)

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(KEEPALIVE_S)
            for broker in list(self.keepalive):
                with contextlib.suppress(Exception):
                    broker.heartbeat()

    async def check_routes(self) -> None:
        """Every worker answers a hot and a spread topic, over remoting and HTTP, with the route."""
        async with aiohttp.ClientSession() as session:
            for i, worker in enumerate(self.workers):
                client = await self.connect(i)
                for topic in (self.hot[0], self.topics[-1]):
                    reply = await client.invoke(105, {"topic": topic}, version=ROUTE_VERSION)
                    if reply.code != 0 or not reply.body or b"brokerDatas" not in reply.body:
                        raise RuntimeError(
                            f"worker-{i}: route of {topic} over remoting: {reply.code} {reply.remark}"
                        )
                    if i == 0 and topic == self.hot[0]:
                        self.route_body = reply.body
                    async with session.get(f"{worker.url}/v1/routes/{topic}") as resp:
                        body = await resp.read()
                        if resp.status != 200 or b"brokerDatas" not in body:
                            raise RuntimeError(f"worker-{i}: route of {topic} over HTTP: {resp.status}")
                        if i == 0 and topic == self.hot[0]:
                            self.http_body = body
                await client.aclose()

    async def warm_routes(self, batch: int = 200) -> float:
        """Look every topic up once on every worker, so the measurements see the steady state
        (every route cached) instead of the cold start: a warm-up window of a few seconds would
        not fill 10,000 routes, and the misses would be counted as lookup cost."""
        started = time.perf_counter()
        for i in range(len(self.workers)):
            client = await self.connect(i)
            for start in range(0, len(self.topics), batch):
                part = self.topics[start : start + batch]
                for attempt in range(BUSY_RETRIES + 1):
                    replies = await asyncio.gather(
                        *(client.invoke(105, {"topic": t}, version=ROUTE_VERSION) for t in part)
                    )
                    failed = [
                        (t, r.code, r.remark) for t, r in zip(part, replies, strict=True) if r.code != 0
                    ]
                    # A busy machine slows Redis: a worker sheds load (SYSTEM_BUSY) or misses its
                    # Redis deadline (SYSTEM_ERROR). Neither says the route is missing: ask again.
                    if (
                        not failed
                        or attempt == BUSY_RETRIES
                        or any(code not in TRANSIENT for _, code, _ in failed)
                    ):
                        break
                    part = [t for t, _, _ in failed]
                    await asyncio.sleep(0.2)
                if failed:
                    raise RuntimeError(f"worker-{i}: no route for {failed[:3]} (topic, code, remark)")
            await client.aclose()
        return round(time.perf_counter() - started, 2)

    async def start_ceilings(self, count: int) -> None:
        remoting_body = self.log_dir / "route-body.bin"
        http_body = self.log_dir / "route-body.json"
        remoting_body.write_bytes(self.route_body)
        http_body.write_bytes(self.http_body)
        self.ceilings = list(
            await asyncio.gather(
                *(
                    procs.start_ceiling(f"ceiling-{i}", remoting_body, http_body, self.log_dir)
                    for i in range(count)
                )
            )
        )

    def start_pool(self) -> None:
        self.pool = LoadPool.of_kind(self.cfg.procs, self.cfg.loadgen_nice, self.cfg.loadgen)
        self.pool.start()

    def pids(self) -> dict[str, list[int]]:
        return {
            "workers": [w.proc.pid for w in self.workers],
            "ceilings": [c.proc.pid for c in self.ceilings],
            "redis": [self.redis_proc.pid],
            "load": self.pool.pids if self.pool else [],
            "bench": [os.getpid()],
        }

    def roles(self) -> dict[str, list[int]]:
        """Every process of the bench by role, for a :class:`procs.CpuMeter`."""
        pids = self.pids()
        return {
            "load": pids["load"],
            "workers": pids["workers"],
            "ceilings": pids["ceilings"],
            "redis": pids["redis"],
            "bench": pids["bench"],
        }

    # ---- shutdown ----
    async def close(self) -> None:
        await self.peer_setup.close()
        if self._keepalive_task is not None:
            self._keepalive_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive_task
        if self.pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.pool.close)
        for client in self.clients:
            client.close()
        for proc in [*(c.proc for c in self.ceilings), *(w.proc for w in self.workers)]:
            await proc.stop()
        await self.redis.aclose()
        await self.redis_proc.stop()


def _memory_report(samples: list[dict[str, int]], topics: int) -> dict[str, object]:
    """Bytes per 10k topics: for the first broker (creates the topics), for each broker after it
    (adds its queue to existing topics), and what each registration added to the change log."""
    scale = 10_000 / topics
    steps = []
    for before, after in zip(samples, samples[1:], strict=False):
        dataset = after["dataset_bytes"] - before["dataset_bytes"]
        events = after["events_bytes"] - before["events_bytes"]
        steps.append(
            {
                "used_memory": int((after["used_memory"] - before["used_memory"]) * scale),
                "dataset": int(dataset * scale),
                "events": int(events * scale),
                "tables": int((dataset - events) * scale),
            }
        )
    return {"topics": topics, "samples": samples, "per_10k_topics": steps}


CACHE_METRIC = "namesrv_route_cache_lookups_total{"
CATCH_UP_METRIC = "namesrv_route_cache_catch_ups_total{"
REFRESH_METRIC = "namesrv_route_cache_refreshes_total{"
SLOW_S = "0.005"  # a bucket bound of namesrv.metrics.LATENCY_BUCKETS: the p99 bound
# series of a worker's /metrics page -> what worker_counters calls them ('.fast': within 5 ms)
COUNTED = (
    (re.compile(r'namesrv_request_seconds_count\{.*transport="remoting"'), "requests"),
    (re.compile(rf'namesrv_request_seconds_bucket\{{le="{SLOW_S}",.*transport="remoting"'), "requests.fast"),
    (re.compile(r"namesrv_gc_pause_seconds_count\{"), "gc"),
    (re.compile(rf'namesrv_gc_pause_seconds_bucket\{{generation="\d",le="{SLOW_S}"'), "gc.fast"),
    (re.compile(r'namesrv_gc_pause_seconds_count\{generation="2"'), "gc2"),
    (re.compile(rf'namesrv_gc_pause_seconds_bucket\{{generation="2",le="{SLOW_S}"'), "gc2.fast"),
    (re.compile(r"namesrv_event_loop_lag_seconds_count "), "loop"),
    (re.compile(rf'namesrv_event_loop_lag_seconds_bucket\{{le="{SLOW_S}"\}}'), "loop.fast"),
    (re.compile(r"namesrv_freshness_probe_vouched_total "), "probe.vouched"),
)


async def worker_counters(urls: list[str]) -> dict[str, float]:
    """What the workers at ``urls`` counted, summed: route cache lookups by outcome (``cache.hit``,
    ``cache.miss``, ...), catch-ups of a stale worker by how they ended (``catch_up.in_flight``,
    ``catch_up.read``, ``catch_up.failed``), remoting requests, GC pauses and event-loop ticks
    (``requests``, ``gc``, ``loop``; ``gc2``: the full collections among the pauses), and how many
    of each took longer than 5 ms by the worker's own clock (``requests.slow``, ``gc.slow``,
    ``gc2.slow``, ``loop.slow``: a tick that ran over 5 ms late), dropped routes read again
    (``refresh.read``, ``refresh.overtaken``, ``refresh.failed``), polls of the freshness probe
    that kept a worker fresh while its own poll was late (``probe.vouched``), so
    a latency tail seen by the load generator can be told apart from one inside the workers."""
    totals: dict[str, float] = {}
    async with aiohttp.ClientSession() as session:
        for url in urls:
            async with session.get(f"{url}/metrics") as resp:
                text = await resp.text()
            for line in text.splitlines():
                for key in _counters(line):
                    totals[key] = totals.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    for what in ("requests", "gc", "gc2", "loop"):
        totals[f"{what}.slow"] = totals.get(what, 0.0) - totals.pop(f"{what}.fast", 0.0)
    return totals


def _counters(line: str) -> list[str]:
    """The counters a line of /metrics adds to (a full collection's pause counts as a GC pause and
    as a full one)."""
    if line.startswith(CACHE_METRIC):
        return ["cache." + line.split('"')[1]]
    if line.startswith(CATCH_UP_METRIC):
        return ["catch_up." + line.split('"')[1]]
    if line.startswith(REFRESH_METRIC):
        return ["refresh." + line.split('"')[1]]
    return [key for pattern, key in COUNTED if pattern.match(line)]
