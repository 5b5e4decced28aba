"""REGISTER_BROKER: RouteInfoManager.registerBroker rules R1-R15 and their consequences (spec §3.3)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from namesrv.domain.errors import BadRequest
from namesrv.domain.model import (
    DataVersion,
    RegisterBrokerResult,
    TopicConfig,
    TopicConfigWrapper,
)
from namesrv.registry.service import RegistryService
from namesrv.store.changelog import upserts
from namesrv.store.keyspace import Keyspace
from namesrv.store.registration_args import RegisterTopicsArgs, TopicsStatus, TopicWrite
from tests.builders import register
from tests.registry import helpers
from tests.registry.conftest import MakeService
from tests.registry.helpers import (
    CLUSTER,
    MASTER,
    SLAVE,
    SLAVE2,
    B,
    addrs_of,
    bd,
    cluster,
    events,
    perms_of,
    qd,
    route,
    route_obj,
)

MAPPING = {**helpers.MAPPING, "dirty": False, "epoch": 1700000000000, "totalQueues": 8}


# ---- R1, R2: cluster membership; BrokerData.cluster fixed at creation ----
async def test_r1_cluster_set_collects_broker_names(service: RegistryService) -> None:
    await service.register_broker(register("C1", "broker-a", MASTER))
    await service.register_broker(register("C1", "broker-b", "127.0.0.2:10911"))
    await service.register_broker(register("C2", "broker-c", "127.0.0.3:10911"))
    info = await cluster(service)
    assert {c: sorted(names) for c, names in info["clusterAddrTable"].items()} == {
        "C1": ["broker-a", "broker-b"],
        "C2": ["broker-c"],
    }


async def test_r2_broker_data_keeps_its_first_cluster(service: RegistryService) -> None:
    await service.register_broker(register("C1", "broker-a", MASTER))
    result, _ = await service.register_broker(register("C2", "broker-a", SLAVE, 1))
    assert result is not None and result.accepted
    info = await cluster(service)
    # The name joins C2's set (R1) but BrokerData.cluster stays C1 (R2).
    assert info == {
        "brokerAddrTable": {"broker-a": bd("broker-a", {0: MASTER, 1: SLAVE}, "C1")},
        "clusterAddrTable": {"C1": ["broker-a"], "C2": ["broker-a"]},
    }


# ---- R3: enableActingMaster and zoneName overwritten on every registration ----
@pytest.mark.parametrize(
    ("acting", "expected"),
    [(None, False), (False, False), (True, True)],
    ids=["old-version-broker", "false", "true"],
)
async def test_r3_enable_acting_master_from_header(
    service: RegistryService, acting: bool | None, expected: bool
) -> None:
    await service.register_broker(register(acting=True))
    await service.register_broker(register(acting=acting))
    info = await cluster(service)
    assert info["brokerAddrTable"]["broker-a"] == bd("broker-a", {0: MASTER}, acting=expected)


async def test_r3_zone_name_overwritten_even_with_null(service: RegistryService) -> None:
    await service.register_broker(register(zone="zone-1"))
    assert (await cluster(service))["brokerAddrTable"]["broker-a"] == bd(
        "broker-a", {0: MASTER}, zone="zone-1"
    )
    await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 1, zone="zone-2"))
    assert (await cluster(service))["brokerAddrTable"]["broker-a"] == bd(
        "broker-a", {0: MASTER, 1: SLAVE}, zone="zone-2"
    )
    await service.register_broker(register())  # no __ZONE_NAME: the zone becomes null
    assert (await cluster(service))["brokerAddrTable"]["broker-a"] == bd("broker-a", {0: MASTER, 1: SLAVE})


# ---- R5: one address holds one id ----
async def test_r5_promoted_slave_drops_its_old_id(service: RegistryService) -> None:
    await service.register_broker(register(broker_id=0, addr=MASTER))
    await service.register_broker(register(broker_id=1, addr=SLAVE))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    assert await addrs_of(service, "TopicTest", "broker-a") == {"1": SLAVE}
    await service.register_broker(register(broker_id=0, addr=SLAVE, counter=2))
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": SLAVE}


async def test_r5_slave_taking_id_0_while_master_live_replaces_it(service: RegistryService) -> None:
    """RouteInfoManagerBrokerRegisterTest.testMasterChangeFromSlave: equal stateVersions, so R6 does
    not apply; the id-1 entry of the address goes (R5) and id 0 now points at it (R8)."""
    await service.register_broker(register(broker_id=0, addr=MASTER))
    await service.register_broker(register(broker_id=1, addr=SLAVE))
    await service.register_broker(register(broker_id=2, addr=SLAVE2))
    result, _ = await service.register_broker(register(broker_id=0, addr=SLAVE))
    assert result is not None and result.accepted
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": SLAVE, "2": SLAVE2}


async def test_r5_then_r7_leaves_a_broker_data_without_addresses(service: RegistryService) -> None:
    """R5 runs before R7: a lone slave re-registering as id 0 with a single topic loses its id-1
    entry and is then refused, leaving an empty BrokerData (as Java does); its queues stay."""
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    assert await service.register_broker(register(addr=SLAVE, broker_id=0, topics=["TopicTest"])) == (
        None,
        None,
    )
    assert await cluster(service) == {
        "brokerAddrTable": {"broker-a": bd("broker-a", {})},
        "clusterAddrTable": {CLUSTER: ["broker-a"]},
    }
    assert await route(service, "TopicTest") == route_obj([bd("broker-a", {})], [qd("broker-a")])
    result, _ = await service.register_broker(register(addr=SLAVE, broker_id=0))
    assert result is not None and result.accepted
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": SLAVE}


# ---- R6: conflicting address for the same id, older stateVersion ignored ----
@pytest.mark.parametrize(
    ("live_state", "new_state", "accepted"),
    [(5, 3, False), (5, 5, True), (5, 7, True)],
    ids=["older-ignored", "equal-wins", "newer-wins"],
)
async def test_r6_state_version_decides_a_conflicting_id(
    service: RegistryService, live_state: int, new_state: int, accepted: bool
) -> None:
    await service.register_broker(register(addr=MASTER, state_version=live_state))
    result, registration = await service.register_broker(
        register(addr="127.0.0.9:10911", state_version=new_state, counter=2)
    )
    assert result is not None
    assert result.accepted is accepted
    expected = "127.0.0.9:10911" if accepted else MASTER
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": expected}
    if not accepted:
        assert registration is None
        assert result == RegisterBrokerResult(accepted=False)  # empty: no ha/master address, no KV body
        # The refused address has no live entry (R6 removes it).
        changed, stored = await service.query_data_version(CLUSTER, "127.0.0.9:10911", DataVersion(2, 3, 0))
        assert (changed, stored) == (True, None)


async def test_r6_rules_r1_to_r5_already_took_effect(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER, state_version=5))
    await service.register_broker(register(addr=SLAVE, broker_id=1, state_version=5))
    # The slave claims id 0 with an older stateVersion, with a zone and acting master on.
    result, _ = await service.register_broker(
        register(CLUSTER, "broker-a", SLAVE, 0, state_version=3, zone="z", acting=True, counter=9)
    )
    assert result is not None and not result.accepted
    assert await cluster(service) == {
        # R5 dropped the slave's id 1; R3 set zone and acting.
        "brokerAddrTable": {"broker-a": bd("broker-a", {0: MASTER}, acting=True, zone="z")},
        "clusterAddrTable": {CLUSTER: ["broker-a"]},
    }
    ignored = (await events(redis, namespace, "register"))[-1]
    assert {k: ignored[k] for k in ("result", "cluster", "brokerAddr", "brokerId")} == {
        "result": "ignored",
        "cluster": CLUSTER,
        "brokerAddr": SLAVE,
        "brokerId": "0",
    }


async def test_r6_repeated_ignored_registration_is_logged_once(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    """The first ignored registration drops the slave's liveness and id 1 (logged: the pipeline
    ends the session there); repeating it changes nothing and adds no entry."""
    results: list[str] = []
    service.count_registration = results.append
    await service.register_broker(register(addr=MASTER, state_version=5))
    await service.register_broker(register(addr=SLAVE, broker_id=1, state_version=5))
    for _ in range(3):
        await service.register_broker(register(CLUSTER, "broker-a", SLAVE, 0, state_version=3))
    ignored = [e for e in await events(redis, namespace, "register") if e["result"] == "ignored"]
    assert [(e["brokerAddr"], e["routeChanged"]) for e in ignored] == [(SLAVE, "1")]
    assert results == ["ok", "ok", "ignored", "ignored", "ignored"]


async def test_r6_needs_the_old_address_live_in_the_request_cluster(service: RegistryService) -> None:
    """The conflicting address is looked up as (request cluster, old address): from another
    cluster there is no live entry to protect, so the registration wins."""
    await service.register_broker(register("C1", "broker-a", MASTER, state_version=5))
    result, _ = await service.register_broker(register("C2", "broker-a", SLAVE, 0, state_version=3))
    assert result is not None and result.accepted
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": SLAVE}


async def test_r6_ignored_registration_still_returns_the_order_config(service: RegistryService) -> None:
    await service.kv_put("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:8")
    await service.register_broker(register(addr=MASTER, state_version=5))
    result, _ = await service.register_broker(register(addr=SLAVE, state_version=1))
    assert result == RegisterBrokerResult(order_topic_config={"TopicTest": "broker-a:8"}, accepted=False)


# ---- R7: first registration of an id carrying exactly one topic is refused ----
async def test_r7_new_broker_with_one_topic_refused_without_trace(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    assert await service.register_broker(register(topics=["TopicTest"])) == (None, None)
    # Deliberate difference: no empty BrokerData, no cluster entry, no liveness.
    assert await cluster(service) == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert await service.all_topics() == []
    assert await service.query_data_version(CLUSTER, MASTER, DataVersion(1, 0, 1700000000000)) == (True, None)
    # A refusal that changed nothing adds no change-log entry; the worker counts it instead.
    assert await events(redis, namespace) == []


async def test_r7_refusals_are_counted_not_logged(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    results: list[str] = []
    service.count_registration = results.append
    await service.register_broker(register(addr=MASTER))
    before = await events(redis, namespace)
    for _ in range(50):  # a client repeating a refused registration cannot push history out
        await service.register_broker(register(addr=SLAVE, broker_id=1, topics=["TopicTest"]))
    assert await events(redis, namespace) == before
    assert results == ["ok"] + ["refused"] * 50


async def test_r7_refusal_that_changes_the_broker_data_is_logged(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register("C2", "broker-a", SLAVE, 1, topics=["T"]))
    await service.register_broker(register("C2", "broker-a", SLAVE, 1, topics=["T"]))  # changes nothing
    refused = [e for e in await events(redis, namespace, "register") if e["result"] == "refused"]
    assert [(e["cluster"], e["brokerAddr"], e["routeChanged"]) for e in refused] == [("C2", SLAVE, "0")]


async def test_r7_refusal_is_logged(service: RegistryService, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="namesrv.registry.registration"):
        assert await service.register_broker(register(topics=["TopicTest"])) == (None, None)
    assert [r.getMessage() for r in caplog.records if r.name == "namesrv.registry.registration"] == [
        f"register of {CLUSTER}/{MASTER} (broker-a id 0) refused as Java does (R7): the first registration "
        "of an id must not carry exactly one topic"
    ]


async def test_r7_single_topic_accepted_once_the_id_is_registered(service: RegistryService) -> None:
    """Appendix A: the slave's one-topic registration is refused, a two-topic one accepted, then
    the one-topic one accepted."""
    await service.register_broker(register(addr=MASTER))
    assert await service.register_broker(register(addr=SLAVE, broker_id=1, topics=["TopicTest"])) == (
        None,
        None,
    )
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": MASTER}
    result, _ = await service.register_broker(
        register(addr=SLAVE, broker_id=1, topics=["TopicTest", "Other"])
    )
    assert result is not None and result.accepted
    result, _ = await service.register_broker(register(addr=SLAVE, broker_id=1, topics=["TopicTest"]))
    assert result is not None and result.accepted
    assert await addrs_of(service, "TopicTest", "broker-a") == {"0": MASTER, "1": SLAVE}


async def test_r7_refusal_of_a_known_name_keeps_r1_to_r3(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER))
    refused = await service.register_broker(register("C2", "broker-a", SLAVE, 1, topics=["T"], zone="z"))
    assert refused == (None, None)
    assert await cluster(service) == {
        "brokerAddrTable": {"broker-a": bd("broker-a", {0: MASTER}, zone="z")},
        "clusterAddrTable": {"C2": ["broker-a"], CLUSTER: ["broker-a"]},
    }


@pytest.mark.parametrize("count", [0, 2, 3])
async def test_r7_only_exactly_one_topic_is_refused(service: RegistryService, count: int) -> None:
    topics = [f"T{i}" for i in range(count)]
    result, registration = await service.register_broker(register(topics=topics))
    assert result is not None and result.accepted and registration is not None
    assert (await cluster(service))["brokerAddrTable"] == {"broker-a": bd("broker-a", {0: MASTER})}
    assert await service.all_topics() == topics


# ---- R9: who writes topics ----
async def test_r9_old_version_slave_never_writes_topics(service: RegistryService) -> None:
    result, _ = await service.register_broker(register(addr=SLAVE, broker_id=1, acting=None))
    assert result is not None and result.accepted
    assert (await cluster(service))["brokerAddrTable"] == {"broker-a": bd("broker-a", {1: SLAVE})}
    assert await route(service, "TopicTest") is None
    assert await service.all_topics() == []


async def test_r9_prime_slave_writes_topics_even_without_acting_master(service: RegistryService) -> None:
    """RequestProcessorTest: a lone id-1234 broker with enableActingMaster=false creates routes."""
    await service.register_broker(register(addr=SLAVE, broker_id=1234, acting=False))
    assert await route(service, "TopicTest") == route_obj([bd("broker-a", {1234: SLAVE})], [qd("broker-a")])


async def test_r9_prime_slave_with_acting_master_clears_the_write_bit(service: RegistryService) -> None:
    await service.register_broker(
        register(
            addr=SLAVE,
            broker_id=1,
            acting=True,
            topics={"A": (8, 8, 6, 0), "B": (4, 4, 7, 1), "C": (2, 2, 4, 0)},
        )
    )
    assert [await perms_of(service, t) for t in ("A", "B", "C")] == [
        {"broker-a": 4},
        {"broker-a": 5},
        {"broker-a": 4},
    ]


async def test_r9_slave_behind_a_master_does_not_write_topics(service: RegistryService) -> None:
    await service.register_broker(
        register(addr=MASTER, topics={"TopicTest": (8, 8, 6, 0), "X": (1, 1, 6, 0)})
    )
    await service.register_broker(
        register(addr=SLAVE, broker_id=1, topics={"TopicTest": (2, 2, 4, 0), "SlaveOnlyTopic": (1, 1, 6, 0)})
    )
    assert await route(service, "SlaveOnlyTopic") is None
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER, 1: SLAVE})], [qd("broker-a", 6, 8, 8)]
    )


async def test_r9_lowest_slave_is_prime_only_without_a_master(service: RegistryService) -> None:
    await service.register_broker(register(addr=SLAVE, broker_id=1, topics=["A", "B"]))
    await service.register_broker(register(addr=SLAVE2, broker_id=2, topics=["A", "C"]))
    assert await route(service, "C") is None  # id 2 is not the lowest id
    assert await service.all_topics() == ["A", "B"]


# ---- R10a: deleteTopicWithBrokerRegistration ----
@pytest.mark.parametrize("flag", [False, True])
async def test_r10a_topics_missing_from_a_full_registration(make_service: MakeService, flag: bool) -> None:
    service = make_service(deleteTopicWithBrokerRegistration=flag)
    await service.register_broker(register(topics=["TestTopic", "TestTopic1"]))
    await service.register_broker(
        register("DefaultCluster", "broker-b", "127.0.0.2:10911", topics=["TestTopic", "X"])
    )
    await service.register_broker(register(topics=["TestTopic1", "Other"]))  # same dataVersion
    expected = {"broker-b": 6} if flag else {"broker-a": 6, "broker-b": 6}
    assert await perms_of(service, "TestTopic") == expected


async def test_r10a_last_queue_removed_removes_the_topic(make_service: MakeService) -> None:
    service = make_service(deleteTopicWithBrokerRegistration=True)
    await service.register_broker(register(topics=["TestTopic", "TestTopic1"]))
    await service.register_broker(register(topics=["TestTopic1", "Other"], counter=2))
    assert await route(service, "TestTopic") is None
    assert await service.all_topics() == ["Other", "TestTopic1"]


async def test_r10a_not_applied_when_the_body_has_static_topic_mappings(make_service: MakeService) -> None:
    service = make_service(deleteTopicWithBrokerRegistration=True)
    await service.register_broker(register(topics=["TestTopic", "TestTopic1"]))
    await service.register_broker(
        register(topics=["TestTopic1", "Other"], counter=2, mappings={"TestTopic": MAPPING})
    )
    assert await perms_of(service, "TestTopic") == {"broker-a": 6}


async def test_r10a_non_writing_slave_removes_nothing(make_service: MakeService) -> None:
    service = make_service(deleteTopicWithBrokerRegistration=True)
    await service.register_broker(register(addr=MASTER, topics=["TestTopic", "TestTopic1"]))
    await service.register_broker(register(addr=SLAVE, broker_id=1, topics=["Only", "Slave"]))
    assert await service.all_topics() == ["TestTopic", "TestTopic1"]


# ---- R10b: createAndUpdateQueueData and the change checks ----
async def test_r10b_unchanged_data_version_keeps_queue_data(service: RegistryService) -> None:
    await service.register_broker(register(topics={"TopicTest": (8, 8, 6, 0), "T2": (1, 1, 6, 0)}))
    await service.register_broker(register(topics={"TopicTest": (4, 4, 2, 1), "T2": (1, 1, 6, 0)}))
    assert (await route(service, "TopicTest") or {})["queueDatas"] == [qd("broker-a", 6, 8, 8, 0)]


async def test_r10b_changed_data_version_rewrites_every_queue(service: RegistryService) -> None:
    await service.register_broker(register(topics={"TopicTest": (8, 8, 6, 0), "T2": (1, 1, 6, 0)}))
    await service.register_broker(register(topics={"TopicTest": (4, 2, 2, 1), "T2": (3, 3, 7, 2)}, counter=2))
    assert (await route(service, "TopicTest") or {})["queueDatas"] == [qd("broker-a", 2, 4, 2, 1)]
    assert (await route(service, "T2") or {})["queueDatas"] == [qd("broker-a", 7, 3, 3, 2)]


@pytest.mark.parametrize(
    "change",
    [{"counter": 2}, {"timestamp": 1700000000001}, {"state_version": 1}],
    ids=["counter", "timestamp", "stateVersion"],
)
async def test_r10b_any_data_version_field_counts_as_a_change(
    service: RegistryService, change: dict[str, int]
) -> None:
    await service.register_broker(register(topics={"TopicTest": (8, 8, 6, 0), "T2": (1, 1, 6, 0)}))
    await service.register_broker(register(topics={"TopicTest": (4, 4, 6, 0), "T2": (1, 1, 6, 0)}, **change))
    assert (await route(service, "TopicTest") or {})["queueDatas"] == [qd("broker-a", 6, 4, 4)]


async def test_r10b_unchanged_data_version_still_adds_a_new_topic(service: RegistryService) -> None:
    """isTopicConfigChanged: a topic the broker has no queue in is written even if the version is
    the same (T1[topic] missing)."""
    await service.register_broker(register(topics=["TopicTest", "T2"]))
    await service.register_broker(
        register(topics={"TopicTest": (1, 1, 2, 0), "T2": (8, 8, 6, 0), "T3": (2, 2, 6, 0)})
    )
    assert (await route(service, "T3") or {})["queueDatas"] == [qd("broker-a", 6, 2, 2)]
    assert (await route(service, "TopicTest") or {})["queueDatas"] == [qd("broker-a", 6, 8, 8)]


async def test_r10b_queue_is_keyed_by_topic_name_not_by_table_key(service: RegistryService) -> None:
    req = register()
    table = {"alias": TopicConfig("Real", 8, 8, 6), "other": TopicConfig("Other", 1, 1, 6)}
    req = dataclasses.replace(req, wrapper=TopicConfigWrapper(table, req.wrapper.dataVersion))
    await service.register_broker(req)
    assert await service.all_topics() == ["Other", "Real"]


async def test_r10b_queue_data_carries_perm_and_sys_flag_from_the_broker(service: RegistryService) -> None:
    await service.register_broker(register(topics={"U": (3, 5, 7, 3), "P": (1, 2, 0, 0)}))
    assert (await route(service, "U") or {})["queueDatas"] == [qd("broker-a", 7, 3, 5, 3)]
    assert (await route(service, "P") or {})["queueDatas"] == [qd("broker-a", 0, 1, 2, 0)]


async def test_consequence_admin_wipe_survives_unchanged_re_registration(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    assert await service.change_write_perm("broker-a", wipe=True) == 2
    await service.register_broker(register(addr=MASTER))  # periodic, same DataVersion
    assert await perms_of(service, "TopicTest") == {"broker-a": 4}
    await service.register_broker(register(addr=MASTER, counter=2))  # topic config changed
    assert await perms_of(service, "TopicTest") == {"broker-a": 6}


async def test_consequence_register_first_rewrites_after_an_empty_id_slot(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register(addr=SLAVE, broker_id=1))
    await service.change_write_perm("broker-a", wipe=True)
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    await service.register_broker(register(addr=MASTER))  # same DataVersion, but id 0 was empty
    assert await perms_of(service, "TopicTest") == {"broker-a": 6}


# ---- R10c: static-topic mappings (T6) ----
async def test_r10c_mapping_is_stored_and_returned(service: RegistryService) -> None:
    await service.register_broker(register(mappings={"TopicTest": MAPPING}))
    assert await route(service, "TopicTest") == route_obj(
        [bd("broker-a", {0: MASTER})], [qd("broker-a")], mapping={"broker-a": MAPPING}
    )


async def test_r10c_mapping_is_keyed_by_its_bname(service: RegistryService) -> None:
    """T6[topic][info.bname] = info: the key is the mapping's own bname."""
    other = {**MAPPING, "bname": "broker-x"}
    await service.register_broker(register(mappings={"TopicTest": other}))
    assert (await route(service, "TopicTest") or {})["topicQueueMappingByBroker"] == {"broker-x": other}


