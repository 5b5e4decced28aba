"""An independent signer: the C++ client (PyPI ``rocketmq`` 0.4.4, librocketmq) with session
credentials looks a route up from a worker whose ACL refuses unsigned requests, and sends."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from namesrv.config import Settings
from namesrv.domain.codes import RequestCode
from namesrv.keys import REMOTING
from namesrv.security.signature import signed_fields
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client
from tests.interop.fake_broker import FakeBroker
from tests.interop.test_real_clients import HERE, run, sends

ACCOUNT = ("RocketMQ", "12345678")
ACL = f"""
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: {ACCOUNT[0]}
    secretKey: "{ACCOUNT[1]}"
    admin: false
"""


@dataclasses.dataclass
class Fleet:
    namesrv: str
    fake: FakeBroker
    app: Any


@pytest.fixture
async def fleet(settings: Settings, tmp_path: Path) -> AsyncIterator[Fleet]:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip(
            "PyPI rocketmq 0.4.4 (bundled C++ client) is not installed: it ships for Linux x86_64 only"
        )
    (tmp_path / "plain_acl.yml").write_text(ACL)
    fake = FakeBroker()
    await fake.start()
    app = await start_client(
        dataclasses.replace(settings, aclEnable=True, aclFile=str(tmp_path / "plain_acl.yml"))
    )
    namesrv = f"127.0.0.1:{app.app[REMOTING].port}"
    conn = await RemotingClient.connect(namesrv)
    broker = SimBroker(
        conn, "DefaultCluster", "broker-a", fake.addr, topics=topic_configs(["TopicTest", "TBW102"], queues=4)
    )
    body = broker.body()
    reply = await conn.invoke(
        RequestCode.REGISTER_BROKER, signed_fields(*ACCOUNT, broker.header(body), body), body
    )
    assert reply.code == 0
    yield Fleet(namesrv, fake, app)
    await conn.aclose()
    await close_client(app)
    await fake.stop()


async def decisions(app: Any) -> str:
    text: str = await (await app.get("/metrics")).text()
    return "\n".join(line for line in text.splitlines() if line.startswith("namesrv_acl_decisions_total{"))


async def test_cpp_client_signature_is_accepted(fleet: Fleet, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}  # librocketmq writes its logs under $HOME/logs
    cmd = [sys.executable, str(HERE / "cpp_producer.py"), fleet.namesrv, "TopicTest", *ACCOUNT]
    code, out, err = await run(cmd, env)
    assert code == 0, err[-2000:]
    assert orjson.loads(out.strip().splitlines()[-1])["status"] == 0  # SEND_OK
    assert len(sends(fleet.fake)) == 1
    counted = await decisions(fleet.app)
    assert 'result="refused"' not in counted
    assert 'namesrv_acl_decisions_total{mode="enforcing",reason="signed",result="allowed"}' in counted


async def test_cpp_client_with_a_wrong_secret_gets_no_route(fleet: Fleet, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    cmd = [
        sys.executable,
        str(HERE / "cpp_producer.py"),
        fleet.namesrv,
        "TopicTest",
        ACCOUNT[0],
        "wrong-secret",
    ]
    code, out, err = await run(cmd, env)
    assert code != 0  # the C++ client raises: no route info for the topic
    assert sends(fleet.fake) == []
    counted = await decisions(fleet.app)
    assert 'namesrv_acl_decisions_total{mode="enforcing",reason="bad_signature",result="refused"}' in counted
