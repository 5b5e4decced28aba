"""Issue #25 rows 1 and 11 against real worker processes and a real Redis: zip bombs in
REGISTER_BROKER bodies are refused after a few bytes and store nothing, concurrent bodies never
hold more than decodeBudgetBytes (the worker's own high-water gauge says so) while /livez keeps
answering, the memory goes back afterwards, real 100,000-topic compressed bodies register, and so
does a 5.3.3 broker's zlib body sent with compressed=false. Then the budget's refusals on both
transports (in-process workers)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import struct
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain.model import DataVersion, TopicConfig
from namesrv.keys import REMOTING, SERVICE
from namesrv.protocol import lenient_json
from namesrv.protocol.register_body import crc32_masked
from namesrv.sim.bodies import register_body_compressed, register_body_json
from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from tests.builders import register_json
from tests.conftest import close_client, start_client
from tests.integration.test_abuse_bounded import rss
from tests.integration.test_lifecycle import Worker
from tests.registry_state import SCAN_COUNT, drop_namespace

MIB = 1 << 20
REGISTER_BROKER, GET_ROUTE = 103, 105
DECODE_FAILED = (
    "org.apache.rocketmq.remoting.exception.RemotingCommandException: Failed to decode RegisterBrokerBody: "
)
BOMB_REMARK = (
    DECODE_FAILED + "compressed body gives dataVersion a length of 66060288 bytes: it would inflate to more "
    "than 33554432 bytes (registerBodyMaxInflatedBytes)"
)
FROM_5_3_3 = (
    "body sent with compressed=false starts with a zlib header (a 5.3.3 broker's compressedRegister), "
    "read as compressed: "
)
OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
# What a worker may keep after the attack (issue #25: "RSS after <= baseline + 150 MiB").
RSS_AFTER_BOUND = 150 * MIB


@pytest.fixture(autouse=True)
async def _drop_the_registry(redis_url: str, namespace: str) -> AsyncIterator[None]:
    """Three of these tests register 100,000 topics: left in the session's Redis they made every
    later test that scans its own namespace slower."""
    yield
    await drop_namespace(redis_url, namespace)


def issue_bomb() -> bytes:
    """Issue #25's body: 64 KB of zlib, inflating to a 63 MiB length and then 63 MiB of '0'."""
    return zlib.compress(struct.pack(">i", 63 << 20) + b"0" * (63 << 20), 9)


def real_topics(n: int) -> dict[str, TopicConfig]:
    """Topics as a big broker has them: 64-character names, a message type each."""
    names = [f"business-domain-service-events-{i:06d}".ljust(64, "x") for i in range(n)]
    return {name: TopicConfig(name, 16, 16, 6, attributes={"+message.type": "NORMAL"}) for name in names}


def header(body: bytes, addr: str, name: str, *, compressed: bool) -> dict[str, str]:
    """What a broker's BrokerOuterAPI puts in REGISTER_BROKER's header."""
    return {
        "brokerId": "0",
        "bodyCrc32": str(crc32_masked(body)),
        "clusterName": "DefaultCluster",
        "brokerAddr": addr,
        "haServerAddr": addr,
        "compressed": "true" if compressed else "false",
        "brokerName": name,
        "enableActingMaster": "false",
    }


async def register(
    port: int, body: bytes, addr: str, name: str, *, compressed: bool, timeout: float = 120
) -> tuple[int, str]:
    """Over a connection of its own, closed after the reply (which removes the broker again)."""
    async with await RemotingClient.connect(f"127.0.0.1:{port}") as client:
        return await register_over(client, body, addr, name, compressed=compressed, timeout=timeout)


async def register_over(
    client: RemotingClient, body: bytes, addr: str, name: str, *, compressed: bool, timeout: float = 120
) -> tuple[int, str]:
    reply = await client.invoke(
        REGISTER_BROKER, header(body, addr, name, compressed=compressed), body, timeout=timeout
    )
    return reply.code, reply.remark or ""