async def test_r10c_mapping_only_rewritten_when_the_version_changes(service: RegistryService) -> None:
    await service.register_broker(register(mappings={"TopicTest": MAPPING}))
    newer = {**MAPPING, "epoch": 1800000000000}
    await service.register_broker(register(mappings={"TopicTest": newer}))
    assert (await route(service, "TopicTest") or {})["topicQueueMappingByBroker"] == {"broker-a": MAPPING}
    await service.register_broker(register(mappings={"TopicTest": newer}, counter=2))
    assert (await route(service, "TopicTest") or {})["topicQueueMappingByBroker"] == {"broker-a": newer}


# ---- R11: liveness ----
@pytest.mark.parametrize(("sent", "stored"), [(None, 120000), (10000, 10000)])
async def test_r11_liveness_timeout_defaults_to_120s(
    service: RegistryService, redis: Redis, namespace: str, sent: int | None, stored: int
) -> None:
    await service.register_broker(register(timeout=sent))
    k = Keyspace(namespace)
    member = f"{CLUSTER}/{MASTER}"
    info = await redis.hget(k.live, member)
    assert info is not None
    live = orjson.loads(info)
    assert live["heartbeatTimeoutMillis"] == stored
    assert live["haServerAddr"] == "127.0.0.1:10912"
    deadline = await redis.zscore(k.deadlines, member)
    assert deadline == live["registeredAt"] + stored


