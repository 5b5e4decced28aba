"""The three shapes as lists of simulated brokers (names, addresses, topic tables) and what a
registry holding them whole looks like (topics, each group's topics, each topic's groups)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.scale.config import ScaleConfig
from namesrv.domain.model import TopicConfig
from namesrv.sim.broker import topic_configs

CLUSTER = "ScaleCluster"
SAMPLE_SEED = 27  # the same sample of topics on every run and every target


@dataclass(frozen=True)
class BrokerSpec:
    name: str  # brokerName: the group
    broker_id: int  # 0 master, 1.. slaves
    addr: str
    topics: dict[str, TopicConfig]  # shared by the group's brokers (and, in rip29, by every group)


@dataclass(frozen=True)
class Shape:
    name: str
    brokers: tuple[BrokerSpec, ...]
    split: int  # topics per REGISTER_BROKER request; 0: the whole table in one
    compressed: bool
    groups_of: dict[str, int]  # a sample of topics -> how many groups each one's route holds
    topics_total: int

    @property
    def masters(self) -> list[BrokerSpec]:
        return [b for b in self.brokers if b.broker_id == 0]

    @property
    def queue_entries(self) -> int:
        """(topic, group) pairs: one QueueData each in a route."""
        return sum(len(b.topics) for b in self.masters)

    @property
    def requests(self) -> int:
        per = [-(-len(b.topics) // self.split) if self.split else 1 for b in self.brokers]
        return sum(per)

    def facts(self) -> dict[str, int]:
        return {
            "groups": len(self.masters),
            "brokers": len(self.brokers),
            "topics": self.topics_total,
            "queue_entries": self.queue_entries,
            "register_requests": self.requests,
        }


def _addr(group: int, broker_id: int) -> str:
    return f"10.{group // 250}.{group % 250}.{broker_id + 1}:10911"


def _groups(prefix: str, tables: list[dict[str, TopicConfig]], slaves: int) -> tuple[BrokerSpec, ...]:
    return tuple(
        BrokerSpec(f"{prefix}-{g:03d}", i, _addr(g, i), table)
        for g, table in enumerate(tables)
        for i in range(1 + slaves)
    )


def _sample(topics: list[str], count: int) -> list[str]:
    if count >= len(topics):
        return list(topics)
    return random.Random(SAMPLE_SEED).sample(topics, count)


def rip29(cfg: ScaleConfig) -> Shape:
    names = [f"rip29-t{i:05d}" for i in range(cfg.rip29_topics)]
    table = topic_configs(names)
    brokers = _groups("rip29", [table] * cfg.rip29_groups, cfg.rip29_slaves)
    sample = _sample(names, cfg.lookup_topics)
    return Shape("rip29", brokers, 0, False, dict.fromkeys(sample, cfg.rip29_groups), len(names))


def wide(cfg: ScaleConfig) -> Shape:
    names = [f"wide-t{i:06d}" for i in range(cfg.wide_topics)]
    brokers = (BrokerSpec("wide-000", 0, _addr(0, 0), topic_configs(names)),)
    sample = _sample(names, cfg.lookup_topics)
    return Shape("wide", brokers, cfg.wide_split, True, dict.fromkeys(sample, 1), len(names))


def many(cfg: ScaleConfig) -> Shape:
    """Groups in sets of ``many_spread``: the groups of a set share ``many_topics`` topics that no
    other set has, so each group holds ``many_topics`` and each topic is on ``many_spread`` groups."""
    sets = cfg.many_groups // cfg.many_spread
    tables: list[dict[str, TopicConfig]] = []
    names: list[str] = []
    for s in range(sets):
        mine = [f"many-s{s:03d}-t{i:05d}" for i in range(cfg.many_topics)]
        names += mine
        tables += [topic_configs(mine)] * cfg.many_spread
    brokers = _groups("many", tables, 0)
    sample = _sample(names, cfg.lookup_topics)
    return Shape("many", brokers, 0, False, dict.fromkeys(sample, cfg.many_spread), len(names))


BUILDERS = {"rip29": rip29, "wide": wide, "many": many}


def build(name: str, cfg: ScaleConfig) -> Shape:
    return BUILDERS[name](cfg)
