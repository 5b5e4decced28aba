"""The orchestrator: ``python -m bench.abuse [flags]`` (``make abuse``).

For each fleet (default settings; then ACL on, for the attack that needs it): Redis and two
workers, legitimate traffic started and answered, then each scenario in turn:

1. read each worker's RSS (the baseline), reset its peak (VmHWM), mark the logs and Redis memory;
2. start the attacker process and wait for it to end (``--seconds``): the *window*;
3. wait ``--settle`` s, read RSS again (the *after*), the peak, the log lines since the mark,
   Redis ``used_memory``, and check that both workers still serve;
4. judge the legitimate requests *sent* within the window (each has its outcome by then).

Progress goes to stderr, the Markdown table to stdout, the JSON to
``bench/results/abuse-<UTC timestamp>.json`` and ``abuse-latest.json``. Exit status 1 when a row
misses the issue's bounds or a scenario could not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench import procs
from bench.abuse.config import AbuseConfig, parse_config
from bench.abuse.fleet import APP_ACCOUNT, Fleet, start_fleet
from bench.abuse.legit import Traffic
from bench.abuse.plan import Plan
from bench.abuse.report import judge, render
from bench.abuse.scenarios import BASELINE, Scenario, by_name
from bench.abuse.watch import LogMark, MemoryWatch, rss_kib, used_memory
from bench.loops import run_fast
from bench.run import git_revision
from namesrv.procs import die_with_parent

ATTACKER_START_TIMEOUT = 120.0  # s to build what it sends (the zlib bomb) on a busy machine
ATTACKER_STOP_GRACE = 60.0  # s past its duration for it to report and exit
QUIET_CORES = 0.5  # both workers together, serving the legitimate traffic alone, use less
QUIET_LIMIT = 60.0  # s to wait for that at most


def progress(message: str) -> None:
    print(f"[abuse {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Live:
    """A running fleet and the legitimate traffic on it."""

    def __init__(self, fleet: Fleet, traffic: Traffic) -> None:
        self.fleet = fleet
        self.traffic = traffic

    @classmethod
    async def start(cls, kind: str, cfg: AbuseConfig, log_root: Path) -> Live:
        progress(f"starting Redis and 2 workers ({'ACL on' if kind == 'acl' else 'default settings'})")
        fleet = await start_fleet(kind, log_root, dict(cfg.worker_env))
        traffic = Traffic(fleet.workers, cfg.traffic)
        try:
            await traffic.start()
            await traffic.serving()
        except BaseException:
            await traffic.stop()
            await fleet.stop()
            raise
        return cls(fleet, traffic)

    async def stop(self) -> None:
        await self.traffic.stop()
        await self.fleet.stop()


async def run_attacker(
    plan: Plan, log_dir: Path, on_start: Callable[[], None]
) -> tuple[float, float, dict[str, Any]]:
    """Start the attacker process, and return (window start, window end, its report): from its
    'start' line (then ``on_start()``) to its exit, when every one of its connections is closed."""
    stderr = (log_dir / f"attacker-{plan.scenario}.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.abuse.attacker",
        "--plan",
        plan.to_json(),
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        preexec_fn=die_with_parent(),
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), ATTACKER_START_TIMEOUT)
        if not line:
            raise RuntimeError(f"the attacker exited before starting (status {await proc.wait()})")
        start = time.monotonic()
        on_start()
        line = await asyncio.wait_for(proc.stdout.readline(), plan.seconds + ATTACKER_STOP_GRACE)
        await asyncio.wait_for(proc.wait(), ATTACKER_STOP_GRACE)
        end = time.monotonic()
        if not line:
            raise RuntimeError(f"the attacker exited without a report (status {proc.returncode})")
        report: dict[str, Any] = orjson.loads(line)
        return start, end, report
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        stderr.close()


async def quiet(pids: list[int], limit: float = QUIET_LIMIT) -> float:
    """Wait until the workers use less than QUIET_CORES together (the legitimate traffic alone):
    a worker still working through the last attack's backlog must not start the next one's
    window. Returns the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        before = sum(procs.cpu_seconds(p) for p in pids)
        await asyncio.sleep(0.5)
        if (sum(procs.cpu_seconds(p) for p in pids) - before) / 0.5 < QUIET_CORES:
            break
    return round(time.monotonic() - started, 1)


