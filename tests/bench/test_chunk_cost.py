"""``python -m bench.chunk_cost``: its ablations still find what they remove in the shipped
script, the shipped variant writes what a registration does, and it prints a row per variant."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from bench import chunk_cost
from namesrv.store.keyspace import Keyspace
from tests.redis_server import local_redis


def test_each_ablation_removes_exactly_its_part() -> None:
    shipped = chunk_cost.variant("shipped")[chunk_cost.SCRIPT].source
    for name, (removed, stand_in) in chunk_cost.ABLATIONS.items():
        ablated = chunk_cost.variant(name)[chunk_cost.SCRIPT].source
        assert shipped.count(removed) == 1 and removed not in ablated and stand_in in ablated, name


async def test_the_shipped_variant_writes_every_queue_and_both_topic_sets() -> None:
    with local_redis() as url:
        ms = await chunk_cost.master_ms(url, "shipped", 2, 30, 8)
        redis = Redis.from_url(url, decode_responses=True)
        try:
            keys = Keyspace(chunk_cost.NAMESPACE)
            assert await redis.scard(keys.topics) == 30
            assert await redis.scard(keys.btopics("broker-001")) == 30
            assert sorted(await redis.hkeys(keys.topic("rip29-topic-00029"))) == ["broker-000", "broker-001"]
        finally:
            await redis.aclose()
    assert ms > 0


def test_the_tool_prints_a_row_per_variant(capsys: pytest.CaptureFixture[str]) -> None:
    chunk_cost.main(["--brokers", "1", "--topics", "20", "--chunk", "8", "--rounds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "20-topic new masters in chunks of 8: Redis ms per master (median of 1 rounds)"
    assert [line.split("  ")[1].strip() for line in lines[1:]] == [
        "shipped",
        "without the topic-index SADDs",
        "without the queue HSETs",
    ]
