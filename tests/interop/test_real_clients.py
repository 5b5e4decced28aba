"""Interop with independent RocketMQ clients: the C++ client (PyPI ``rocketmq`` 0.4.4, which bundles
librocketmq) and the pure-JS ``ali-ons`` look up routes of a broker registered with our worker and
send a message to it. A client that cannot be installed here is skipped with the reason, never
silently."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from namesrv.config import Settings
from namesrv.keys import REMOTING
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client
from tests.interop.fake_broker import SEND_MESSAGE, SEND_MESSAGE_V2, FakeBroker

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE.parents[1] / ".cache" / "interop-node"
ALI_ONS = "ali-ons@3.12.0"


@pytest.fixture
async def fleet(settings: Settings) -> AsyncIterator[tuple[str, FakeBroker]]:
    """A worker with one broker registered at a fake broker's address; yields (namesrv, broker)."""
    fake = FakeBroker()
    await fake.start()
    app = await start_client(settings)
    namesrv = f"127.0.0.1:{app.app[REMOTING].port}"
    conn = await RemotingClient.connect(namesrv)
    await SimBroker(
        conn, "DefaultCluster", "broker-a", fake.addr, topics=topic_configs(["TopicTest", "TBW102"], queues=4)
    ).register()
    yield namesrv, fake
    await conn.aclose()
    await close_client(app)
    await fake.stop()


async def run(cmd: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


def sends(fake: FakeBroker) -> list[Any]:
    return [c for c in fake.received if c.code in (SEND_MESSAGE, SEND_MESSAGE_V2)]


async def test_cpp_client_routes_and_sends(fleet: tuple[str, FakeBroker], tmp_path: Path) -> None:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip(
            "PyPI rocketmq 0.4.4 (bundled C++ client) is not installed: it ships for Linux x86_64 only"
        )
    namesrv, fake = fleet
    env = {**os.environ, "HOME": str(tmp_path)}  # librocketmq writes its logs under $HOME/logs
    code, out, err = await run([sys.executable, str(HERE / "cpp_producer.py"), namesrv, "TopicTest"], env)
    assert code == 0, err[-2000:]
    assert orjson.loads(out.strip().splitlines()[-1])["status"] == 0  # SEND_OK
    sent = sends(fake)
    assert len(sent) == 1 and (sent[0].ext_fields or {}).get("topic") == "TopicTest"
    assert int((sent[0].ext_fields or {})["queueId"]) in range(4)


def node_client() -> Path:
    """Install ali-ons once into .cache/ (pure JS, from the npm registry)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("Node.js/npm is not installed: the ali-ons (JS client) interop test cannot run")
    package = NODE_DIR / "node_modules" / "ali-ons" / "package.json"
    if not package.exists():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NODE_DIR), ALI_ONS],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"npm could not install {ALI_ONS}: {done.stderr.strip()[-300:]}")
    return NODE_DIR / "node_modules"


async def test_ali_ons_parses_our_route_and_sends(fleet: tuple[str, FakeBroker]) -> None:
    modules = node_client()
    namesrv, fake = fleet
    env = {**os.environ, "NODE_PATH": str(modules)}
    code, out, err = await run(["node", str(HERE / "alions_producer.js"), namesrv, "TopicTest"], env)
    assert code == 0, (out + err)[-2000:]
    result = orjson.loads(out.strip().splitlines()[-1])
    assert result["sendStatus"] == "SEND_OK"
    route = result["route"]
    assert [b["brokerAddrs"] for b in route["brokerDatas"]] == [{"0": fake.addr}]
    assert [
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]
    ] == [("broker-a", 4, 4, 6)]
    assert len(sends(fake)) == 1