async def test_r11_timeout_below_the_minimum_is_rejected(service: RegistryService) -> None:
    with pytest.raises(BadRequest):
        await service.register_broker(register(timeout=999))


async def test_r11_data_version_of_the_registration_is_stored(service: RegistryService) -> None:
    await service.register_broker(register(counter=7, timestamp=123, state_version=2))
    assert await service.query_data_version(CLUSTER, MASTER, DataVersion(7, 2, 123)) == (
        False,
        DataVersion(7, 2, 123),
    )


async def test_r11_each_registration_gets_a_new_epoch(service: RegistryService) -> None:
    _, first = await service.register_broker(register())
    _, second = await service.register_broker(register())
    assert first is not None and second is not None
    assert second.epoch > first.epoch
    assert (second.cluster, second.addr, second.broker_name, second.broker_id) == (
        CLUSTER,
        MASTER,
        "broker-a",
        0,
    )


# ---- R12: filter servers ----
async def test_r12_filter_server_list(service: RegistryService) -> None:
    await service.register_broker(register(filters=("127.0.0.1:30000", "127.0.0.1:30001")))
    assert (await route(service, "TopicTest") or {})["filterServerTable"] == {
        MASTER: ["127.0.0.1:30000", "127.0.0.1:30001"]
    }
    await service.register_broker(register(filters=None))  # not sent: unchanged
    assert (await route(service, "TopicTest") or {})["filterServerTable"] == {
        MASTER: ["127.0.0.1:30000", "127.0.0.1:30001"]
    }
    await service.register_broker(register(filters=()))  # empty: removed
    assert (await route(service, "TopicTest") or {})["filterServerTable"] == {}


