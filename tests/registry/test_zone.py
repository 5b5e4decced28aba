"""ZoneRouteRPCHook (spec §3.11) via ``namesrv.domain.routes.filter_by_zone``, on routes built by the
service, and through HTTP (``?zone=``)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from namesrv.domain.model import BrokerData, QueueData, TopicRouteData
from namesrv.domain.routes import filter_by_zone
from namesrv.registry.service import RegistryService
from tests.builders import register, register_json
from tests.registry.conftest import MakeService
from tests.registry.helpers import CLUSTER, MASTER, SLAVE, as_json, bd, qd, route_obj

B, B1 = "127.0.0.2:10911", "127.0.0.2:10921"
C = "127.0.0.3:10911"


def sample() -> TopicRouteData:
    """broker-a in zone1 (master+slave), broker-b in zone2, broker-c masterless in zone2, broker-d
    without zone; filter servers on a, b and d; order conf and a mapping to carry through."""
    return TopicRouteData(
        queueDatas=(
            QueueData("broker-a", 6, 8, 0, 8),
            QueueData("broker-b", 6, 4, 0, 4),
            QueueData("broker-c", 4, 2, 0, 2),
            QueueData("broker-d", 6, 1, 0, 1),
        ),
        brokerDatas=(
            BrokerData(CLUSTER, "broker-a", {0: MASTER, 1: SLAVE}, "zone1"),
            BrokerData(CLUSTER, "broker-b", {0: B, 1: B1}, "zone2"),
            BrokerData(CLUSTER, "broker-c", {1: C}, "zone2"),
            BrokerData(CLUSTER, "broker-d", {0: "127.0.0.4:1"}),
        ),
        filterServerTable={MASTER: ("f:1",), B: ("f:2",), B1: ("f:3",), "127.0.0.4:1": ("f:4",)},
        orderTopicConf="broker-a:8",
        topicQueueMappingByBroker={"broker-a": {"bname": "broker-a"}},
    )


@pytest.mark.parametrize("zone", ["zone1", "ZONE1", "Zone1"])
def test_zone_keeps_the_zone_and_masterless_brokers(zone: str) -> None:
    assert as_json(filter_by_zone(sample(), zone)) == route_obj(
        [bd("broker-a", {0: MASTER, 1: SLAVE}, zone="zone1"), bd("broker-c", {1: C}, zone="zone2")],
        [qd("broker-a", 6, 8, 8), qd("broker-c", 4, 2, 2)],
        {MASTER: ["f:1"]},
        order="broker-a:8",
        mapping={"broker-a": {"bname": "broker-a"}},
    )


def test_zone_with_no_broker_empties_the_route() -> None:
    """Appendix A: no broker in the zone gives {"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}."""
    route = TopicRouteData(
        (QueueData("broker-a", 6, 8, 0, 8),), (BrokerData(CLUSTER, "broker-a", {0: MASTER}),)
    )
    assert as_json(filter_by_zone(route, "zoneX")) == {
        "brokerDatas": [],
        "filterServerTable": {},
        "queueDatas": [],
    }


def test_zone_removed_brokers_lose_filter_servers_of_every_address() -> None:
    """ZoneRouteRPCHookTest.testDoAfterResponseWithValidZoneFiltering: one filter entry left."""
    filtered = filter_by_zone(sample(), "zone2")
    assert dict(filtered.filterServerTable) == {B: ("f:2",), B1: ("f:3",)}
    assert [b.brokerName for b in filtered.brokerDatas] == ["broker-b", "broker-c"]
    assert [q.brokerName for q in filtered.queueDatas] == ["broker-b", "broker-c"]


async def test_zone_on_a_service_route_with_an_acting_master(make_service: MakeService) -> None:
    """The hook runs on the presented route: a slave presented as id 0 (P7) counts as a master,
    so its group is filtered by zone; without acting master it stays (master down)."""
    service = make_service(supportActingMaster=True)
    await service.register_broker(register(addr=MASTER, acting=True, zone="zone1"))
    await service.register_broker(register(addr=SLAVE, broker_id=1, acting=True, zone="zone1"))
    await service.register_broker(register(CLUSTER, "broker-b", B, zone="zone2"))
    await service.register_broker(register(CLUSTER, "broker-b", B1, 1, zone="zone2"))
    await service.unregister_broker(CLUSTER, MASTER, "broker-a", 0)
    await service.unregister_broker(CLUSTER, B, "broker-b", 0)
    route = await service.route("TopicTest")
    assert route is not None
    assert as_json(filter_by_zone(route, "zone2")) == route_obj(
        [bd("broker-b", {1: B1}, zone="zone2")], [qd("broker-b", 6)]
    )
    assert as_json(filter_by_zone(route, "zone1")) == route_obj(
        [bd("broker-a", {0: SLAVE}, acting=True, zone="zone1"), bd("broker-b", {1: B1}, zone="zone2")],
        [qd("broker-a", 4), qd("broker-b", 6)],
    )


async def test_zone_name_of_a_broker_is_its_latest_registration(service: RegistryService) -> None:
    await service.register_broker(register(zone="zone1"))
    await service.register_broker(register(zone="zone2"))
    route = await service.route("TopicTest")
    assert route is not None
    assert as_json(filter_by_zone(route, "zone1")) == {
        "brokerDatas": [],
        "filterServerTable": {},
        "queueDatas": [],
    }
    assert as_json(filter_by_zone(route, "zone2")) == route_obj(
        [bd("broker-a", {0: MASTER}, zone="zone2")], [qd("broker-a")]
    )


async def test_http_zone_query(client: TestClient[Any, Any]) -> None:
    await client.post("/v1/brokers/register", json=register_json(addr=MASTER, zoneName="zone1"))
    await client.post("/v1/brokers/register", json=register_json(CLUSTER, "broker-b", B))
    resp = await client.get("/v1/routes/TopicTest", params={"zone": "ZONE1"})
    assert resp.status == 200
    assert await resp.json() == route_obj([bd("broker-a", {0: MASTER}, zone="zone1")], [qd("broker-a")])
    resp = await client.get("/v1/routes/TopicTest", params={"zone": "zoneX"})
    assert await resp.text() == '{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}'
    # ZoneRouteRPCHookMoreTest: no zone (or an empty one) leaves the route untouched.
    for params in ({}, {"zone": ""}):
        resp = await client.get("/v1/routes/TopicTest", params=params)
        assert len((await resp.json())["brokerDatas"]) == 2
