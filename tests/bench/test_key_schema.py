"""``python -m bench.key_schema``: the two key schemas it compares hold and answer the same
routes, so its timings compare like with like."""

from __future__ import annotations

import pytest
import redis

from bench import key_schema
from tests.redis_server import local_redis


def test_both_schemas_write_and_read_the_same_queues() -> None:
    with local_redis() as url:
        r = redis.Redis.from_url(url, decode_responses=True)
        topics = [f"topic-{i:05d}" for i in range(2500)]
        key_schema.new_broker_ms(r, topics, per_broker=False, rounds=1)
        per_topic = {t: r.hgetall(f"{{ns}}:topic:{t}") for t in topics}
        key_schema.new_broker_ms(r, topics, per_broker=True, rounds=1)
        per_broker = r.hgetall("{ns}:q:broker-a")
        queue = key_schema.QUEUE % "broker-a"
        assert per_topic == {t: {"broker-a": queue} for t in topics}
        assert per_broker == dict.fromkeys(topics, queue)

        key_schema.read_us(r, 5, reads=1)
        now = r.eval(key_schema.READ_PER_TOPIC, 1, "{ns}:topic:topic-a")
        alt = r.eval(key_schema.READ_PER_BROKER, 2, "{ns}:brokers", "{ns}:q:", "topic-a")
        # pairs in hash order: a queue's JSON is over hash-max-listpack-value, so the hash is a
        # hashtable and its order differs from one server start to the next
        expected = {name: key_schema.QUEUE % name for name in ("broker-000", "broker-001")}
        assert len(now) == len(alt) == 4
        assert dict(zip(now[::2], now[1::2], strict=True)) == expected
        assert dict(zip(alt[::2], alt[1::2], strict=True)) == expected


def test_the_tool_prints_both_sides(capsys: pytest.CaptureFixture[str]) -> None:
    key_schema.main(["--topics", "1200", "--rounds", "1", "--reads", "5", "--broker-names", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "new broker, 1,200 topics, Redis time (median of 1):"
    assert lines[1].startswith("  hash per topic (now) ")
    assert lines[2].startswith("  hash per broker name ")
    assert lines[3] == "route read of a topic on 2 broker names, Redis time per read:"
    assert lines[4].startswith("     3 broker names: now ")
    assert len(lines) == 5
