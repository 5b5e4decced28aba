"""Mass registration: topic writes wait their turn in the worker (registerWriteConcurrency), so
Redis never queues more than a few chunk calls from one worker, and every registration still
lands whole."""

from __future__ import annotations

import asyncio

from namesrv.domain.model import DataVersion, RawBody, RegisterBrokerRequest, TopicConfig
from namesrv.registry.registration import MAX_CHUNKS_IN_FLIGHT, chunks_in_flight
from namesrv.sim.bodies import register_body_json
from tests.registry.conftest import MakeService
from tests.registry.helpers import route

BROKERS, TOPICS, CHUNK = 6, 600, 50  # 12 chunks and a final call per broker


def request(no: int) -> RegisterBrokerRequest:
    table = {f"T{i:04d}": TopicConfig(f"T{i:04d}", 4, 4, 6) for i in range(TOPICS)}
    data = register_body_json(table, DataVersion(counter=1, stateVersion=0, timestamp=1700000000000))
    addr = f"10.0.0.{no}:10911"
    return RegisterBrokerRequest(
        clusterName="DefaultCluster",
        brokerAddr=addr,
        brokerName=f"broker-{no}",
        brokerId=0,
        haServerAddr=addr,
        wrapper=None,
        body=RawBody(data, 399, False),
    )


async def test_new_brokers_at_once_write_one_at_a_time_and_all_land(make_service: MakeService) -> None:
    service = make_service(registerWriteConcurrency=1, registerChunkTopics=CHUNK)
    results = await asyncio.gather(*(service.register_broker(request(no)) for no in range(BROKERS)))
    assert all(result is not None for result, _ in results)
    # without the gate: every broker's window at once (6 x 8); with it, one registration's window
    # at most, and more than one chunk at a time in it. How close a registration comes to its
    # window depends on how fast Redis answers meanwhile: beside a CPU hog one reached 7 of 8.
    assert chunks_in_flight(CHUNK) == MAX_CHUNKS_IN_FLIGHT < TOPICS // CHUNK
    assert 1 < service.registrar.most_writes_in_flight <= MAX_CHUNKS_IN_FLIGHT
    assert service.registrar.writes_in_flight == 0
    for topic in ("T0000", "T0151", f"T{TOPICS - 1:04d}"):
        found = await route(service, topic)
        assert found is not None
        assert sorted(q["brokerName"] for q in found["queueDatas"]) == [
            f"broker-{no}" for no in range(BROKERS)
        ]


async def test_two_writers_at_once_send_at_most_two_windows(make_service: MakeService) -> None:
    service = make_service(registerWriteConcurrency=2, registerChunkTopics=CHUNK)
    await asyncio.gather(*(service.register_broker(request(no)) for no in range(BROKERS)))
    assert service.registrar.most_writes_in_flight <= 2 * MAX_CHUNKS_IN_FLIGHT
    found = await route(service, "T0007")
    assert found is not None and len(found["queueDatas"]) == BROKERS


def test_chunks_in_flight_keep_about_2000_topics_queued_within_2_to_8_calls() -> None:
    assert [chunks_in_flight(size) for size in (10, 250, 500, 1000, 5000, 100000)] == [8, 8, 4, 2, 2, 2]