async def run_scenario(sc: Scenario, live: Live, cfg: AbuseConfig) -> dict[str, Any]:
    fleet, traffic = live.fleet, live.traffic
    names = [f"worker-{i}" for i in range(len(fleet.workers))]
    waited = await quiet(fleet.pids)
    baseline = [rss_kib(pid) for pid in fleet.pids]
    redis_before = await used_memory(fleet.redis)
    logs = LogMark(fleet.log_paths)
    watch = MemoryWatch(fleet.pids)
    meter = procs.CpuMeter({"workers": fleet.pids, "redis": [fleet.redis_proc.pid], "client": [os.getpid()]})
    if sc.name == BASELINE:
        start = time.monotonic()
        meter.start()
        await asyncio.sleep(cfg.seconds)
        end = time.monotonic()
        attacker: dict[str, Any] = {}
    else:
        plan = Plan(
            scenario=sc.name,
            seconds=cfg.seconds,
            remoting=tuple(("127.0.0.1", w.remoting_port) for w in fleet.workers),
            http=tuple(w.url for w in fleet.workers),
            sizes=cfg.sizes,
            account=APP_ACCOUNT if sc.fleet == "acl" else None,
            brokers=traffic.broker_refs,
        )
        start, end, attacker = await run_attacker(plan, fleet.log_dir, meter.start)
    try:
        cores = procs.with_other(meter.stop())
    except OSError:  # a worker died within the window (its health says so)
        cores = dict.fromkeys(("workers", "redis", "client", "other"), math.nan)
    cores["attacker"] = attacker.get("cpu_seconds", 0.0) / max(end - start, 1e-9)
    cores["other"] = max(0.0, cores["other"] - cores["attacker"])  # the rest of the machine
    await asyncio.sleep(cfg.settle)
    after = [rss_kib(pid) for pid in fleet.pids]
    peaks = await watch.stop()
    await traffic.resolved(end)
    lines, sample = logs.lines()
    row: dict[str, Any] = {
        "scenario": sc.name,
        "source": sc.source,
        "fleet": sc.fleet,
        "what": sc.what,
        "window_s": round(end - start, 2),
        "quiet_wait_s": waited,
        "legit": traffic.summary(start, end),
        "rss_kib": {
            name: {"baseline": b, "peak": peaks[pid], "after": a}
            for name, pid, b, a in zip(names, fleet.pids, baseline, after, strict=True)
        },
        "rss_peak_from": "VmHWM and samples" if watch.hwm_reset else "samples every 100 ms",
        "redis": {"before": redis_before, "after": await used_memory(fleet.redis)},
        "log_lines": dict(zip(names, lines, strict=True)),
        "log_sample": sample,
        "attacker": attacker,
        "health": await fleet.health(),
        # cores used in the window (1.0 = one core busy): "other" is the rest of the machine
        "cores": {k: round(v, 2) for k, v in cores.items()},
    }
    row["why"] = judge(row)
    return row


def _line(row: dict[str, Any]) -> str:
    legit = row["legit"]
    lookups, http, register = legit["remoting"], legit["http"], legit["register"]
    verdict = "PASS" if not row["why"] else "MISS: " + "; ".join(row["why"])
    return (
        f"{row['scenario']}: lookups {lookups['answered_pct']:.2f}% of {lookups['sent']}, "
        f"p99 {lookups['p99_ms']:.1f} ms, HTTP {http['answered_pct']:.2f}%, "
        f"registrations {register['answered_pct']:.2f}%, "
        f"log lines {sum(row['log_lines'].values())}: {verdict}"
    )


async def run(cfg: AbuseConfig) -> dict[str, Any]:
    log_root = Path(tempfile.mkdtemp(prefix="namesrv-abuse-"))
    result: dict[str, Any] = {"config": cfg.as_dict(), "meta": meta(), "rows": []}
    progress(f"logs in {log_root}")
    started = time.perf_counter()
    live: Live | None = None
    try:
        for sc in by_name(cfg.scenarios):
            if live is not None and live.fleet.kind != sc.fleet:
                await live.stop()
                live = None
            if live is None:
                live = await Live.start(sc.fleet, cfg, log_root)
            progress(f"{sc.name}: {cfg.seconds:g} s")
            try:
                row = await run_scenario(sc, live, cfg)
            except Exception as exc:
                traceback.print_exc(file=sys.stderr)
                result.setdefault("failures", {})[sc.name] = f"{type(exc).__name__}: {exc}"
                continue
            result["rows"].append(row)
            progress(_line(row))
            if row["health"] != ["serving"] * len(row["health"]):
                progress("a worker is not serving: the next scenario gets a new fleet")
                await live.stop()
                live = None
    finally:
        if live is not None:
            await live.stop()
        result["meta"]["wall_seconds"] = round(time.perf_counter() - started, 1)
        ok = not result.get("failures") and not any(r["why"] for r in result["rows"])
        if ok and not cfg.keep_logs:
            shutil.rmtree(log_root, ignore_errors=True)
        else:
            progress(f"process logs kept in {log_root}")
    return result


def meta() -> dict[str, Any]:
    return {
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "argv": sys.argv[1:],
        "git": git_revision(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": procs.cpu_model(),
        "loadavg_at_start": os.getloadavg(),
    }


def _finite(value: Any) -> Any:
    """NaN and infinities (a percentile of nothing, of unanswered requests) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_results(result: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = result["meta"]["started"].replace(":", "").replace("-", "")
    text = json.dumps(_finite(result), indent=1, default=str, allow_nan=False) + "\n"
    path = out_dir / f"abuse-{stamp}.json"
    path.write_text(text)
    (out_dir / "abuse-latest.json").write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(argv)
    with contextlib.suppress(KeyboardInterrupt):
        result = run_fast(run(cfg))
        result["table"] = render(result)
        path = write_results(result, cfg.out_dir)
        print(result["table"], flush=True)
        print(f"\nresults: {path}", flush=True)
        return 1 if result.get("failures") or any(r["why"] for r in result["rows"]) else 0
    return 130
