"""The heal (issue #27): Redis restarts empty (SHUTDOWN NOSAVE, then a new redis-server on the
same port, no persistence) while clients look routes up and brokers stay quiet (no heartbeat,
no registration); the workers replay the registrations they kept.

Measured: seconds from Redis answering again to every route whole (read from Redis itself); the
errors clients saw (TOPIC_NOT_EXIST above all) and their latency, from the cached workers (the
open-loop load) and from the uncached one (a few sequential lookups: it has no pre-loss routes to
serve); what the workers replayed; the longest Redis command meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench import procs
from bench.fleet import Bench
from bench.load_jobs import LoadJob
from bench.redisstats import commandstats
from bench.scale.brokers import Registered
from bench.scale.probes import ROUTE_VERSION, lookup_window, wait_whole, whole_in_redis
from bench.scale.shapes import Shape
from bench.scale.slow import SlowCommands
from bench.stats import percentile_ms
from namesrv.domain.codes import RequestCode, ResponseCode
from namesrv.procs import die_with_parent
from namesrv.sim.client import RemotingClient
from namesrv.store.embedded import redis_server_command
from support.redis_launcher import wait_for_ping

METHOD = "SHUTDOWN NOSAVE, then a new redis-server on the same port (no persistence)"
REPLAYS_METRIC = "namesrv_heal_replays_total{"


def _spawn_on(port: int, log_dir: Path) -> procs.Proc:
    """redis-server on ``port`` (the one the workers know), no persistence: it starts empty."""
    log_path = log_dir / "redis-restarted.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by Proc.stop
    popen = subprocess.Popen(
        redis_server_command(port, log_dir / "redis-data", append_only=False),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),
    )
    return procs.Proc("redis", popen, log_path, log)


async def restart_empty(b: Bench) -> float:
    """Stop Redis without saving and start an empty one on the same port; returns the seconds
    Redis was away. ``b.redis_proc`` becomes the new process (the bench stops it at the end)."""
    port = int(b.redis_url.rsplit(":", 1)[1].split("/")[0])
    started = time.perf_counter()
    with contextlib.suppress(Exception):  # the server closes the connection as it goes
        await b.redis.shutdown(nosave=True)
    await asyncio.to_thread(b.redis_proc.popen.wait, 10)
    await b.redis_proc.stop()
    b.redis_proc = await asyncio.to_thread(_spawn_on, port, b.log_dir)
    popen = b.redis_proc.popen
    await asyncio.to_thread(wait_for_ping, b.redis_url, popen, log_tail=b.redis_proc.log_tail)
    return time.perf_counter() - started


async def heal_replays(urls: list[str]) -> dict[str, float]:
    """The workers' heal replays so far, by outcome, summed over ``urls``."""
    totals: dict[str, float] = {}
    async with aiohttp.ClientSession() as session:
        for url in urls:
            async with session.get(f"{url}/metrics") as resp:
                text = await resp.text()
            for line in text.splitlines():
                if line.startswith(REPLAYS_METRIC):
                    outcome = line.split('"')[1]
                    totals[outcome] = totals.get(outcome, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


TIMELINE_EVERY_S = 0.5
Check = Callable[[], Awaitable[dict[str, Any]]]


class Timeline:
    """Every ``TIMELINE_EVERY_S`` from Redis answering again until the heal is whole: how far it
    got (groups whole, live brokers, from the last check) and the cores each role and the whole
    machine used in the step before: whether Redis, a worker, the machine or nobody was the
    bottleneck at each moment."""

    def __init__(self, roles: dict[str, list[int]]) -> None:
        self.roles = roles
        self.last: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []

    def check(self, inner: Check) -> Check:
        async def checked() -> dict[str, Any]:
            self.last = await inner()
            return self.last

        return checked

    async def run(self, done: asyncio.Event) -> None:
        started = time.perf_counter()
        meter = procs.CpuMeter(self.roles)
        meter.start()
        while not self.steps or not done.is_set():  # at least one step: the last, when it ends
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), TIMELINE_EVERY_S)
            cores = meter.stop()
            meter.start()
            self.steps.append(
                {
                    "t": round(time.perf_counter() - started, 2),
                    "groups_whole": self.last.get("groups_whole"),
                    "live_brokers": self.last.get("live_brokers"),
                    "cores": {k: round(v, 2) for k, v in cores.items() if k != "machine_idle"},
                }
            )


UNCACHED_PROBE_CONNS = 4  # connections to the uncached worker during the heal, one lookup at a time each


