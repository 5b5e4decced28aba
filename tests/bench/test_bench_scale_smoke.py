"""``python -m bench.scale --smoke`` (``make bench-scale`` at tiny sizes) goes end to end: every
shape on our fleet prints every row of issue #27 and writes the JSON with exactly the structure
the report and docs/capacity.md read. Values checked are sizes and outcomes, never timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.cpu_speed import describe
from bench.scale.config import SMOKE
from bench.scale.report import ROWS

ROOT = Path(__file__).resolve().parents[2]

# the --smoke sizes (bench/scale/config.py SMOKE): groups, brokers, topics, queue entries, requests
FACTS = {
    "rip29": {"groups": 3, "brokers": 9, "topics": 40, "queue_entries": 120, "register_requests": 9},
    "wide": {"groups": 1, "brokers": 1, "topics": 1700, "queue_entries": 1700, "register_requests": 3},
    "many": {"groups": 4, "brokers": 4, "topics": 30, "queue_entries": 120, "register_requests": 4},
}
FLEET_KEYS = {
    "facts",
    "redis_before",
    "registration",
    "memory",
    "admin",
    "lookups",
    "cycle",
    "heal",
    "phase_seconds",
    "rss_mib_after",
    "rss_mib_at_end",
}
REGISTRATION_KEYS = {
    "requests",
    "retries",
    "all_replied_s",
    "whole_s",
    "whole",
    "state",
    "request_p50_ms",
    "request_max_ms",
    "cpu_seconds",
    "redis_ms_per_request",
    "longest_command",
}
LOOKUP_KEYS = {
    "mode",
    "target_rate",
    "rps",
    "completed",
    "errors",
    "error_codes",
    "p50_ms",
    "p99_ms",
    "max_ms",
    "late_fraction",
    "loadgen_core_max",
    "cores",
    "server_us_per_lookup",
    "redis_us_per_lookup",
    "redis_calls_per_lookup",
    "peak_rps",
    "peak_server_us_per_lookup",
    "peak_redis_us_per_lookup",
    "workers",
    "workers_counted",
    "server_cpu_wait",
    "core_speed",
    "p99_ms_by_bucket",
}
ADMIN_KEYS = {"outcome", "code", "body_bytes", "over_frame_limit", "ms"}
HEAL_KEYS = {
    "method",
    "brokers_quiet",
    "redis_away_s",
    "whole_after_s",
    "whole",
    "state_at_end",
    "lookups",
    "topic_not_exist",
    "system_error",
    "uncached_worker",
    "replays",
    "longest_command",
    "cpu_seconds",
    "redis_by_command",
    "timeline",
}
LONGEST_KEYS = {"ms", "command", "logged", "over_target", "top_ms"}


def _check_shape(name: str, rows: dict[str, Any]) -> None:
    assert set(rows) == FLEET_KEYS, name
    assert rows["facts"] == FACTS[name]
    reg = rows["registration"]
    assert set(reg) == REGISTRATION_KEYS
    assert reg["requests"] == FACTS[name]["register_requests"]
    assert reg["whole"] is True
    assert reg["state"]["topics"] == FACTS[name]["topics"]
    assert reg["state"]["live_brokers"] == FACTS[name]["brokers"]
    assert set(reg["cpu_seconds"]) == {"workers", "redis"}
    assert set(reg["longest_command"]) == LONGEST_KEYS
    assert set(rows["memory"]) == {
        "redis_used_mib",
        "redis_dataset_mib",
        "redis_bytes_per_queue_entry",
        "worker_rss_mib",
    }
    assert sorted(rows["memory"]["worker_rss_mib"]) == ["worker-0", "worker-uncached"]
    assert set(rows["admin"]) == {"all_topic_list", "cluster_info", "topics_by_cluster"}
    for call in rows["admin"].values():
        assert set(call) == ADMIN_KEYS
        assert (call["outcome"], call["code"], call["over_frame_limit"]) == ("ok", 0, False)
    assert set(rows["lookups"]) == {"cached", "cached_fixed", "uncached", "longest_command"}
    fixed = rows["lookups"]["cached_fixed"]
    assert set(fixed) == LOOKUP_KEYS - {
        "peak_rps",
        "peak_server_us_per_lookup",
        "peak_redis_us_per_lookup",
        "workers",
        "workers_counted",
    }
    assert (fixed["mode"], fixed["target_rate"]) == ("open", 300.0)
    for kind in ("cached", "uncached"):
        row = rows["lookups"][kind]
        assert set(row) == LOOKUP_KEYS
        # errors (a worker shedding load) depend on the machine: not asserted
        assert (row["mode"], row["workers"]) == ("open", 1)
        # the workers' own counters over the window (scraped as it starts and ends, while the
        # load runs: how many of the lookups fall inside depends on the machine's speed)
        counted = row["workers_counted"]
        assert {"requests", "requests.slow", "loop", "loop.slow", "gc.slow"} <= set(counted)
        assert counted["requests"] > 0
        # how long the workers waited for a CPU meanwhile, from the kernel
        waited = row["server_cpu_wait"]
        assert waited is not None and waited["ms"] >= 0 and waited["max_step_ms"] <= waited["ms"]
        # when in the window the slow replies were: one p99 per 100 ms of the window
        assert len(row["p99_ms_by_bucket"]) == round(SMOKE.duration / 0.1)
        # and how fast each core ran meanwhile, step by step (None when the probe's child, launched
        # in the warm-up, was not up before a smoke window was over: a busy machine)
        speed = row["core_speed"]
        if speed is not None:
            assert speed["cpus"] == sorted(os.sched_getaffinity(0))
            assert len(speed["us_by_step"]) == speed["steps"] > 0
    cycle = rows["cycle"]
    assert set(cycle) == {
        "seconds",
        "settled_s",
        "requests",
        "failed",
        "cpu_seconds",
        "redis_ms_per_request",
        "longest_command",
    }
    # a request Redis answers too late on a busy machine is listed, not sent again
    if not cycle["failed"]:
        assert cycle["requests"] == FACTS[name]["register_requests"]
    heal = rows["heal"]
    assert set(heal) == HEAL_KEYS
    assert heal["method"].startswith("SHUTDOWN NOSAVE")
    assert heal["lookups"]["mode"] == "open"
    assert set(heal["uncached_worker"]) == {"lookups", "codes", "p99_ms", "max_ms"}
    # what the cached workers counted meanwhile, re-reads of dropped routes among it
    assert {"requests", "refresh.read", "refresh.overtaken"} <= set(heal["lookups"]["workers_counted"])
    # the workers replayed what they kept (a replay Redis answers too late counts as failed)
    assert sum(heal["replays"].values()) >= 1
    assert set(heal["cpu_seconds"]) == {"worker-0", "worker-uncached", "redis", "machine"}
    assert heal["redis_by_command"]["evalsha"]["calls"] >= 1
    # the heal step by step, the last step ending at the last check of Redis, with every role's cores
    steps = heal["timeline"]
    assert steps, heal
    assert steps[-1]["groups_whole"] == heal["state_at_end"]["groups_whole"]
    assert set(steps[-1]["cores"]) == {"machine", "worker-0", "worker-uncached", "redis"}
    assert set(rows["rss_mib_at_end"]) == {"worker-0", "worker-uncached"}
    # each worker's RSS after every phase (the cycle's is where a peer's is read)
    assert set(rows["rss_mib_after"]) == set(rows["phase_seconds"])
    assert set(rows["rss_mib_after"]["cycle"]) == {"worker-0", "worker-uncached"}


@pytest.mark.timeout(900)
def test_scale_smoke_prints_every_row_and_writes_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--smoke", "--out-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=870,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + "\n" + proc.stderr[-6000:]
    result = json.loads((tmp_path / "latest.json").read_text())
    assert set(result) == {"config", "meta", "shapes", "table"}
    meta = result["meta"]
    for speed in (meta["speed"], meta["speed_at_end"]):
        assert speed["loop_s"] > 0 and speed["round_trip_us"] > 0
    assert describe(meta["speed"], meta["speed_at_end"]) in result["table"].splitlines()[0]
    assert list(result["shapes"]) == ["rip29", "wide", "many"]
    for name, targets in result["shapes"].items():
        assert list(targets) == ["fleet"]
        _check_shape(name, targets["fleet"])
    lines = result["table"].splitlines()
    header = next(line for line in lines if line.startswith("| row |"))
    assert header == "| row | rip29 / fleet | wide / fleet | many / fleet |"
    for label, _ in ROWS:
        row = next(line for line in lines if line.startswith(f"| {label} |"))
        assert row.count(" | ") == 3, row
    assert result["table"] in proc.stdout


def test_scale_flags_shrink_every_shape() -> None:
    from bench.scale.config import parse_config
    from bench.scale.shapes import build

    cfg = parse_config(["--scale", "0.01", "--shape", "rip29,many,wide"])
    assert (cfg.rip29_groups, cfg.rip29_topics, cfg.wide_topics) == (10, 1000, 1000)
    assert (cfg.many_groups, cfg.many_topics) == (8, 1000)  # 10 groups, to a multiple of 4
    assert build("rip29", cfg).facts() == {
        "groups": 10,
        "brokers": 30,
        "topics": 1000,
        "queue_entries": 10_000,
        "register_requests": 30,
    }
    assert build("wide", cfg).facts()["register_requests"] == 2  # 1000 topics in batches of 800
    many = build("many", cfg)
    assert many.facts()["topics"] == 2 * 1000
    assert set(many.groups_of.values()) == {4}
    with pytest.raises(SystemExit):
        parse_config(["--shape", "nope"])
    with pytest.raises(SystemExit):
        parse_config(["--many-groups", "10"])
    assert parse_config(["--skip", "lookups,cycle"]).skip == ("lookups", "cycle")
    with pytest.raises(SystemExit):
        parse_config(["--skip", "registration"])  # it fills the fleet every later phase reads
    with pytest.raises(SystemExit):
        parse_config(["--heal-uncached-rate", "0"])
