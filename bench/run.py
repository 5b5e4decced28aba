"""The orchestrator: ``python -m bench [flags]`` (``make bench``).

Order of a run: machine facts and the background load; Redis; the workers; the lookup topics on
simulated brokers (measuring Redis memory as they register); the bare ceiling servers and the
load generator pool; route lookups over remoting, then HTTP; steady-state Lua; registrations;
liveness; worker RSS along the way. A phase that fails is reported and the others still run.
Progress goes to stderr, the table to stdout, the JSON to ``bench/results/``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import redis
from redis.asyncio import Redis

from bench import cpu_speed, procs
from bench.config import BenchConfig, parse_config
from bench.fleet import LONG_TIMEOUT_MS, Bench
from bench.liveness import run_crashed, run_silent
from bench.lookups import run_lookups
from bench.loops import loop_name, run_fast
from bench.overload import run_overload
from bench.redisstats import redis_version
from bench.registration import run_registration
from bench.report import render
from bench.steady import run_steady
from bench.targets import evaluate, targets_json
from bench.watch_latency import run_watch

LOOKUP_PHASES = ("memory", "remoting", "http", "overload", "steady")


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def git_revision() -> str:
    try:
        root = Path(__file__).resolve().parents[1]
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        branch = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--abbrev-ref", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return f"{head} ({branch}{', uncommitted changes' if dirty else ''})"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return "?"


async def background_cores(seconds: float) -> float:
    """Cores the rest of the machine keeps busy while the bench does nothing."""
    meter = procs.CpuMeter({"bench": [os.getpid()]})
    meter.start()
    await asyncio.sleep(seconds)
    cores = meter.stop()
    return max(0.0, cores["machine"] - cores["bench"])


async def wait_quiet(cfg: BenchConfig) -> float:
    """Wait (up to ``cfg.wait_quiet`` s) until other processes use fewer than ``quiet_cores``."""
    deadline = time.monotonic() + cfg.wait_quiet
    while True:
        busy = await background_cores(1.0 if not cfg.smoke else 0.2)
        if busy < cfg.quiet_cores or time.monotonic() >= deadline:
            return busy
        progress(f"other processes keep {busy:.2f} cores busy; waiting for a quiet machine")
        await asyncio.sleep(2.0)


async def machine_facts(cfg: BenchConfig) -> dict[str, Any]:
    return {
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": sys.argv[1:],
        "git": git_revision(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": procs.cpu_model(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "loop": loop_name(),
        "aiohttp": aiohttp.__version__,
        "orjson": orjson.__version__,
        "redis_py": redis.__version__,
        "namesrv": _version("namesrv-fleet"),
        "loadavg_at_start": os.getloadavg(),
        "background_cores": await wait_quiet(cfg),
        # after the wait: the speed the run starts at, on a machine as quiet as it got
        "speed": await asyncio.to_thread(cpu_speed.for_run, cfg.smoke),
    }


def rss(b: Bench) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i, worker in enumerate(b.workers):
        if worker.proc.alive():
            out[f"worker-{i}"] = procs.memory_kib(worker.proc.pid)
    return out


async def _phase(
    result: dict[str, Any], name: str, run: Callable[[], Awaitable[Any]], store: Callable[[Any], None]
) -> None:
    progress(f"phase {name}")
    started = time.perf_counter()
    try:
        store(await run())
    except Exception as exc:
        progress(f"phase {name} FAILED: {exc!r}")
        traceback.print_exc(file=sys.stderr)
        result.setdefault("failures", {})[name] = f"{type(exc).__name__}: {exc}"
    result.setdefault("phase_seconds", {})[name] = round(time.perf_counter() - started, 1)


async def run(cfg: BenchConfig) -> dict[str, Any]:  # noqa: C901 - the phases in order, each optional
    log_dir = Path(tempfile.mkdtemp(prefix="namesrv-bench-"))
    result: dict[str, Any] = {"config": cfg.as_dict(), "meta": await machine_facts(cfg)}
    started = time.perf_counter()
    progress(f"logs in {log_dir}")
    redis_proc, url = await procs.start_redis(log_dir)
    b = Bench(cfg, log_dir, redis_proc, url, Redis.from_url(url, decode_responses=True))
    ok = False
    try:
        result["meta"]["redis_server"] = await redis_version(b.redis)
        result["meta"]["worker_env"] = b.worker_env()
        result["meta"]["worker_config"] = procs.worker_config(b.worker_env())
        fleet = max(cfg.fleet_sizes)
        progress(f"starting {fleet} workers")
        await b.start_workers(fleet)
        b.start_pool()
        result["meta"]["pids"] = b.pids()
        result["meta"]["loadgen_remoting"] = b.load_pool().generator
        if any(p in cfg.phases for p in LOOKUP_PHASES):
            progress(f"registering {cfg.topics:,} topics on {cfg.spread_brokers} brokers")
            memory = await b.register_spread()
            if "memory" in cfg.phases:
                result["memory"] = memory
            await b.check_routes()
            if cfg.peers:
                progress(f"registering the same topics on {', '.join(str(p) for p in cfg.peers)}")
                await b.peer_setup.register(cfg.peers, b.topics, cfg.spread_brokers, LONG_TIMEOUT_MS)
            progress("warming every worker's route cache with every topic")
            result["meta"]["warm_seconds"] = await b.warm_routes()
            result["meta"]["route_reply_bytes"] = {"remoting": len(b.route_body), "http": len(b.http_body)}
            result.setdefault("rss", {})["after setup"] = rss(b)
        lookups: list[dict[str, Any]] = result.setdefault("lookups", [])
        if "remoting" in cfg.phases or "http" in cfg.phases:
            await b.start_ceilings(fleet)
            for protocol in ("remoting", "http"):
                if protocol in cfg.phases:
                    await _phase(
                        result,
                        protocol,
                        lambda protocol=protocol: run_lookups(b, protocol, progress),  # type: ignore[misc]
                        lookups.extend,
                    )
            result["rss"]["after lookups"] = rss(b)
        if "overload" in cfg.phases:
            await _phase(
                result,
                "overload",
                lambda: run_overload(b, progress),
                lambda r: result.__setitem__("overload", r),
            )
        if "steady" in cfg.phases:
            await _phase(result, "steady", lambda: run_steady(b), lambda r: result.__setitem__("steady", r))
        if "registration" in cfg.phases:
            await _phase(
                result,
                "registration",
                lambda: run_registration(b, progress),
                lambda r: result.__setitem__("registration", r),
            )
        if "expiry" in cfg.phases:
            liveness: dict[str, Any] = result.setdefault("liveness", {})
            await _phase(
                result, "expiry/silent", lambda: run_silent(b), lambda r: liveness.__setitem__("silent", r)
            )
            await _phase(
                result, "expiry/crashed", lambda: run_crashed(b), lambda r: liveness.__setitem__("crashed", r)
            )
        if "watch" in cfg.phases:
            await _phase(result, "watch", lambda: run_watch(b), lambda r: result.__setitem__("watch", r))
        result.setdefault("rss", {})["at the end"] = rss(b)
        for i, worker in enumerate(b.workers):
            if not worker.proc.alive():
                result.setdefault("failures", {})[f"worker-{i}"] = f"exited:\n{worker.proc.log_tail()}"
        ok = not result.get("failures")
    finally:
        await b.close()
        result["meta"]["speed_at_end"] = await asyncio.to_thread(cpu_speed.for_run, cfg.smoke)
        result["meta"]["wall_seconds"] = round(time.perf_counter() - started, 1)
        if ok and not cfg.keep_logs:
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            progress(f"process logs kept in {log_dir}")
    return result


def write_results(result: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = result["meta"]["started"].replace(":", "").replace("-", "")
    path = out_dir / f"{stamp}.json"
    text = json.dumps(result, indent=1, default=str, allow_nan=False)
    path.write_text(text + "\n")
    (out_dir / "latest.json").write_text(text + "\n")
    return path


def _finite(value: Any) -> Any:
    """NaN/inf (e.g. a percentile of no samples) become null, so the JSON is standard."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(argv)
    result = run_fast(run(cfg))
    targets = evaluate(result)
    result["targets"] = targets_json(targets)
    table = render(result, targets)
    result["table"] = table
    path = write_results(_finite(result), cfg.out_dir)
    print(table, flush=True)
    print(f"\nresults: {path}", flush=True)
    return 1 if result.get("failures") else 0
