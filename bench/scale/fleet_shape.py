"""One shape against our fleet, on a fresh Redis and fresh workers: every row in order."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench import procs
from bench.config import BenchConfig
from bench.fleet import Bench
from bench.load_jobs import LoadJob
from bench.redisstats import commandstats, memory, reset_stats
from bench.scale.brokers import Registered
from bench.scale.config import ScaleConfig
from bench.scale.heal import run_heal
from bench.scale.probes import (
    ROUTE_VERSION,
    admin_calls,
    inside_workers,
    lookup_window,
    wait_whole,
    whole_in_redis,
)
from bench.scale.shapes import Shape
from bench.scale.slow import SlowCommands
from namesrv.domain.codes import RequestCode
from namesrv.sim.client import RemotingClient

Progress = Callable[[str], None]
WHOLE_LIMIT_S = 60.0  # after the last registration reply, how long the routes may take to be whole
UNCACHED_ENV = {"NAMESRV_ROUTE_CACHE_ENABLED": "false"}
MIB = 1024 * 1024


def lookup_job(
    cfg: ScaleConfig, name: str, targets: tuple[tuple[str, int], ...], topics: list[str], rate: float
) -> LoadJob:
    peak = rate == 0
    return LoadJob(
        name=name,
        protocol="remoting",
        targets=targets,
        topics=tuple(topics),
        uniform=True,
        conns=cfg.conns,
        depth=cfg.depth,
        rate=rate,
        warmup=0.5 if peak else cfg.warmup,
        duration=cfg.peak_seconds if peak else cfg.duration,
        version=ROUTE_VERSION,
    )


async def warm(addresses: list[str], topics: list[str]) -> None:
    """Every topic looked up once on every address (fills the route caches)."""
    for address in addresses:
        client = await RemotingClient.connect(address)
        try:
            for i in range(0, len(topics), 200):
                await asyncio.gather(
                    *(
                        client.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}, version=ROUTE_VERSION)
                        for t in topics[i : i + 200]
                    )
                )
        finally:
            await client.aclose()


def rss_mib(pid: int) -> float:
    return round(procs.memory_kib(pid).get("VmRSS", 0) / 1024, 1)


class ShapeRun:
    def __init__(self, cfg: ScaleConfig, shape: Shape, progress: Progress) -> None:
        self.cfg = cfg
        self.shape = shape
        self.progress = progress
        self.out: dict[str, Any] = {"facts": shape.facts()}
        self.workers: list[procs.Worker] = []  # the fleet's workers once started: their RSS after each phase

    async def phase(self, name: str, run: Callable[[], Awaitable[Any]]) -> Any:
        if name in self.cfg.skip:
            return None
        self.progress(f"{self.shape.name}: {name}")
        started = time.perf_counter()
        try:
            value = await run()
        except Exception as exc:
            traceback.print_exc()
            self.out.setdefault("failures", {})[name] = f"{type(exc).__name__}: {exc}"
            value = None
        else:
            self.out[name] = value
        self.out.setdefault("phase_seconds", {})[name] = round(time.perf_counter() - started, 1)
        # a peer's RSS is read at the end of its run (after its cycle): the fleet's at the same
        # point is the like-for-like figure, before the heal that only the fleet runs
        self.out.setdefault("rss_mib_after", {})[name] = {
            w.proc.name: rss_mib(w.proc.pid) for w in self.workers if w.proc.alive()
        }
        return value

    async def run(self) -> dict[str, Any]:
        cfg = self.cfg
        log_dir = Path(tempfile.mkdtemp(prefix=f"namesrv-scale-{self.shape.name}-"))
        redis_proc, url = await procs.start_redis(log_dir)
        bench_cfg = BenchConfig(
            procs=cfg.procs,
            loadgen_nice=cfg.loadgen_nice,
            loadgen=cfg.loadgen,
            conns=cfg.conns,
            depth=cfg.depth,
            namespace=cfg.namespace,
        )
        b = Bench(bench_cfg, log_dir, redis_proc, url, Redis.from_url(url, decode_responses=True))
        registered: Registered | None = None
        try:
            await b.start_workers(cfg.workers)
            uncached = procs.start_worker(
                "worker-uncached", url, cfg.namespace, log_dir, {**b.worker_env(), **UNCACHED_ENV}
            )
            b.workers.append(uncached)
            await procs.wait_http_ready(uncached.proc, f"{uncached.url}/readyz")
            b.start_pool()
            slow = SlowCommands.of(b.redis, cfg.slowlog_us)
            await slow.start()
            self.workers = list(b.workers)
            registered = Registered(self.shape, [f"127.0.0.1:{w.remoting_port}" for w in b.workers])
            await registered.connect()
            registered.encode_all()
            reg = registered
            await self.phase("registration", lambda: self.registration(b, reg, slow))
            await self.phase("memory", lambda: self.memory(b))
            await self.phase("admin", lambda: admin_calls(f"127.0.0.1:{b.workers[0].remoting_port}"))
            await self.phase("lookups", lambda: self.lookups(b, slow))
            await self.phase("cycle", lambda: self.cycle(b, reg, slow))
            cached = b.workers[: cfg.workers]
            job = lookup_job(
                cfg, "heal", tuple(w.remoting for w in cached), list(self.shape.groups_of), cfg.heal_rate
            )
            job = replace(job, duration=cfg.heal_seconds)
            await self.phase("heal", lambda: run_heal(b, self.shape, reg, job, slow, cfg.heal_uncached_rate))
            self.out["rss_mib_at_end"] = {
                w.proc.name: rss_mib(w.proc.pid) for w in b.workers if w.proc.alive()
            }
            for w in b.workers:
                if not w.proc.alive():
                    self.out.setdefault("failures", {})[w.proc.name] = f"exited:\n{w.proc.log_tail()}"
        finally:
            if registered is not None:
                await registered.close()
            await b.close()
            if self.out.get("failures") or cfg.keep_logs:
                self.progress(f"process logs kept in {log_dir}")
            else:
                shutil.rmtree(log_dir, ignore_errors=True)
        return self.out

    async def registration(self, b: Bench, reg: Registered, slow: SlowCommands) -> dict[str, Any]:
        before = await memory(b.redis)
        self.out["redis_before"] = before
        await reset_stats(b.redis)
        await slow.collect()
        meter = procs.CpuMeter({"workers": [w.proc.pid for w in b.workers], "redis": [b.redis_proc.pid]})
        meter.start()
        started = time.perf_counter()
        requests = await reg.register_all(self.cfg.reg_concurrency)
        replied = time.perf_counter() - started
        whole_s, state = await wait_whole(
            lambda: whole_in_redis(b.redis, self.cfg.namespace, self.shape), WHOLE_LIMIT_S
        )
        wall = time.perf_counter() - started
        cores = meter.stop()
        stats = await commandstats(b.redis)
        lat = sorted(reg.latencies)
        return {
            "requests": requests,
            "retries": reg.retries,
            "all_replied_s": round(replied, 3),
            "whole_s": None if whole_s is None else round(replied + whole_s, 3),
            "whole": bool(state.get("whole")),
            "state": state,
            "request_p50_ms": lat[len(lat) // 2] * 1000 if lat else None,
            "request_max_ms": lat[-1] * 1000 if lat else None,
            "cpu_seconds": {k: round(cores[k] * wall, 2) for k in ("workers", "redis")},
            "redis_ms_per_request": sum(v["usec"] for v in stats.values()) / 1000 / max(requests, 1),
            "longest_command": await slow.collect(),
        }

    async def memory(self, b: Bench) -> dict[str, Any]:
        await asyncio.sleep(0.5)  # let Redis free the query buffers of the big registrations
        now = await memory(b.redis)
        before = self.out.get("redis_before", {"used_memory": 0, "dataset_bytes": 0})
        entries = max(self.shape.queue_entries, 1)
        return {
            "redis_used_mib": round(now["used_memory"] / MIB, 1),
            "redis_dataset_mib": round(now["dataset_bytes"] / MIB, 1),
            "redis_bytes_per_queue_entry": round((now["used_memory"] - before["used_memory"]) / entries, 1),
            "worker_rss_mib": {w.proc.name: rss_mib(w.proc.pid) for w in b.workers},
        }

    async def lookups(self, b: Bench, slow: SlowCommands) -> dict[str, Any]:
        cfg = self.cfg
        topics = list(self.shape.groups_of)
        out: dict[str, Any] = {}
        pool = b.load_pool()
        groups = {"cached": b.workers[: cfg.workers], "uncached": b.workers[cfg.workers :]}
        await slow.collect()
        for kind, workers in groups.items():
            targets = tuple(w.remoting for w in workers)
            await warm([f"{h}:{p}" for h, p in targets], topics)
            roles = {"server": [w.proc.pid for w in workers], "redis": [b.redis_proc.pid], "load": pool.pids}
            await procs.settle(roles["server"])
            urls = [w.url for w in workers]
            peak = await lookup_window(
                pool, lookup_job(cfg, f"{kind}/peak", targets, topics, 0.0), roles, b.redis
            )
            rate = peak["rps"] * cfg.load_fraction
            row = await lookup_window(
                pool,
                lookup_job(cfg, f"{kind}/{cfg.load_fraction:.0%}", targets, topics, rate),
                roles,
                b.redis,
                worker_urls=urls,
            )
            row["peak_rps"] = peak["rps"]
            row["peak_server_us_per_lookup"] = peak["server_us_per_lookup"]
            row["peak_redis_us_per_lookup"] = peak.get("redis_us_per_lookup")
            row["workers"] = len(workers)
            out[kind] = row
            if kind == "cached":
                # the same workers at the heal's fixed client load: the heal row's baseline, and
                # a figure a busy machine cannot push into overload the way 80% of a peak can
                fixed = await lookup_window(
                    pool, lookup_job(cfg, "cached/fixed", targets, topics, cfg.heal_rate), roles, b.redis
                )
                out["cached_fixed"] = fixed
            self.progress(
                f"  {kind}: peak {peak['rps']:,.0f}/s; at {rate:,.0f}/s p50 {row['p50_ms']:.2f} ms "
                f"p99 {row['p99_ms']:.2f} ms, errors {row['errors']}; {inside_workers(row)}"
            )
        out["longest_command"] = await slow.collect()
        return out

    async def cycle(self, b: Bench, reg: Registered, slow: SlowCommands) -> dict[str, Any]:
        # a worker still draining the backlog of an overloaded lookup window would be counted
        settled = await procs.settle([w.proc.pid for w in b.workers] + [b.redis_proc.pid], limit=60.0)
        await reset_stats(b.redis)
        await slow.collect()
        meter = procs.CpuMeter({"workers": [w.proc.pid for w in b.workers], "redis": [b.redis_proc.pid]})
        meter.start()
        started = time.perf_counter()
        requests, failed = await reg.cycle(self.cfg.cycle_seconds)
        wall = time.perf_counter() - started
        cores = meter.stop()
        stats = await commandstats(b.redis)
        return {
            "seconds": round(wall, 2),
            "settled_s": round(settled, 1),
            "requests": requests,
            "failed": failed,
            "cpu_seconds": {k: round(cores[k] * wall, 3) for k in ("workers", "redis")},
            "redis_ms_per_request": sum(v["usec"] for v in stats.values()) / 1000 / max(requests, 1),
            "longest_command": await slow.collect(),
        }
