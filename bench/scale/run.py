"""The orchestrator of ``python -m bench.scale``: machine facts, then each shape on a fresh Redis
and fleet, then on each peer; one Markdown table on stdout, the JSON under bench/results/scale/."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench import cpu_speed, procs
from bench.loadgen import LoadPool
from bench.loops import run_fast
from bench.run import _finite, background_cores, git_revision
from bench.scale.config import ScaleConfig, parse_config
from bench.scale.fleet_shape import ShapeRun
from bench.scale.peer_shape import run_peer_shape
from bench.scale.report import render
from bench.scale.shapes import build


def progress(message: str) -> None:
    print(f"[bench-scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def run(cfg: ScaleConfig) -> dict[str, Any]:
    started = time.perf_counter()
    result: dict[str, Any] = {
        "config": cfg.as_dict(),
        "meta": {
            "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "argv": sys.argv[1:],
            "git": git_revision(),
            "cpus_usable": len(os.sched_getaffinity(0)),
            "cpu_model": procs.cpu_model(),
            "loadavg_at_start": os.getloadavg(),
            # cores the rest of the machine (other users of it) kept busy just before the run
            "background_cores": round(await background_cores(0.3 if cfg.smoke else 2.0), 2),
            "speed": await asyncio.to_thread(cpu_speed.for_run, cfg.smoke),
            "loadgen_remoting": LoadPool.of_kind(cfg.procs, cfg.loadgen_nice, cfg.loadgen).generator,
        },
        "shapes": {},
    }
    for name in cfg.shapes:
        shape = build(name, cfg)
        progress(f"shape {name}: {shape.facts()}")
        targets: dict[str, Any] = {"fleet": await ShapeRun(cfg, shape, progress).run()}
        if cfg.peers:
            pool = LoadPool.of_kind(cfg.procs, cfg.loadgen_nice, cfg.loadgen)
            pool.start()
            try:
                for peer in cfg.peers:
                    targets[peer.name] = await run_peer_shape(cfg, shape, peer, pool, progress)
            finally:
                await asyncio.get_running_loop().run_in_executor(None, pool.close)
        result["shapes"][name] = targets
    result["meta"]["loadavg_at_end"] = os.getloadavg()
    result["meta"]["speed_at_end"] = await asyncio.to_thread(cpu_speed.for_run, cfg.smoke)
    result["meta"]["wall_seconds"] = round(time.perf_counter() - started, 1)
    return result


def write_results(result: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = result["meta"]["started"].replace(":", "").replace("-", "")
    path = out_dir / f"{stamp}.json"
    text = json.dumps(_finite(result), indent=1, default=str, allow_nan=False)
    path.write_text(text + "\n")
    (out_dir / "latest.json").write_text(text + "\n")
    return path


def failures(result: dict[str, Any]) -> list[str]:
    return [
        f"{shape}/{target}/{phase}"
        for shape, targets in result["shapes"].items()
        for target, rows in targets.items()
        for phase in rows.get("failures", {})
    ]


def main(argv: list[str] | None = None) -> int:
    cfg = parse_config(argv)
    result = run_fast(run(cfg))
    result["table"] = render(result)
    path = write_results(result, cfg.out_dir)
    print(result["table"], flush=True)
    print(f"\nresults: {path}", flush=True)
    failed = failures(result)
    if failed:
        print(f"failed phases: {', '.join(failed)}", flush=True)
    return 1 if failed else 0