# ---- R13: the master address for slaves ----
async def test_r13_slave_learns_live_master_and_its_ha_address(service: RegistryService) -> None:
    master, _ = await service.register_broker(register(addr=MASTER, ha="127.0.0.1:20911"))
    assert master == RegisterBrokerResult()
    slave, _ = await service.register_broker(register(addr=SLAVE, broker_id=1, ha="127.0.0.1:40911"))
    assert slave == RegisterBrokerResult(haServerAddr="127.0.0.1:20911", masterAddr=MASTER)


async def test_r13_no_master_address_without_a_master(service: RegistryService) -> None:
    slave, _ = await service.register_broker(register(addr=SLAVE, broker_id=1))
    assert slave == RegisterBrokerResult()


async def test_r13_master_must_be_live_in_the_slaves_cluster(service: RegistryService) -> None:
    """The master's live entry is looked up as (request cluster, master address)."""
    await service.register_broker(register("C1", "broker-a", MASTER))
    slave, _ = await service.register_broker(register("C2", "broker-a", SLAVE, 1))
    assert slave == RegisterBrokerResult()


# ---- change log of a registration ----
async def test_register_change_log_entry(service: RegistryService, redis: Redis, namespace: str) -> None:
    _, reg = await service.register_broker(register(timeout=10000, zone="z1"))
    assert reg is not None
    entries = await events(redis, namespace, "register")
    assert len(entries) == 1
    e = entries[0]
    assert int(e["deadline"]) - int(e["ts"]) == 10000
    assert orjson.loads(e["brokerData"]) == bd("broker-a", {0: MASTER}, zone="z1")
    assert {k: v for k, v in e.items() if k not in ("ts", "deadline", "brokerData")} == {
        "kind": "register",
        "result": "ok",
        "cluster": CLUSTER,
        "brokerName": "broker-a",
        "brokerAddr": MASTER,
        "brokerId": "0",
        "epoch": str(reg.epoch),
        "timeoutMillis": "10000",
        "dataVersion": '{"counter":1,"stateVersion":0,"timestamp":1700000000000}',
        "newSession": "1",
        "mode": "1",
        "routeChanged": "1",
        "haServerAddr": "127.0.0.1:10912",
        "via": "test",
        "replay": "0",
    }
    queues = await events(redis, namespace, "registerQueues")
    assert [(q["final"], q["removed"]) for q in queues] == [("1", "[]")]
    assert sorted(map(list, upserts(queues[0]))) == [
        ["TBW102", qd("broker-a")],
        ["TopicTest", qd("broker-a")],
    ]


