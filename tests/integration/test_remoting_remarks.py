"""Remarks and logs of requests that leave a field out or change little: Java's ``null`` in
remarks, and what UPDATE_NAMESRV_CONFIG applied (Java's reply says nothing, so the log does)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from namesrv.config import Settings
from namesrv.keys import REMOTING
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client

FAQ = "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


@pytest.fixture
async def addr(settings: Settings) -> AsyncIterator[str]:
    app = await start_client(dataclasses.replace(settings, allowRemoteConfigUpdate=True))
    yield f"127.0.0.1:{app.app[REMOTING].port}"
    await close_client(app)


@pytest.mark.parametrize(
    ("code", "ext", "answer", "remark"),
    [
        (101, {"namespace": "NS"}, 22, "No config item, Namespace: NS Key: null"),
        (101, {"key": "k"}, 22, "No config item, Namespace: null Key: k"),
        (101, {}, 22, "No config item, Namespace: null Key: null"),
        (219, {}, 22, "No config item, Namespace: null"),
        (105, {}, 17, f"No topic route info in name server for the topic: null\n{FAQ}"),
    ],
)
async def test_missing_fields_read_null_as_in_java(
    addr: str, code: int, ext: dict[str, str], answer: int, remark: str
) -> None:
    async with await RemotingClient.connect(addr) as c:
        reply = await c.invoke(code, ext)
    assert (reply.code, reply.remark) == (answer, remark)


async def test_update_config_logs_what_it_applied(addr: str, caplog: pytest.LogCaptureFixture) -> None:
    body = b"enableTopicList=false\nhttpPort=1\nnoSuchKey=1\n"
    with caplog.at_level(logging.INFO, logger="namesrv.registry.config_update"):
        async with await RemotingClient.connect(addr) as c:
            reply = await c.invoke(318, body=body)
    assert (reply.code, reply.remark, reply.body) == (0, None, None)  # Java: a bare success
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name.endswith("config_update")] == [
        (
            logging.WARNING,
            "config update: applied enableTopicList; needs a restart (not applied) httpPort; "
            "unknown, ignored noSuchKey",
        )
    ]


async def test_update_config_over_http_says_what_it_applied(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    client: Any = await start_client(dataclasses.replace(settings, allowRemoteConfigUpdate=True))
    try:
        with caplog.at_level(logging.INFO, logger="namesrv.registry.config_update"):
            resp = await client.put("/v1/config", json={"enableTopicList": False})
            assert (resp.status, await resp.json()) == (
                200,
                {"code": 0, "applied": ["enableTopicList"], "needsRestart": [], "ignored": []},
            )
    finally:
        await close_client(client)
    assert [r.getMessage() for r in caplog.records if r.name.endswith("config_update")] == [
        "config update: applied enableTopicList; needs a restart (not applied) -; unknown, ignored -"
    ]