async def probe(address: str, topics: list[str], stop: asyncio.Event, rate: float) -> dict[str, Any]:
    """Lookups at ``rate`` per second in all, on a few connections, one at a time each, until
    ``stop``: answers by code and the latency tail (what a client of a worker without the route
    cache sees during the heal). A fixed rate, as for the cached workers: as fast as they
    answered, these lookups took a third of Redis' time (a 100-group route costs Redis about
    1.2 ms) from the heal they measure."""
    codes: dict[str, int] = {}
    latencies: list[float] = []
    every = UNCACHED_PROBE_CONNS / rate

    async def one_conn(offset: int) -> None:
        client = await RemotingClient.connect(address)
        try:
            i = offset
            due = time.perf_counter() + every * offset / UNCACHED_PROBE_CONNS
            while not stop.is_set():
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                due = max(due + every, time.perf_counter())
                started = time.perf_counter()
                reply = await client.invoke(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC,
                    {"topic": topics[i % len(topics)]},
                    version=ROUTE_VERSION,
                )
                latencies.append(time.perf_counter() - started)
                codes[str(reply.code)] = codes.get(str(reply.code), 0) + 1
                i += UNCACHED_PROBE_CONNS
        finally:
            await client.aclose()

    await asyncio.gather(*(one_conn(k) for k in range(UNCACHED_PROBE_CONNS)))
    ordered = sorted(latencies)
    return {
        "lookups": len(ordered),
        "codes": codes,
        "p99_ms": percentile_ms(ordered, 99) if ordered else None,
        "max_ms": ordered[-1] * 1000 if ordered else None,
    }


async def run_heal(
    b: Bench,
    shape: Shape,
    registered: Registered,
    job: LoadJob,
    slow: SlowCommands,
    uncached_rate: float,
) -> dict[str, Any]:
    """``job``: open-loop lookups to the cached workers; its window starts with the restart;
    ``uncached_rate``: lookups per second to the worker without the route cache meanwhile."""
    urls = [w.url for w in b.workers]
    before = await heal_replays(urls)
    registered.paused = True
    timings: dict[str, Any] = {}
    watcher: list[asyncio.Task[tuple[float | None, dict[str, Any]]]] = []
    meters: list[procs.CpuMeter] = []
    timelines: list[tuple[Timeline, asyncio.Event, asyncio.Task[None]]] = []

    async def restart() -> None:
        timings["redis_away_s"] = round(await restart_empty(b), 3)
        await slow.start()  # a new server: the SLOWLOG settings again
        meters.append(procs.CpuMeter(cpu_roles(b)))
        meters[0].start()
        timings["metered_from"] = time.perf_counter()
        timeline, done = Timeline(cpu_roles(b)), asyncio.Event()
        timelines.append((timeline, done, asyncio.create_task(timeline.run(done))))
        check = timeline.check(lambda: whole_in_redis(b.redis, b.cfg.namespace, shape))
        whole = asyncio.create_task(wait_whole(check, limit=job.duration))
        whole.add_done_callback(lambda _: done.set())
        watcher.append(whole)

    roles = {"server": [w.proc.pid for w in b.workers], "load": b.load_pool().pids}
    stop = asyncio.Event()
    uncached = b.workers[-1]  # the fleet's last worker runs without the route cache
    probing = asyncio.create_task(
        probe(f"127.0.0.1:{uncached.remoting_port}", list(shape.groups_of), stop, uncached_rate)
    )
    try:
        # what the cached workers counted meanwhile: pre-loss routes served, "not ready", re-reads
        cached = [w.url for w in b.workers[:-1]]
        window = await lookup_window(b.load_pool(), job, roles, None, on_start=restart, worker_urls=cached)
        healed_s, last = await watcher[0] if watcher else (None, {"whole": False})
        cores = meters[0].stop() if meters else {}
        metered_s = time.perf_counter() - timings.pop("metered_from", time.perf_counter())
    finally:
        stop.set()
        uncached_seen = await probing
        registered.paused = False
        for _, done, task in timelines:
            done.set()
            await task
    after = await heal_replays(urls)
    codes = window.get("error_codes", {})
    return {
        "method": METHOD,
        "brokers_quiet": True,
        **timings,
        "whole_after_s": None if healed_s is None else round(healed_s, 3),
        "whole": bool(last.get("whole")),
        "state_at_end": last,
        "lookups": window,
        "topic_not_exist": int(codes.get(str(int(ResponseCode.TOPIC_NOT_EXIST)), 0)),
        "system_error": int(codes.get(str(int(ResponseCode.SYSTEM_ERROR)), 0)),
        "uncached_worker": uncached_seen,
        "replays": {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after},
        "longest_command": await slow.collect(),
        # how the heal went, step by step: groups whole, live brokers, cores by role
        "timeline": timelines[0][0].steps if timelines else [],
        # CPU seconds over the window from Redis answering again to its end (the heal and the
        # lookups meanwhile), and what Redis spent them on: where a faster heal must come from
        "cpu_seconds": {k: round(v * metered_s, 2) for k, v in cores.items() if k != "machine_idle"},
        "redis_by_command": {
            name: {"calls": int(stat["calls"]), "usec": int(stat["usec"])}
            for name, stat in (await commandstats(b.redis)).items()
        },
    }


def cpu_roles(b: Bench) -> dict[str, list[int]]:
    """Each worker on its own, and Redis."""
    return {**{w.proc.name: [w.proc.pid] for w in b.workers}, "redis": [b.redis_proc.pid]}