# ---- R10 in bounded chunks (registerChunkTopics): the rules hold whatever the chunking ----
TOPICS_25 = [f"T{i:02d}" for i in range(25)]


async def test_r10_chunked_registration_writes_every_topic(make_service: MakeService) -> None:
    service = make_service(registerChunkTopics=10)
    await service.register_broker(register(topics=TOPICS_25))
    assert await service.all_topics() == TOPICS_25
    await service.register_broker(register(topics={t: (4, 4, 6, 0) for t in TOPICS_25}, counter=2))
    assert {t: (await route(service, t) or {})["queueDatas"] for t in TOPICS_25} == {
        t: [qd("broker-a", 6, 4, 4)] for t in TOPICS_25
    }


async def test_r10_new_broker_name_joins_existing_topics_in_chunks(
    make_service: MakeService, redis: Redis, namespace: str
) -> None:
    """A broker name with no topic yet writes its chunks without reading each queue first: the
    change log must still tell new queues from rewritten ones, and the topic flag stays that of
    the lowest broker name's queue."""
    service = make_service(registerChunkTopics=10)
    await service.register_broker(
        register(CLUSTER, "broker-b", B, topics={t: (8, 8, 6, 1) for t in TOPICS_25})
    )
    joined = {t: (4, 4, 6, 0) for t in [*TOPICS_25[:15], "N0", "N1"]}
    await service.register_broker(register(CLUSTER, "broker-a", MASTER, topics=joined))
    assert await service.all_topics() == sorted([*TOPICS_25, "N0", "N1"])
    assert (await route(service, "T00") or {})["queueDatas"] == [
        qd("broker-a", 6, 4, 4),
        qd("broker-b", 6, 8, 8, flag=1),
    ]
    assert await service.unit_topics("unit") == TOPICS_25[15:]  # broker-a's flag 0 now decides
    queues = [e for e in await events(redis, namespace, "registerQueues") if e["brokerName"] == "broker-a"]
    # two chunks of topics, then the commit: a final call of its own, with no topic
    assert [e["final"] for e in queues] == ["0", "0", "1"]
    assert orjson.loads(queues[-1]["upserted"]) == []
    upserted = [t for e in queues for t, _ in upserts(e)]
    assert sorted(upserted) == sorted(joined)
    # the same registration again, as a new session of the name: nothing new to write
    await service.register_broker(register(CLUSTER, "broker-a", MASTER, topics=joined, counter=2))
    again = [e for e in await events(redis, namespace, "registerQueues") if e["brokerName"] == "broker-a"]
    assert [orjson.loads(e["upserted"]) for e in again[len(queues) :]] == [[]]  # the final chunk's


