"""Builders for broker registrations used across the tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from namesrv.domain.model import (
    DataVersion,
    RegisterBrokerRequest,
    TopicConfig,
    TopicConfigWrapper,
)

Topic = tuple[int, int, int, int]  # readQueueNums, writeQueueNums, perm, topicSysFlag


def topic_table(topics: dict[str, Topic] | list[str]) -> dict[str, TopicConfig]:
    if isinstance(topics, list):
        topics = {t: (8, 8, 6, 0) for t in topics}
    return {
        name: TopicConfig(name, r, w, perm, topicSysFlag=flag) for name, (r, w, perm, flag) in topics.items()
    }


def register(
    cluster: str = "DefaultCluster",
    name: str = "broker-a",
    addr: str = "127.0.0.1:10911",
    broker_id: int = 0,
    topics: dict[str, Topic] | list[str] | None = None,
    *,
    counter: int = 1,
    timestamp: int = 1700000000000,
    state_version: int = 0,
    ha: str | None = None,
    acting: bool | None = False,
    timeout: int | None = None,
    zone: str | None = None,
    filters: tuple[str, ...] | None = (),
    mappings: dict[str, Any] | None = None,
) -> RegisterBrokerRequest:
    if topics is None:
        topics = ["TopicTest", "TBW102"]
    host, port = addr.rsplit(":", 1)
    return RegisterBrokerRequest(
        clusterName=cluster,
        brokerAddr=addr,
        brokerName=name,
        brokerId=broker_id,
        haServerAddr=ha or f"{host}:{int(port) + 1}",
        wrapper=TopicConfigWrapper(
            topic_table(topics), DataVersion(counter, state_version, timestamp), mappings or {}
        ),
        filterServerList=filters,
        zoneName=zone,
        heartbeatTimeoutMillis=timeout,
        enableActingMaster=acting,
    )


def register_json(
    cluster: str = "DefaultCluster",
    name: str = "broker-a",
    addr: str = "127.0.0.1:10911",
    broker_id: int = 0,
    topics: dict[str, Topic] | list[str] | None = None,
    *,
    counter: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    if topics is None:
        topics = ["TopicTest", "TBW102"]
    if isinstance(topics, list):
        topics = {t: (8, 8, 6, 0) for t in topics}
    host, port = addr.rsplit(":", 1)
    body: dict[str, Any] = {
        "clusterName": cluster,
        "brokerName": name,
        "brokerAddr": addr,
        "brokerId": broker_id,
        "haServerAddr": f"{host}:{int(port) + 1}",
        "enableActingMaster": False,
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": 1700000000000},
            "topicConfigTable": {
                t: {
                    "topicName": t,
                    "readQueueNums": r,
                    "writeQueueNums": w,
                    "perm": perm,
                    "topicSysFlag": flag,
                    "topicFilterType": "SINGLE_TAG",
                    "order": False,
                    "attributes": {},
                }
                for t, (r, w, perm, flag) in topics.items()
            },
        },
        "filterServerList": [],
    }
    body.update(extra)
    return body


class ManualFreshness:
    """A change feed stand-in for route-cache unit tests: the test says what the feed knows."""

    def __init__(self) -> None:
        self.known_at: float | None = None
        self.instance = ""  # the data set the feed learned from
        self.last_id = ""  # the change-log entry it applied last
        self.down = False  # Redis unreachable or stalled
        self.catch_up: Callable[[], Awaitable[bool]] | None = None  # what wait_fresh does
        self.in_flight: Callable[[], Awaitable[bool]] | None = None  # what wait_in_flight does
        self.waits = 0

    @property
    def reachable(self) -> bool:
        return not self.down

    def down_for(self) -> float:
        return 60.0 if self.down else 0.0

    def outage(self, now: float) -> bool:
        return self.down

    async def wait_in_flight(self, timeout: float, *, until_outage: bool = False) -> bool:
        return await self.in_flight() if self.in_flight is not None else False

    async def wait_fresh(self, timeout: float, *, until_outage: bool = False) -> bool:
        self.waits += 1
        return await self.catch_up() if self.catch_up is not None else False
