"""What the orchestrator tells an attacker process: where the fleet is, which attack, how big.

Plain JSON both ways (``--plan`` on the attacker's command line), so the attacker can be started
by hand against any fleet: ``python -m bench.abuse.attacker --plan '{...}'``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import orjson

MIB = 1 << 20
ATTACKER_ADDRESS = "127.0.0.2"  # every attack connects from here; legitimate traffic from 127.0.0.1


@dataclass(frozen=True)
class Sizes:
    """How hard each attack pushes (defaults: the issue's figures; ``--short`` lowers a few)."""

    bomb_conns: int = 20  # connections each sending the zlib bomb, again as soon as answered
    bomb_inflated: int = 63 * MIB  # what one bomb inflates to
    kv_value_bytes: int = 60 * 1024
    kv_list_loops: int = 4  # namespace readers: half GET_KVLIST_BY_NAMESPACE, half GET /v1/kv/FLOOD
    idle_conns: int = 10_000  # idle connections held open (re-opened when the worker closes one)
    reconnect_delay: float = 1.0  # s an attack connection waits before opening again once closed
    flood_tasks: int = 32  # connect-and-drop loops of the connection flood
    partial_conns: int = 100  # connections each sending most of a big frame, then nothing
    partial_bytes: int = 10 * MIB  # how much of it they send
    partial_declared: int = 12 * MIB  # what its length prefix announces
    name_bytes: int = 10_000_000  # the oversized names
    name_loops: int = 4
    malformed_loops: int = 8
    http_bad_loops: int = 4
    acl_loops: int = 4

    @classmethod
    def short(cls) -> Sizes:
        return cls(idle_conns=2_000, partial_conns=20, flood_tasks=16, name_loops=2, malformed_loops=4)


@dataclass(frozen=True)
class BrokerRef:
    cluster: str
    name: str
    addr: str


@dataclass(frozen=True)
class Plan:
    scenario: str
    seconds: float
    remoting: tuple[tuple[str, int], ...]  # every worker's remoting address
    http: tuple[str, ...]  # every worker's HTTP base URL
    source: str = ATTACKER_ADDRESS
    sizes: Sizes = field(default_factory=Sizes)
    account: tuple[str, str] | None = None  # the app (non-admin) ACL account the ACL attack signs with
    brokers: tuple[BrokerRef, ...] = ()  # the legitimate brokers (the ACL attack tries to remove them)

    def to_json(self) -> str:
        return orjson.dumps(dataclasses.asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> Plan:
        raw: dict[str, Any] = orjson.loads(text)
        return cls(
            scenario=raw["scenario"],
            seconds=float(raw["seconds"]),
            remoting=tuple((str(h), int(p)) for h, p in raw["remoting"]),
            http=tuple(raw["http"]),
            source=raw["source"],
            sizes=Sizes(**raw["sizes"]),
            account=(raw["account"][0], raw["account"][1]) if raw.get("account") else None,
            brokers=tuple(BrokerRef(**b) for b in raw.get("brokers", ())),
        )
