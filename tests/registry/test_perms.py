"""WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327): spec §3.9."""

from __future__ import annotations

import orjson
import pytest
from redis.asyncio import Redis

from namesrv.registry.service import RegistryService
from tests.builders import register
from tests.registry.helpers import (
    CLUSTER,
    MASTER,
    B,
    events,
    perms_of,
    qd,
    route,
)

# perm before -> after WIPE (clear PERM_WRITE=2) and after ADD (set to READ|WRITE = 6)
PERMS = [
    (0, 0, 6),
    (2, 0, 6),
    (3, 1, 6),
    (4, 4, 6),
    (5, 5, 6),
    (6, 4, 6),
    (7, 5, 6),
    (14, 12, 6),
    (15, 13, 6),
]


@pytest.mark.parametrize(("before", "wiped", "added"), PERMS, ids=[f"perm{p[0]}" for p in PERMS])
async def test_wipe_and_add_write_perm_bits(
    service: RegistryService, before: int, wiped: int, added: int
) -> None:
    await service.register_broker(register(topics={"T": (8, 8, before, 0), "Other": (8, 8, 6, 0)}))
    assert await service.change_write_perm("broker-a", wipe=True) == 2
    assert await perms_of(service, "T") == {"broker-a": wiped}
    assert await service.change_write_perm("broker-a", wipe=False) == 2
    assert await perms_of(service, "T") == {"broker-a": added}


async def test_wipe_then_add_drops_the_inherit_bit(service: RegistryService) -> None:
    """Verified vector: 7 -> wipe -> 5 -> add -> 6."""
    await service.register_broker(register(topics={"TBW102": (8, 8, 7, 0), "TopicTest": (8, 8, 6, 0)}))
    await service.change_write_perm("broker-a", wipe=True)
    assert await perms_of(service, "TBW102") == {"broker-a": 5}
    await service.change_write_perm("broker-a", wipe=False)
    assert await perms_of(service, "TBW102") == {"broker-a": 6}


async def test_count_is_topics_holding_a_queue_of_the_broker_changed_or_not(service: RegistryService) -> None:
    await service.register_broker(register(topics={"A": (8, 8, 4, 0), "B": (8, 8, 6, 0), "C": (8, 8, 4, 0)}))
    await service.register_broker(register(CLUSTER, "broker-b", B, topics=["B", "D", "E"]))
    assert await service.change_write_perm("broker-a", wipe=True) == 3  # A and C were already 4
    assert await service.change_write_perm("broker-a", wipe=True) == 3
    assert await service.change_write_perm("broker-b", wipe=False) == 3
    assert [await perms_of(service, t) for t in "ABCDE"] == [
        {"broker-a": 4},
        {"broker-a": 4, "broker-b": 6},
        {"broker-a": 4},
        {"broker-b": 6},
        {"broker-b": 6},
    ]


@pytest.mark.parametrize("wipe", [True, False])
async def test_unknown_broker_counts_zero(service: RegistryService, wipe: bool) -> None:
    await service.register_broker(register())
    assert await service.change_write_perm("nope", wipe=wipe) == 0
    assert await perms_of(service, "TopicTest") == {"broker-a": 6}


async def test_wipe_only_touches_the_named_broker(service: RegistryService) -> None:
    await service.register_broker(register(topics=["TopicTest", "X"]))
    await service.register_broker(register(CLUSTER, "broker-b", B, topics=["TopicTest", "Y"]))
    assert await service.change_write_perm("broker-a", wipe=True) == 2
    assert (await route(service, "TopicTest") or {})["queueDatas"] == [qd("broker-a", 4), qd("broker-b", 6)]


async def test_wipe_and_add_change_log(service: RegistryService, redis: Redis, namespace: str) -> None:
    await service.register_broker(register(topics={"A": (8, 8, 6, 0), "B": (8, 8, 4, 0)}))
    await service.change_write_perm("broker-a", wipe=True)
    await service.change_write_perm("broker-a", wipe=False)
    wipe, add = await events(redis, namespace, "wipePerm"), await events(redis, namespace, "addPerm")
    assert [(e["brokerName"], e["count"], orjson.loads(e["upserted"])) for e in wipe] == [
        ("broker-a", "2", [["A", qd("broker-a", 4)]])
    ]
    assert [(e["brokerName"], e["count"], sorted(orjson.loads(e["upserted"]))) for e in add] == [
        ("broker-a", "2", [["A", qd("broker-a", 6)], ["B", qd("broker-a", 6)]])
    ]


async def test_registration_with_a_new_version_restores_the_brokers_perm(service: RegistryService) -> None:
    """§3.3 consequences: WIPE persists across periodic registrations (unchanged DataVersion) and
    is undone when the broker's DataVersion changes."""
    await service.register_broker(register(addr=MASTER))
    await service.change_write_perm("broker-a", wipe=True)
    await service.register_broker(register(addr=MASTER))
    assert await perms_of(service, "TopicTest") == {"broker-a": 4}
    await service.register_broker(register(addr=MASTER, counter=2))
    assert await perms_of(service, "TopicTest") == {"broker-a": 6}


async def test_set_write_perm_refuses_an_unknown_mode_and_changes_nothing(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """One script serves 205 and 327; a mode other than wipe/add is a caller bug: status -5."""
    await service.register_broker(register(topics={"T": (8, 8, 6, 0), "Other": (8, 8, 6, 0)}))
    k = service.store.k
    before = await redis.xlen(k.events)
    reply = await service.store.scripts.call(
        "setWritePerm", [k.routever, k.events, k.bdigest, k.topic("T")], ["broker-a", 100, "x", 1, "T"]
    )
    assert reply == [-5]
    assert await perms_of(service, "T") == {"broker-a": 6}
    assert await redis.xlen(k.events) == before
