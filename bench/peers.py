"""Peers: other NameServers already running (a Java one, another fleet), measured in the same run.

``--peer NAME=HOST:PORT[@PID]`` (repeatable). The bench registers the lookup topics on each peer
itself (the same simulated brokers, names and topics as on the fleet), keeps them registered by
re-registering every ``REREGISTER_S`` (what a broker does; a Java 4.9.x NameServer knows no
BROKER_HEARTBEAT), and runs the same remoting lookup and registration phases against it, each
scenario right after ours so both see the same machine. A peer's CPU per lookup needs its pid
(``@PID``); without it the table says n/a. Peers have no HTTP API and no Redis: those columns
stay empty for them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from dataclasses import dataclass, field

from namesrv.domain.model import TopicConfig
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient

REREGISTER_S = 20.0  # under Java's 120 s brokerChannelExpiredTime


def spread_broker(
    client: RemotingClient, i: int, configs: dict[str, TopicConfig], timeout_ms: int
) -> SimBroker:
    """The i-th broker of the bench's 'spread' routes: the same names and addresses on every
    NameServer measured, ours and each peer."""
    return SimBroker(
        client, "BenchCluster", f"broker-{i}", f"127.0.1.{i + 1}:10911", topics=configs, timeout_ms=timeout_ms
    )


@dataclass(frozen=True)
class Peer:
    name: str
    host: str
    port: int
    pid: int | None = None

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def remoting(self) -> tuple[str, int]:
        return (self.host, self.port)

    def __str__(self) -> str:
        return f"{self.name}={self.addr}" + (f"@{self.pid}" if self.pid else "")


def parse_peer(text: str) -> Peer:
    """``NAME=HOST:PORT`` or ``NAME=HOST:PORT@PID``."""
    name, sep, rest = text.partition("=")
    where, _, pid = rest.partition("@")
    host, _, port = where.rpartition(":")
    if not sep or not name or not host or not port.isdigit() or (pid and not pid.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME=HOST:PORT or NAME=HOST:PORT@PID, got {text!r}")
    if name in ("fleet", "ceiling"):
        raise argparse.ArgumentTypeError(f"peer name {name!r} is taken by the bench itself")
    return Peer(name, host, int(port), int(pid) if pid else None)


@dataclass
class PeerSetup:
    """The simulated brokers that keep the lookup topics registered on the peers."""

    brokers: list[SimBroker] = field(default_factory=list)
    clients: list[RemotingClient] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def register(
        self, peers: tuple[Peer, ...], topics: list[str], brokers: int, timeout_ms: int
    ) -> None:
        configs = topic_configs(topics)
        for peer in peers:
            for i in range(brokers):
                client = await RemotingClient.connect(peer.addr)
                self.clients.append(client)
                broker = spread_broker(client, i, configs, timeout_ms)
                await broker.register()
                self.brokers.append(broker)
            await check_route(peer, topics[0])
        if self.brokers:
            self._task = asyncio.create_task(self._keep_registered(), name="bench-peer-keepalive")

    async def _keep_registered(self) -> None:
        while True:
            await asyncio.sleep(REREGISTER_S)
            for broker in list(self.brokers):
                with contextlib.suppress(Exception):
                    await broker.register(check=False)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for broker in self.brokers:
            with contextlib.suppress(Exception):
                await broker.unregister()
        for client in self.clients:
            client.close()


async def check_route(peer: Peer, topic: str) -> None:
    client = await RemotingClient.connect(peer.addr)
    try:
        reply = await client.invoke(105, {"topic": topic}, version=479)
    finally:
        await client.aclose()
    if reply.code != 0 or not reply.body or b"brokerDatas" not in reply.body:
        raise RuntimeError(
            f"peer {peer}: no route for {topic} after registering it: {reply.code} {reply.remark}"
        )