async def test_r10_chunks_log_names_that_need_escaping_and_carry_flags(
    make_service: MakeService, redis: Redis, namespace: str
) -> None:
    """A chunk says whether its names are plain JSON and which queues have a topicSysFlag: the
    change log stays valid JSON either way, and the flags reach the topic lists."""
    service = make_service(registerChunkTopics=2)
    topics = {"plain": (8, 8, 6, 0), "a/b": (8, 8, 6, 1), 'q"uote': (8, 8, 6, 0), "日本": (8, 8, 6, 3)}
    await service.register_broker(register(topics=topics))
    queues = await events(redis, namespace, "registerQueues")
    assert sorted(t for e in queues for t, _ in upserts(e)) == sorted(topics)
    assert await service.unit_topics("unit") == ["a/b", "日本"]
    assert await service.unit_topics("unitSub") == ["日本"]


async def test_r10_chunked_prime_slave_wipe_and_prune(make_service: MakeService) -> None:
    service = make_service(registerChunkTopics=10, deleteTopicWithBrokerRegistration=True)
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True, topics=TOPICS_25))
    assert {t: await perms_of(service, t) for t in TOPICS_25} == {t: {"broker-a": 4} for t in TOPICS_25}
    kept = TOPICS_25[5:20]
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True, topics=kept))  # same version
    assert await service.all_topics() == kept


