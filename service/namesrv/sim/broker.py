"""A simulated RocketMQ broker: registers its topics, heartbeats and unregisters, like a 5.x
broker's BrokerOuterAPI, over its own remoting connection."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from namesrv.domain.codes import ZONE_NAME, RequestCode, Version
from namesrv.domain.model import DataVersion, TopicConfig
from namesrv.protocol.register_body import crc32_masked
from namesrv.protocol.remoting import RemotingCommand
from namesrv.protocol.render import data_version_json
from namesrv.sim.bodies import legacy_body_json, register_body_compressed, register_body_json
from namesrv.sim.client import RemotingClient


class RegistrationFailed(Exception):
    def __init__(self, reply: RemotingCommand) -> None:
        super().__init__(f"REGISTER_BROKER answered {reply.code}: {reply.remark}")
        self.reply = reply


def topic_configs(names: list[str], *, queues: int = 8, perm: int = 6) -> dict[str, TopicConfig]:
    return {n: TopicConfig(n, queues, queues, perm) for n in names}


@dataclass
class SimBroker:
    client: RemotingClient
    cluster: str
    name: str
    addr: str
    broker_id: int = 0
    topics: dict[str, TopicConfig] = field(default_factory=dict)
    counter: int = 1
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    state_version: int = 0
    ha_addr: str | None = None
    acting: bool | None = False  # None: a 4.x broker, which does not send enableActingMaster
    timeout_ms: int | None = None
    zone: str | None = None
    compressed: bool = False
    filters: tuple[str, ...] = ()
    registrations: int = 0  # successful REGISTER_BROKER calls

    @property
    def data_version(self) -> DataVersion:
        return DataVersion(self.counter, self.state_version, self.timestamp)

    def bump(self) -> None:
        """What a broker does when its topic table changes."""
        self.counter += 1

    def body(self) -> bytes:
        version = self.client.version
        if version < Version.V3_0_11:
            return legacy_body_json(self.topics, self.data_version)
        if self.compressed:
            return register_body_compressed(
                self.topics, self.data_version, self.filters, with_mappings=version >= Version.V5_0_0
            )
        return register_body_json(self.topics, self.data_version, self.filters)

    def header(self, body: bytes) -> dict[str, str]:
        host, _, port = self.addr.rpartition(":")
        ext = {
            "brokerId": str(self.broker_id),
            "bodyCrc32": str(crc32_masked(body)),
            "clusterName": self.cluster,
            "brokerAddr": self.addr,
            "haServerAddr": self.ha_addr or f"{host}:{int(port) + 1}",
            "compressed": "true" if self.compressed else "false",
            "brokerName": self.name,
        }
        if self.acting is not None:
            ext["enableActingMaster"] = "true" if self.acting else "false"
        if self.timeout_ms is not None:
            ext["heartbeatTimeoutMillis"] = str(self.timeout_ms)
        if self.zone is not None:
            ext[ZONE_NAME] = self.zone
        return ext

    def _ref(self) -> dict[str, str]:
        return {
            "clusterName": self.cluster,
            "brokerAddr": self.addr,
            "brokerName": self.name,
            "brokerId": str(self.broker_id),
        }

    async def register(self, *, check: bool = True) -> RemotingCommand:
        body = self.body()
        reply = await self.client.invoke(RequestCode.REGISTER_BROKER, self.header(body), body)
        if check and reply.code != 0:
            raise RegistrationFailed(reply)
        if reply.code == 0:
            self.registrations += 1
        return reply

    async def unregister(self) -> RemotingCommand:
        return await self.client.invoke(RequestCode.UNREGISTER_BROKER, self._ref())

    def heartbeat(self) -> None:
        """BROKER_HEARTBEAT, oneway, as a 5.x broker with enableSlaveActingMaster sends it."""
        self.client.oneway(RequestCode.BROKER_HEARTBEAT, self._ref())

    async def query_data_version(self) -> RemotingCommand:
        return await self.client.invoke(
            RequestCode.QUERY_DATA_VERSION, self._ref(), data_version_json(self.data_version).encode()
        )

    async def run(
        self,
        stop: asyncio.Event,
        *,
        period: float = 30.0,
        heartbeat: float = 0.0,
        stats: dict[str, list[float]] | None = None,
    ) -> None:
        """Register every ``period`` s (and heartbeat every ``heartbeat`` s) until ``stop``."""
        loop = asyncio.get_running_loop()
        next_register = loop.time()
        next_beat = loop.time() + heartbeat if heartbeat > 0 else float("inf")
        while not stop.is_set():
            now = loop.time()
            if now >= next_register:
                started = time.perf_counter()
                await self.register()
                if stats is not None:
                    stats.setdefault("register", []).append(time.perf_counter() - started)
                next_register = now + period
            if now >= next_beat:
                self.heartbeat()
                next_beat = now + heartbeat
            wait = max(0.0, min(next_register, next_beat) - loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