def metric(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def scrape(worker: Worker) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{worker.url}/metrics") as resp:
        return await resp.text()


@contextlib.asynccontextmanager
async def running_worker(tmp_path: Path, redis_url: str, namespace: str, **env: str) -> AsyncIterator[Worker]:
    worker = Worker(
        {
            "NAMESRV_REDIS_URL": redis_url,
            "NAMESRV_NAMESPACE": namespace,
            "NAMESRV_LOG_LEVEL": "WARNING",
            **env,
        },
        tmp_path,
    )
    await worker.start()
    try:
        yield worker
    finally:
        code, output = await worker.stop()
        assert code == 0, output


class LivenessProbe:
    """GET /livez over and over until stopped; what each answered."""

    def __init__(self, worker: Worker) -> None:
        self.url = f"{worker.url}/livez"
        self.statuses: list[int] = []
        self.answered = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LivenessProbe:
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            while not self._stop.is_set():
                async with session.get(self.url) as resp:
                    self.statuses.append(resp.status)
                self.answered.set()
                await asyncio.sleep(0.02)

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._task is not None
        await self._task


async def settled_rss(pid: int, bound: int, timeout: float = 30.0) -> int:
    """The worker's RSS once at most ``bound`` (the allocator is trimmed shortly after a burst),
    or as it is after ``timeout``."""
    deadline = time.monotonic() + timeout
    now = rss(pid)
    while now > bound and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        now = rss(pid)
    return now


async def keys(redis: Redis, namespace: str) -> set[str]:
    return {key async for key in redis.scan_iter(match=f"{{{namespace}}}:*", count=SCAN_COUNT)}


# ---- against worker processes -----------------------------------------------------------------


async def test_a_zip_bomb_is_refused_with_its_remark_and_stores_nothing(
    redis_url: str, namespace: str, tmp_path: Path, redis: Redis
) -> None:
    async with running_worker(tmp_path, redis_url, namespace) as worker:
        before = await keys(redis, namespace)
        flagged = await register(worker.remoting, issue_bomb(), "10.0.0.1:10911", "bomb", compressed=True)
        as_5_3_3 = await register(worker.remoting, issue_bomb(), "10.0.0.2:10911", "bomb", compressed=False)
        assert flagged == (1, BOMB_REMARK)
        assert as_5_3_3 == (1, BOMB_REMARK.replace(DECODE_FAILED, DECODE_FAILED + FROM_5_3_3))
        assert await keys(redis, namespace) == before
        text = await scrape(worker)
        assert metric(text, "namesrv_limit_refusals_total", '{limit="registerBodyMaxInflatedBytes"}') == 2
        assert metric(text, "namesrv_decode_budget_held_bytes") == 0


async def test_concurrent_bombs_hold_no_more_than_the_budget_and_livez_answers(
    redis_url: str, namespace: str, tmp_path: Path, redis: Redis
) -> None:
    budget = 48 * MIB  # room for two bombs' reservations (64 KB each, reserved as a real body's 20 MB)
    async with running_worker(
        tmp_path,
        redis_url,
        namespace,
        NAMESRV_DECODE_BUDGET_BYTES=str(budget),
        NAMESRV_DECODE_WAIT_MILLIS="60000",  # the line moves in milliseconds: nobody must give up
    ) as worker:
        bomb = issue_bomb()
        before = await keys(redis, namespace)
        async with LivenessProbe(worker) as probe:
            await probe.answered.wait()  # the probe is answering before the attack starts
            replies = await asyncio.gather(
                *(
                    register(worker.remoting, bomb, f"10.0.1.{i}:10911", f"bomb-{i}", compressed=True)
                    for i in range(20)
                )
            )
            answered_during = len(probe.statuses)
        assert replies == [(1, BOMB_REMARK)] * 20
        assert answered_during >= 1 and set(probe.statuses) == {200}
        text = await scrape(worker)
        high_water = metric(text, "namesrv_decode_budget_high_water_bytes")
        assert len(bomb) * 320 <= high_water <= budget
        assert metric(text, "namesrv_decode_budget_held_bytes") == 0
        assert metric(text, "namesrv_limit_refusals_total", '{limit="registerBodyMaxInflatedBytes"}') == 20
        assert await keys(redis, namespace) == before


async def test_memory_goes_back_after_bombs_and_big_valid_bodies(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    big = register_body_compressed(real_topics(100_000), DataVersion(1, 0, int(time.time() * 1000)))
    async with running_worker(tmp_path, redis_url, namespace, NAMESRV_REDIS_TIMEOUT_MILLIS="10000") as worker:
        assert worker.proc is not None
        pid = worker.proc.pid
        baseline = rss(pid)
        bombs = await asyncio.gather(
            *(
                register(worker.remoting, issue_bomb(), f"10.0.2.{i}:10911", f"bomb-{i}", compressed=True)
                for i in range(20)
            )
        )
        async with LivenessProbe(worker) as probe:
            await probe.answered.wait()
            before = len(probe.statuses)
            # lasts a second or more: one body decodes and is written while the others wait
            valid = await asyncio.gather(
                *(
                    register(worker.remoting, big, f"10.0.3.{i}:10911", f"big-{i}", compressed=True)
                    for i in range(20)
                )
            )
            answered_during = len(probe.statuses) - before
        peak = rss(pid, "VmHWM")

        after = await settled_rss(pid, baseline + RSS_AFTER_BOUND)
        print(
            f"worker RSS: baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB, "
            f"after {after / MIB:.0f} MiB; {valid.count((0, ''))} of 20 big bodies registered; "
            f"/livez answered {answered_during} times meanwhile"
        )
        assert after - baseline <= RSS_AFTER_BOUND
        assert answered_during >= 1 and set(probe.statuses) == {200}
        assert bombs == [(1, BOMB_REMARK)] * 20
        # One body decodes at a time (each reserves most of the 128 MiB budget); the others wait
        # decodeWaitMillis, and those still waiting then are told to come back.
        assert {code for code, _ in valid} <= {0, 2} and (0, "") in valid
        assert all(remark.startswith(OVERLOAD) for code, remark in valid if code == 2)
        assert metric(await scrape(worker), "namesrv_decode_budget_high_water_bytes") <= 128 * MIB


@pytest.mark.parametrize("compressed", [True, False], ids=["flagged", "5.3.3-unflagged"])
async def test_a_real_100k_topic_compressed_body_registers(
    redis_url: str, namespace: str, tmp_path: Path, redis: Redis, compressed: bool
) -> None:
    configs = real_topics(100_000)
    body = register_body_compressed(configs, DataVersion(1, 0, int(time.time() * 1000)))
    # The registration writes 100 chunks of 1,000 topics back to back; on a loaded machine the
    # last of them can wait in Redis longer than the default 1 s per call.
    async with (
        running_worker(tmp_path, redis_url, namespace, NAMESRV_REDIS_TIMEOUT_MILLIS="10000") as worker,
        await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as broker,
    ):
        registered = await register_over(broker, body, "10.0.4.1:10911", "broker-big", compressed=compressed)
        assert registered == (0, "")
        stored = await redis.smembers(Keyspace(namespace).btopics("broker-big"))  # type: ignore[misc]
        assert stored == set(configs)
        route = await broker.invoke(GET_ROUTE, {"topic": next(reversed(configs))})
        assert route.code == 0 and route.body is not None
        assert lenient_json.loads(route.body)["queueDatas"] == [
            {
                "brokerName": "broker-big",
                "perm": 6,
                "readQueueNums": 16,
                "topicSysFlag": 0,
                "writeQueueNums": 16,
            }
        ]


async def test_a_5_3_3_broker_with_compressed_register_registers_its_topics(
    redis_url: str, namespace: str, tmp_path: Path
) -> None:
    """BrokerOuterAPI.registerBrokerAll in 5.3.3: header compressed=false, body
    RegisterBrokerBody.encode(compressedRegister=true); Java's NameServer cannot read it."""
    configs = {
        "OrderEvents": TopicConfig("OrderEvents", 8, 8, 6, attributes={"+message.type": "FIFO"}),
        "Payments": TopicConfig("Payments", 4, 2, 7, "MULTI_TAG"),
        "%RETRY%checkout": TopicConfig("%RETRY%checkout", 1, 1, 6),
    }
    body = register_body_compressed(configs, DataVersion(1, 0, int(time.time() * 1000)))
    routes = {}
    async with (
        running_worker(tmp_path, redis_url, namespace) as worker,
        await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as broker,
    ):
        assert await register_over(broker, body, "10.0.5.1:10911", "broker-533", compressed=False) == (0, "")
        for topic in configs:
            reply = await broker.invoke(GET_ROUTE, {"topic": topic})
            assert reply.code == 0 and reply.body is not None
            routes[topic] = lenient_json.loads(reply.body)["queueDatas"]
    assert routes == {
        topic: [
            {
                "brokerName": "broker-533",
                "perm": tc.perm,
                "readQueueNums": tc.readQueueNums,
                "topicSysFlag": 0,
                "writeQueueNums": tc.writeQueueNums,
            }
        ]
        for topic, tc in configs.items()
    }


# ---- the budget's refusals, in-process --------------------------------------------------------


@pytest.fixture
async def full_budget(settings: Settings) -> AsyncIterator[tuple[Any, int]]:
    """A worker whose whole decoding budget is held (as by a decode in flight)."""
    app = await start_client(dataclasses.replace(settings, decodeWaitMillis=100))
    budget = app.app[SERVICE].decode_budget
    held = await budget.reserve(budget.capacity, "a body in flight")
    try:
        yield app, budget.capacity
    finally:
        held.release()
        await close_client(app)


def busy_remark(capacity: int, what: str) -> str:
    return (
        f"{OVERLOAD}: bodies being decoded hold the worker's decoding budget ({capacity} of {capacity} "
        f"bytes, decodeBudgetBytes); {what} was not decoded"
    )


async def test_remoting_registration_waits_for_the_budget_then_is_busy(full_budget: tuple[Any, int]) -> None:
    app, capacity = full_budget
    body = register_body_json(real_topics(3), DataVersion(1, 0, 1700000000000))
    reply = await register(app.app[REMOTING].port, body, "10.0.6.1:10911", "broker-busy", compressed=False)
    assert reply == (2, busy_remark(capacity, "the REGISTER_BROKER body"))
    assert app.app[SERVICE].decode_budget.held == capacity  # the refusal took nothing


async def test_http_registration_waits_for_the_budget_then_503(full_budget: tuple[Any, int]) -> None:
    app, capacity = full_budget
    resp = await app.post("/v1/brokers/register", json=register_json(topics=["TopicTest"]))
    assert resp.status == 503
    assert await resp.json() == {"code": 2, "remark": busy_remark(capacity, "the request body")}


async def test_a_body_needing_more_than_the_whole_budget_is_refused_on_both_transports(
    settings: Settings, redis: Redis, namespace: str
) -> None:
    app = await start_client(dataclasses.replace(settings, decodeBudgetBytes=MIB))
    try:
        configs = real_topics(3000)
        http_body = register_json(topics=list(configs))
        resp = await app.post("/v1/brokers/register", json=http_body)
        assert resp.status == 413
        remark = (await resp.json())["remark"]
        assert re.fullmatch(
            r"the request body needs about \d+ bytes of memory to decode, more than the worker's whole "
            rf"budget for decoding \({MIB} bytes, decodeBudgetBytes\)",
            remark,
        )
        body = register_body_json(configs, DataVersion(1, 0, 1700000000000))
        code, remark = await register(
            app.app[REMOTING].port, body, "10.0.7.1:10911", "broker-x", compressed=False
        )
        assert code == 1
        assert remark.startswith("the REGISTER_BROKER body needs about ")
        assert (
            await redis.exists(
                Keyspace(namespace).btopics("broker-a"), Keyspace(namespace).btopics("broker-x")
            )
            == 0
        )
    finally:
        await close_client(app)
