"""The console in a real headless Chromium: a broker registered over remoting appears without a
reload with its version and write permission, topics with their queue counts, the route cache hit
ratio and the report link; the broker disappears once it expires. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from namesrv.config import Settings
from namesrv.domain.codes import Version
from namesrv.keys import REMOTING, SERVICE
from namesrv.registry.route_cache import RouteCache
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from tests.chromium import SKIP_REASON, Browser, chromium_path
from tests.conftest import close_client, start_client
from tests.polling import eventually, scaled

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
ROWS = "Array.from(document.querySelectorAll('#brokers tbody tr')).map(r => r.dataset.broker)"
CELLS = (
    "Array.from(document.querySelectorAll('#brokers tbody tr'))"
    ".map(r => Array.from(r.cells, c => c.textContent))"
)
TOPICS = "Array.from(document.querySelectorAll('#topics li')).map(li => li.textContent)"
HEALTH = "document.getElementById('health').textContent"
REPORT = (
    "[document.getElementById('report').textContent, document.getElementById('report').getAttribute('href')]"
)


async def open_console(browser: Browser, worker: Any) -> None:
    await browser.call("Page.enable")
    await browser.call("Page.navigate", url=str(worker.make_url("/ui")))
    await eventually(
        lambda: browser.evaluate("document.getElementById('health').textContent.includes('Redis up')"),
        what="the console loaded",
    )


async def test_console_shows_a_broker_live_and_drops_it_when_it_expires(settings: Settings) -> None:
    executable = chromium_path()
    if executable is None:
        pytest.skip(SKIP_REASON)
    worker = await start_client(
        dataclasses.replace(
            settings,
            scanNotActiveBrokerInterval=200,
            consoleReportUrl="/reports/route-history.html",
        )
    )
    browser = await Browser.start(executable)
    conn = None
    try:
        await open_console(browser, worker)
        assert await browser.evaluate(ROWS) == []
        conn = await RemotingClient.connect(f"127.0.0.1:{worker.app[REMOTING].port}", version=Version.V4_9_8)
        broker = SimBroker(
            conn,
            "ConsoleCluster",
            "console-broker",
            "127.0.0.7:10911",
            topics=topic_configs(["ConsoleTopicA", "ConsoleTopicB"]),
            # long enough to check the page while it is live, short enough to watch it expire
            timeout_ms=int(scaled(5) * 1000),
        )
        await broker.register()

        async def listed() -> bool:
            return await browser.evaluate(ROWS) == ["console-broker"]

        await eventually(listed, what="the broker appears without a reload")
        await eventually(
            lambda: browser.evaluate("document.getElementById('changes').textContent.includes('register')"),
            what="the change is listed live",
        )
        wiped = await worker.post("/v1/brokers/console-broker/wipe-write-perm")
        assert await wiped.json() == {"code": 0, "wipeTopicCount": 2}
        for _ in range(3):
            assert (await worker.get("/v1/routes/ConsoleTopicA")).status == 200

        async def read_only() -> bool:  # the wipe's change event refreshes the page
            cells = await browser.evaluate(CELLS)
            return bool(cells) and cells[0][7] == "read-only"

        await eventually(read_only, what="the wiped write permission is shown")
        (row,) = await browser.evaluate(CELLS)
        assert row[:8] == [
            "ConsoleCluster",
            "console-broker",
            "0",
            "master",
            "127.0.0.7:10911",
            "",
            "V4_9_8",
            "read-only",
        ]
        assert await browser.evaluate(TOPICS) == [
            "ConsoleTopicA read 8 · write 8",
            "ConsoleTopicB read 8 · write 8",
        ]
        await browser.screenshot(ARTIFACTS / "console-broker-up.png")
        # the health line polls every 5 s: refresh it now; nothing looks a route up meanwhile
        cache = worker.app[SERVICE].lookups
        assert isinstance(cache, RouteCache)
        hits, misses = cache.stats()["hits"], cache.stats()["misses"]
        await browser.call("Runtime.evaluate", expression="refreshOverview()", awaitPromise=True)
        ratio = f"route cache hits {100 * hits / (hits + misses):.1f}% ({hits} hits, {misses} misses)"
        assert ratio in await browser.evaluate(HEALTH)
        assert await browser.evaluate(REPORT) == ["route-history report", "/reports/route-history.html"]

        async def gone() -> bool:
            return await browser.evaluate(ROWS) == []

        await eventually(gone, timeout=30, what="the expired broker disappears")
        assert "expire" in await browser.evaluate("document.getElementById('changes').textContent")
        await browser.screenshot(ARTIFACTS / "console-broker-expired.png")
    finally:
        if conn is not None:
            await conn.aclose()
        await browser.close()
        await close_client(worker)


async def test_console_says_how_to_get_the_report_when_no_link_is_set(settings: Settings) -> None:
    executable = chromium_path()
    if executable is None:
        pytest.skip(SKIP_REASON)
    worker = await start_client(settings)
    browser = await Browser.start(executable)
    try:
        await open_console(browser, worker)
        assert await browser.evaluate(REPORT) == [
            "route-history report: not configured (consoleReportUrl; docs/PIPELINE.md makes one)",
            None,
        ]
        assert "route cache hits – (0 hits, 0 misses)" in await browser.evaluate(HEALTH)
    finally:
        await browser.close()
        await close_client(worker)
