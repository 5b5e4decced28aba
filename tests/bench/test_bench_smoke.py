"""The benchmark harness (``bench/``): its wire templates match the project's codec, its load
generator works against the bare ceiling server, and a ``--smoke`` run goes end to end and writes
a well-formed table and JSON. Nothing here asserts a number: benchmarks are read, never timed in
tests."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.ceiling import CeilingProtocol, ReplyTemplate
from bench.cpu_speed import describe
from bench.load_jobs import LoadJob, summarize
from bench.loadgen import OPAQUE_BASE, remoting_request_parts, run_job
from bench.report import render
from bench.targets import Target
from namesrv.protocol.remoting import RemotingCommand, decode_frame, encode, response_to

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ("PASS", "MISS", "N/A")


def test_request_template_is_what_the_codec_encodes() -> None:
    head, tail = remoting_request_parts("TopicTest", 479)
    for opaque in (OPAQUE_BASE, OPAQUE_BASE + 123_456, 2**31 - 1):
        frame = head + b"%d" % opaque + tail
        expected = RemotingCommand(
            code=105, opaque=opaque, flag=0, language="JAVA", version=479, ext_fields={"topic": "TopicTest"}
        )
        assert frame == encode(expected)
        assert decode_frame(frame) == expected


def test_ceiling_reply_is_the_workers_reply_layout() -> None:
    body = b'{"brokerDatas":[],"queueDatas":[]}'
    request = RemotingCommand(code=105, opaque=42)
    assert ReplyTemplate(body).frame(42) == encode(response_to(request, 0, body=body))


async def test_load_generator_against_the_ceiling() -> None:
    loop = asyncio.get_running_loop()
    template = ReplyTemplate(b'{"brokerDatas":[]}')
    server = await loop.create_server(lambda: CeilingProtocol(template), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        for rate in (0.0, 200.0):
            job = LoadJob(
                name="t",
                protocol="remoting",
                targets=(("127.0.0.1", port),),
                topics=("a", "b", "c"),
                uniform=rate > 0,
                conns=2,
                depth=4,
                rate=rate,
                warmup=0.05,
                duration=0.3,
                start_at=time.time() + 0.05,
            )
            summary = summarize(job, [await run_job(job)])
            assert summary.failures == []
            assert summary.completed > 0 and summary.errors == 0
            assert summary.mode == ("open" if rate else "closed")
    finally:
        server.close()
        await server.wait_closed()


# A guard against a hung bench, not a speed check: about 40 s on a quiet 2-core machine, but a
# slow one (seen: a VM running everything three times as slowly) took over 280 s.
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_smoke_run_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1170,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + "\n" + proc.stderr[-6000:]
    files = sorted(p.name for p in tmp_path.glob("*.json"))
    assert "latest.json" in files and len(files) == 2  # <timestamp>.json and latest.json
    result = json.loads((tmp_path / "latest.json").read_text())

    assert {
        "meta",
        "config",
        "lookups",
        "registration",
        "steady",
        "overload",
        "liveness",
        "memory",
        "rss",
        "targets",
    } <= set(result)
    assert result["config"]["smoke"] is True and "failures" not in result
    meta = result["meta"]
    assert meta["cpu_count"] >= 1 and meta["redis_server"] and meta["python"]
    # the machine's speed, timed before and after, printed beside the figures it explains
    for speed in (meta["speed"], meta["speed_at_end"]):
        assert speed["loop_s"] > 0 and speed["round_trip_us"] > 0
    assert describe(meta["speed"], meta["speed_at_end"]) in result["table"]
    # every scenario, each with its throughput, latency and who used the cores
    keys = {
        (r["scenario"]["protocol"], r["scenario"]["server"], r["scenario"]["size"], r["scenario"]["load"])
        for r in result["lookups"]
    }
    for protocol in ("remoting", "http"):
        for server in ("fleet", "ceiling"):
            for size in (1, 2):
                assert (protocol, server, size, "peak") in keys
    assert ("remoting", "fleet", 1, "80%") in keys
    for row in result["lookups"]:
        assert row["completed"] > 0 and row["rps"] >= 0
        assert {"load", "server", "redis", "other", "machine"} <= set(row["cores"])
        # how long the servers under test waited for a CPU, read from the kernel over the window
        waited = row["server_cpu_wait"]
        assert waited is not None and waited["ms"] >= 0 and waited["max_step_ms"] <= waited["ms"]
        # and how fast each core ran meanwhile, step by step (None when the probe's child, launched
        # in the warm-up, was not up before a smoke window's 0.6 s were over: a busy machine)
        speed = row["core_speed"]
        if speed is not None:
            assert speed["cpus"] == sorted(os.sched_getaffinity(0))
            assert len(speed["us_by_step"]) == speed["steps"] > 0
    assert any(row["core_speed"] for row in result["lookups"])
    assert {(r["kind"], r["topics"]) for r in result["registration"]} == {
        (kind, size) for kind in ("new", "unchanged", "bumped") for size in (50, 300)
    }
    assert result["liveness"]["silent"]["removed"] == result["liveness"]["silent"]["brokers"]
    assert result["liveness"]["crashed"]["removed"] == result["liveness"]["crashed"]["brokers"]
    assert result["memory"]["per_10k_topics"] and result["rss"]["at the end"]
    assert result["steady"]["lua"]["*"]["calls"] > 0
    # the overload row: both levels, each with its recovery judged (a number, or None: never)
    assert [r["scenario"]["load"] for r in result["overload"]["rows"]] == ["100% then 50%", "120% then 50%"]
    assert all(r["overload_answered_per_s"] > 0 and "recovery_s" in r for r in result["overload"]["rows"])
    # the targets: each judged (a smoke run measures everything, so none is N/A)
    names = [t["name"] for t in result["targets"]]
    assert len(names) >= 12 and all(t["result"] in RESULTS[:2] for t in result["targets"])
    # the printed table is the stored one, and it re-renders from the JSON alone
    assert result["table"] in proc.stdout
    for heading in (
        "Route lookups",
        "REGISTER_BROKER",
        "Overload, 1 worker",
        "Steady-state Lua",
        "Liveness",
        "Memory",
        "Targets",
    ):
        assert heading in result["table"]
    assert render(result, [Target(**t) for t in result["targets"]]) == result["table"]
