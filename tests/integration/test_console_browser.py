"""The console in a real headless Chromium: a broker registered over remoting appears without a
reload, and disappears once it expires. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from namesrv.config import Settings
from namesrv.keys import REMOTING
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.chromium import SKIP_REASON, Browser, chromium_path
from tests.conftest import close_client, start_client
from tests.polling import eventually

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
ROWS = "Array.from(document.querySelectorAll('#brokers tbody tr')).map(r => r.dataset.broker)"


async def test_console_shows_a_broker_live_and_drops_it_when_it_expires(settings: Settings) -> None:
    executable = chromium_path()
    if executable is None:
        pytest.skip(SKIP_REASON)
    worker = await start_client(dataclasses.replace(settings, scanNotActiveBrokerInterval=200))
    browser = await Browser.start(executable)
    conn = None
    try:
        await browser.call("Page.enable")
        await browser.call("Page.navigate", url=str(worker.make_url("/ui")))
        await eventually(
            lambda: browser.evaluate("document.getElementById('health').textContent.includes('Redis up')"),
            what="the console loaded",
        )
        assert await browser.evaluate(ROWS) == []
        conn = await RemotingClient.connect(f"127.0.0.1:{worker.app[REMOTING].port}")
        broker = SimBroker(
            conn,
            "ConsoleCluster",
            "console-broker",
            "127.0.0.7:10911",
            topics=topic_configs(["ConsoleTopicA", "ConsoleTopicB"]),
            timeout_ms=1000,
        )
        await broker.register()

        async def listed() -> bool:
            return await browser.evaluate(ROWS) == ["console-broker"]

        await eventually(listed, what="the broker appears without a reload")
        await eventually(
            lambda: browser.evaluate("document.getElementById('changes').textContent.includes('register')"),
            what="the change is listed live",
        )
        await browser.screenshot(ARTIFACTS / "console-broker-up.png")

        async def gone() -> bool:
            return await browser.evaluate(ROWS) == []

        await eventually(gone, timeout=20, what="the expired broker disappears")
        assert "expire" in await browser.evaluate("document.getElementById('changes').textContent")
        await browser.screenshot(ARTIFACTS / "console-broker-expired.png")
    finally:
        if conn is not None:
            await conn.aclose()
        await browser.close()
        await close_client(worker)