async def test_r10_change_log_lists_each_queue_as_written(
    make_service: MakeService, redis: Redis, namespace: str
) -> None:
    """The change log's upserted queues are the ones written, exactly as stored: every one of a
    new broker's (the worker sends that text along), the write-wiped ones of a prime slave (not
    what the worker sent), and of a rewrite only those that differed (not all it sent)."""
    service = make_service(registerChunkTopics=10)

    async def logged(name: str) -> list[list[Any]]:
        queues = await events(redis, namespace, "registerQueues")
        # chunks reach Redis in any order, the final one last
        return [list(pair) for e in queues if e["brokerName"] == name for pair in upserts(e)]

    await service.register_broker(register(CLUSTER, "broker-b", B, topics=TOPICS_25))
    assert sorted(await logged("broker-b")) == [[t, qd("broker-b")] for t in TOPICS_25]
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True, topics=TOPICS_25))
    assert sorted(await logged("broker-a")) == [[t, qd("broker-a", 4)] for t in TOPICS_25]
    before = len(await logged("broker-b"))
    changed = {t: (8, 8, 6, 0) for t in TOPICS_25} | {"T03": (4, 4, 6, 0), "T17": (2, 2, 6, 0)}
    await service.register_broker(register(CLUSTER, "broker-b", B, topics=changed, counter=2))
    assert sorted((await logged("broker-b"))[before:]) == [
        ["T03", qd("broker-b", 6, 4, 4)],
        ["T17", qd("broker-b", 6, 2, 2)],
    ]


async def test_r10_chunked_perm_and_cleanup(make_service: MakeService) -> None:
    service = make_service(registerChunkTopics=10)
    await service.register_broker(register(addr=MASTER, acting=True, topics=TOPICS_25))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True, topics=TOPICS_25))
    assert await service.change_write_perm("broker-a", wipe=True) == 25
    assert await service.change_write_perm("broker-a", wipe=False) == 25
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)  # U5 over 3 chunks
    assert {t: await perms_of(service, t) for t in TOPICS_25} == {t: {"broker-a": 4} for t in TOPICS_25}
    await service.unregister_broker(CLUSTER, SLAVE, "broker-a", 1)  # U4 over 3 chunks
    assert await service.all_topics() == []


