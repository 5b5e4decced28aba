"""Connection slots: how many remoting connections a worker holds, in all and per peer address.

A connection takes a slot when it is accepted (before its TLS handshake, which holds a descriptor
and memory too) and gives it back exactly once, whichever way it ends: refused, a handshake that
fails or times out, a bad frame, a deadline, idle, a reset, the worker's own shutdown.
:meth:`Slot.release` is idempotent, so every close path may call it.

- ``maxConnections``: slots of the worker.
- ``maxConnectionsPerPeer``: slots of one peer address (IPv4-mapped IPv6 counted as the IPv4
  address), so one host cannot take them all and lock brokers and clients out.
"""

from __future__ import annotations

import ipaddress
import logging
import time

from namesrv.limits import RateLimitedLog
from namesrv.metrics import Metrics

log = logging.getLogger(__name__)


def peer_host(sockaddr: object) -> str:
    """The address a peer is counted under: its IP, IPv4-mapped IPv6 as IPv4, no port."""
    host = sockaddr[0] if isinstance(sockaddr, tuple) and sockaddr else sockaddr
    text = str(host)
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text  # a Unix socket path, or nothing: counted as given
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


class Slot:
    """One connection's place; :meth:`release` gives it back once, later calls do nothing."""

    __slots__ = ("_owner", "peer", "since")

    def __init__(self, owner: ConnectionSlots, peer: str) -> None:
        self._owner: ConnectionSlots | None = owner
        self.peer = peer
        self.since = time.monotonic()  # accepted at: the first-frame deadline counts from here

    @property
    def held(self) -> bool:
        return self._owner is not None

    def release(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._give_back(self.peer)


class ConnectionSlots:
    def __init__(self, max_connections: int, max_per_peer: int, metrics: Metrics) -> None:
        self.max_connections = max_connections
        self.max_per_peer = min(max_per_peer, max_connections)
        self.metrics = metrics
        self.total = 0
        self.per_peer: dict[str, int] = {}  # only peers holding a slot: empty when total is 0
        self._refusals = RateLimitedLog(log)
        self._peer_refusals = RateLimitedLog(log)

    def take(self, peer: str) -> Slot | None:
        """A slot for a connection from ``peer``, or None (counted, logged rate-limited)."""
        if self.total >= self.max_connections:
            self.metrics.limit_refusals.labels("maxConnections").inc()
            self._refusals.warning(
                "refusing remoting connection from %s: %d connections open (maxConnections)",
                peer,
                self.total,
            )
            return None
        held = self.per_peer.get(peer, 0)
        if held >= self.max_per_peer:
            self.metrics.limit_refusals.labels("maxConnectionsPerPeer").inc()
            self._peer_refusals.warning(
                "refusing remoting connection from %s: it has %d open (maxConnectionsPerPeer)",
                peer,
                held,
            )
            return None
        self.per_peer[peer] = held + 1
        self.total += 1
        self._report()
        return Slot(self, peer)

    def _give_back(self, peer: str) -> None:
        held = self.per_peer[peer] - 1
        if held:
            self.per_peer[peer] = held
        else:
            del self.per_peer[peer]
        self.total -= 1
        self._report()

    def _report(self) -> None:
        self.metrics.connections.set(self.total)
        self.metrics.connection_peers.set(len(self.per_peer))
