"""How the fault suite tells a stale answer from one Redis held between two truth samples."""

from __future__ import annotations

from typing import cast

import orjson

from tests.faults.harness import ABSENT, Sample, Truth, TruthSample, Worker, digest, is_stale

TOPIC = "FaultTopic-0"


def route(*brokers: tuple[str, int]) -> str:
    """The digest of a route with these (broker name, queue count) parts."""
    body = {
        "brokerDatas": [
            {"brokerName": name, "cluster": "c", "brokerAddrs": {"0": f"127.0.0.1:{10900 + ord(name)}"}}
            for name, _ in brokers
        ],
        "queueDatas": [
            {"brokerName": name, "perm": 6, "readQueueNums": n, "writeQueueNums": n, "topicSysFlag": 0}
            for name, n in brokers
        ],
        "filterServerTable": {},
    }
    d = digest(0, orjson.dumps(body))
    assert d is not None
    return d


def truth(*states: tuple[float, str]) -> Truth:
    t = Truth(cast(Worker, None))
    t.samples = [TruthSample(at, at + 0.002, {TOPIC: d}) for at, d in states]
    return t


def answer(at: float, d: str) -> Sample:
    return Sample("w0", TOPIC, at, 0.002, 0, d)


# Three brokers come back within 10 ms of one another after Redis restarted empty; the truth read
# the table before and after, never in between.
BACK = truth((2.90, ABSENT), (2.95, ABSENT), (3.95, route(("a", 8), ("b", 8), ("c", 8))))


def test_an_answer_with_some_brokers_back_is_one_redis_held() -> None:
    assert is_stale(answer(3.93, route(("a", 8), ("c", 8))), BACK) is False
    assert is_stale(answer(3.93, route(("b", 8))), BACK) is False


def test_an_answer_with_a_part_neither_sample_shows_is_stale() -> None:
    assert is_stale(answer(3.93, route(("a", 8), ("c", 4))), BACK) is True


def test_an_old_route_served_after_the_change_is_stale() -> None:
    old, new = route(("a", 8), ("b", 4)), route(("a", 8), ("b", 8))
    changed = truth((1.0, old), (1.05, old), (1.10, new), (1.15, new), (1.20, new), (1.25, new), (1.30, new))
    assert is_stale(answer(1.12, old), changed) is False  # within the bound of the change
    assert is_stale(answer(1.26, old), changed) is True
    assert is_stale(answer(1.26, route(("a", 8))), changed) is True  # b's part was never absent