async def test_r11_slave_data_version_is_stored_without_topic_writes(service: RegistryService) -> None:
    await service.register_broker(register(addr=MASTER))
    await service.register_broker(register(addr=SLAVE, broker_id=1, counter=4, timestamp=9))
    assert await service.query_data_version(CLUSTER, SLAVE, DataVersion(4, 0, 9)) == (
        False,
        DataVersion(4, 0, 9),
    )


async def test_r10_stale_topic_chunks_are_fenced(service: RegistryService) -> None:
    """A chunk of a superseded registration (its token no longer pending) writes nothing."""
    await service.register_broker(register())
    chunk = RegisterTopicsArgs(
        CLUSTER,
        MASTER,
        "broker-a",
        "stale",
        final=True,
        chunk_no=0,
        writes=[TopicWrite("Evil", orjson.dumps(qd("broker-a")).decode())],
        removals=["TopicTest"],
    )
    assert await service.store.register_topics(chunk) == (TopicsStatus.FENCED, 0, 0)
    assert await service.all_topics() == ["TBW102", "TopicTest"]


# ---- replays of a heal (#27) ----
async def test_a_replay_is_skipped_for_a_broker_registered_after_the_copy_was_made(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    began = await service.store.server_time_ms()
    await asyncio.sleep(0.01)
    own, _ = await service.register_broker(register(topics=["Fresh1", "Fresh2"], counter=2))
    assert own is not None
    replay = dataclasses.replace(register(topics=["Old1", "Old2"], counter=1), replay_of=began)
    result, registration = await service.register_broker(replay)
    assert (result, registration) == (RegisterBrokerResult(accepted=False), None)
    assert await redis.smembers(Keyspace(namespace).btopics("broker-a")) == {"Fresh1", "Fresh2"}


async def test_a_replay_registers_a_broker_the_data_set_lost(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    began = await service.store.server_time_ms()
    replay = dataclasses.replace(register(topics=["Old1", "Old2"]), replay_of=began)
    result, registration = await service.register_broker(replay)
    assert result is not None and result.accepted and registration is not None
    assert await redis.smembers(Keyspace(namespace).btopics("broker-a")) == {"Old1", "Old2"}


async def test_a_later_batch_of_a_replay_lands_only_while_the_live_registration_is_the_copys(
    service: RegistryService, redis: Redis, namespace: str
) -> None:
    copied_at = await service.store.server_time_ms()
    first = dataclasses.replace(register(topics=["Old1", "Old2"]), replay_of=copied_at)
    _, registration = await service.register_broker(first)
    assert registration is not None
    # a retried first batch whose first try landed (a reply lost on a reset) goes on
    again, _ = await service.register_broker(first)
    assert again is not None and again.accepted
    second = dataclasses.replace(
        register(topics=["Old3", "Old4"]), replay_of=copied_at, replay_continues=True
    )
    _, later = await service.register_broker(second)
    assert later is not None and later.epoch > registration.epoch
    # the broker registers on its own: a later batch of the replay changes nothing
    own, _ = await service.register_broker(register(topics=["Fresh1", "Fresh2"], counter=2))
    assert own is not None
    third = dataclasses.replace(register(topics=["Old5", "Old6"]), replay_of=copied_at, replay_continues=True)
    assert await service.register_broker(third) == (RegisterBrokerResult(accepted=False), None)
    assert await redis.smembers(Keyspace(namespace).btopics("broker-a")) == {
        "Old1",
        "Old2",
        "Old3",
        "Old4",
        "Fresh1",
        "Fresh2",
    }


@pytest.mark.parametrize("newer_first", [True, False])
async def test_the_newest_of_two_workers_copies_wins_whatever_order_they_replay_in(
    service: RegistryService, redis: Redis, namespace: str, newer_first: bool
) -> None:
    """A broker whose registration to one worker failed left it an older copy; after a loss both
    workers replay theirs: Redis ends with the newer one."""
    older = dataclasses.replace(register(topics=["Old1", "Old2"], counter=1), replay_of=1_000)
    newer = dataclasses.replace(register(topics=["New1", "New2"], counter=2), replay_of=2_000)
    first, second = (newer, older) if newer_first else (older, newer)
    _, registration = await service.register_broker(first)
    assert registration is not None
    result, later = await service.register_broker(second)
    if newer_first:
        assert (result, later) == (RegisterBrokerResult(accepted=False), None)
    else:
        assert result is not None and result.accepted and later is not None
    topics = await redis.smembers(Keyspace(namespace).btopics("broker-a"))
    assert "New1" in topics and "New2" in topics
    assert newer_first == ("Old1" not in topics)  # the older copy landed first only when it came first
