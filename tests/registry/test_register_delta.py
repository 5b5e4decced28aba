"""R10 with body deltas: a bumped registration writes only the topics that changed since the
broker's previous body, and falls back to every topic when Redis no longer holds what that body
wrote. Each test checks the routes against what a full write gives."""

from __future__ import annotations

import orjson
from redis.asyncio import Redis

from namesrv.domain.model import DataVersion, RawBody, RegisterBrokerRequest, TopicConfig
from namesrv.registry.service import RegistryService
from namesrv.sim.bodies import register_body_json
from namesrv.store.changelog import upserts
from tests.registry.conftest import MakeService
from tests.registry.helpers import events, perms_of, route

CLUSTER, NAME, ADDR = "DefaultCluster", "broker-a", "127.0.0.1:10911"
SIZE = 400  # big enough for the decoder to remember the body


def configs(changed: dict[str, TopicConfig] | None = None) -> dict[str, TopicConfig]:
    table = {f"T{i:04d}": TopicConfig(f"T{i:04d}", 8, 8, 6) for i in range(SIZE)}
    table.update(changed or {})
    return table


def request(table: dict[str, TopicConfig], counter: int) -> RegisterBrokerRequest:
    data = register_body_json(table, DataVersion(counter=counter, stateVersion=0, timestamp=1700000000000))
    return RegisterBrokerRequest(
        clusterName=CLUSTER,
        brokerAddr=ADDR,
        brokerName=NAME,
        brokerId=0,
        haServerAddr=ADDR,
        wrapper=None,
        body=RawBody(data, 399, False),
    )


async def last_write(redis: Redis, namespace: str) -> tuple[list[str], list[str]]:
    """The queues the last registration upserted and removed, over all its chunks' entries (each
    registration of these tests has its own dataVersion; its chunks may land in any order)."""
    entries = await events(redis, namespace, "registerQueues")
    last = [e for e in entries if e["dataVersion"] == entries[-1]["dataVersion"]]
    upserted = [t for e in last for t, _ in upserts(e)]
    return upserted, [t for e in last for t in orjson.loads(e["removed"])]


async def test_a_bumped_body_writes_only_the_changed_topic(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(request(configs(), 1))
    await service.register_broker(request(configs(), 2))  # first bump: the earlier body is laid out
    await service.register_broker(request(configs({"T0123": TopicConfig("T0123", 4, 4, 6)}), 3))
    assert service.decoder.deltas == 2
    assert await last_write(redis, namespace) == (["T0123"], [])
    found = await route(service, "T0123")
    assert found is not None
    assert [(q["readQueueNums"], q["writeQueueNums"]) for q in found["queueDatas"]] == [(4, 4)]
    assert await service.store.data_version(CLUSTER, ADDR) == DataVersion(3, 0, 1700000000000).to_json()


async def test_a_delta_is_refused_after_a_perm_wipe_and_every_topic_is_written(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(request(configs(), 1))
    await service.register_broker(request(configs(), 2))
    assert await service.change_write_perm(NAME, wipe=True) == SIZE
    await service.register_broker(request(configs({"T0007": TopicConfig("T0007", 2, 2, 6)}), 3))
    # Java rewrites every queue of a bumped registration: the wipe is undone everywhere
    assert await perms_of(service, "T0300") == {NAME: 6}
    assert await perms_of(service, "T0007") == {NAME: 6}
    upserted, removed = await last_write(redis, namespace)
    assert (len(upserted), removed) == (SIZE, [])


async def test_a_delta_drops_topics_only_with_delete_topic_with_broker_registration(
    make_service: MakeService, redis: Redis, namespace: str
) -> None:
    service = make_service(deleteTopicWithBrokerRegistration=True)
    await service.register_broker(request(configs(), 1))
    await service.register_broker(request(configs(), 2))
    smaller = configs()
    del smaller["T0200"]
    await service.register_broker(request(smaller, 3))
    assert service.decoder.deltas == 2
    assert await last_write(redis, namespace) == ([], ["T0200"])
    assert await route(service, "T0200") is None
    assert await route(service, "T0201") is not None


async def test_an_interrupted_full_write_makes_the_next_delta_fall_back(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(request(configs(), 1))
    await service.register_broker(request(configs(), 2))
    # a registration whose chunks stopped half way: {ns}:bsync no longer vouches for Redis
    await redis.hdel(f"{{{namespace}}}:bsync", NAME)
    await service.register_broker(request(configs({"T0001": TopicConfig("T0001", 1, 1, 6)}), 3))
    upserted, _ = await last_write(redis, namespace)
    assert upserted == ["T0001"]  # every topic was sent; only the changed one differed
    assert (
        await redis.hget(f"{{{namespace}}}:bsync", NAME)
        == f"{CLUSTER}/{ADDR}|-|" + request(configs({"T0001": TopicConfig("T0001", 1, 1, 6)}), 3).body.hash
    )  # type: ignore[union-attr]
