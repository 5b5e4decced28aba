"""``--peer``: the bench measures another NameServer already running, in turns with ours. The peer
here is a second instance of our own worker on its own Redis (a Java one is used the same way)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.config import parse_config
from bench.peers import Peer, parse_peer
from bench.procs import start_worker, wait_http_ready
from tests.conftest import PATIENT_REDIS_MS
from tests.redis_server import local_redis

ROOT = Path(__file__).resolve().parents[2]


def test_peer_flags_parse() -> None:
    assert parse_peer("java=127.0.0.1:19876") == Peer("java", "127.0.0.1", 19876, None)
    assert parse_peer("other=10.0.0.2:9877@4242") == Peer("other", "10.0.0.2", 9877, 4242)
    cfg = parse_config(["--peer", "a=h:1", "--peer", "b=h:2@7"])
    assert [str(p) for p in cfg.peers] == ["a=h:1", "b=h:2@7"]
    for bad in ("java", "java=host", "java=host:port", "=h:1", "j=h:1@x", "fleet=h:1"):
        with pytest.raises(SystemExit):
            parse_config(["--peer", bad])
    with pytest.raises(SystemExit):
        parse_config(["--peer", "a=h:1", "--peer", "a=h:2"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_smoke_run_measures_a_peer_side_by_side(tmp_path: Path) -> None:
    with local_redis() as url:
        # the test checks the harness, not the peer's Redis deadline on a busy machine
        patient = {"NAMESRV_REDIS_TIMEOUT_MILLIS": str(PATIENT_REDIS_MS)}
        peer = start_worker("peer", url, "peer", tmp_path, patient)
        try:
            asyncio.run(wait_http_ready(peer.proc, f"{peer.url}/readyz"))
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench",
                    "--smoke",
                    "--phases",
                    "remoting,registration",
                    "--fleet-sizes",
                    "1",
                    "--peer",
                    f"twin=127.0.0.1:{peer.remoting_port}@{peer.proc.pid}",
                    "--out-dir",
                    str(tmp_path / "out"),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=280,
            )
        finally:
            asyncio.run(peer.proc.stop())
    assert proc.returncode == 0, proc.stdout[-4000:] + "\n" + proc.stderr[-6000:]
    result = json.loads((tmp_path / "out" / "latest.json").read_text())
    twin = [r for r in result["lookups"] if r["scenario"]["server"] == "twin"]
    assert {(r["scenario"]["pattern"], r["scenario"]["load"]) for r in twin} == {
        (p, load) for p in ("hot", "spread") for load in ("peak", "80%")
    }
    for row in twin:
        assert row["errors"] == 0
        # the open-loop rows can be starved on a busy machine (our worker's too); peaks never are
        if row["scenario"]["load"] == "peak":
            assert row["completed"] > 0
            assert row["server_us_per_request"] is not None and row["server_us_per_request"] > 0
    assert {(r["target"], r["kind"], r["topics"]) for r in result["registration"]} == {
        (t, kind, size)
        for t in ("fleet", "twin")
        for kind in ("new", "unchanged", "bumped")
        for size in (50, 300)
    }
    table = result["table"]
    assert "Side by side" in table and "twin ÷ ours" in table and "peer twin" in table


def test_new_broker_is_judged_against_each_peer_of_the_same_size() -> None:
    from bench.targets import Target, _new_broker_vs_peers

    def row(target: str, topics: int, kind: str, ms: float) -> dict[str, object]:
        return {"target": target, "topics": topics, "kind": kind, "median_ms": ms}

    registration = [
        row("fleet", 1000, "new", 9.0),
        row("fleet", 10000, "new", 60.0),
        row("java", 1000, "new", 10.0),
        row("java", 10000, "new", 40.0),
        row("java", 10000, "bumped", 30.0),  # only new brokers are held to the peer
    ]
    assert _new_broker_vs_peers(registration) == [
        Target(
            "REGISTER_BROKER new, 1,000 topics, vs java (same run)",
            "9.0 ms vs 10.0 ms (0.9x its time)",
            "≤ java",
            "PASS",
        ),
        Target(
            "REGISTER_BROKER new, 10,000 topics, vs java (same run)",
            "60.0 ms vs 40.0 ms (1.5x its time)",
            "≤ java",
            "MISS",
        ),
    ]
