"""Synthetic change-log history for tests and benchmarks (no Spark, no Redis).

:func:`simulate` drives a :class:`~namesrv.pipeline.registry_model.Registry` (an in-memory model
of the Lua scripts) with a fleet (clusters of master/slave brokers, thousands of topics) living
through days of heartbeats, re-registrations, crashes, flaps, slow heartbeats, stale connection
closes and admin wipes. :func:`generate` writes that history as the export does
(:class:`~namesrv.pipeline.sinks.ShardWriter`), in parallel shards (one process each,
independent sub-fleets).
"""

from __future__ import annotations

import heapq
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path

from namesrv.events import layout
from namesrv.pipeline.fleetspec import DAY_MS, PRESETS, FleetSpec
from namesrv.pipeline.registry_model import QD, Fields, Registry, Sink
from namesrv.pipeline.sinks import IdClock, MemoryLog, ShardWriter
from namesrv.store.changelog import EventKind

# Re-exported: tests and the benchmark build logs by hand from these.
__all__ = [
    "PRESETS",
    "QD",
    "FleetSpec",
    "IdClock",
    "MemoryLog",
    "Registry",
    "generate",
    "iter_lines",
    "simulate",
]

SWEEP_MS = 5_000


@dataclass
class _Member:
    cluster: str
    name: str
    addr: str
    broker_id: int
    topics: dict[str, QD]
    slow: bool = False
    flapper: bool = False
    alive: bool = False
    incarnation: int = 0
    epoch: int = 0
    data_version: int = 1


def _fleet(spec: FleetSpec, shard: int, shards: int, rng: random.Random) -> list[_Member]:
    members: list[_Member] = []
    clusters = [c for c in range(spec.clusters) if c % shards == shard]
    topics_by_name: dict[str, dict[str, QD]] = {}
    for c in clusters:
        names = [f"broker-{c}-{n}" for n in range(spec.names_per_cluster)]
        for name in names:
            topics_by_name[name] = {}
        for t in range(c, spec.topics, spec.clusters):
            roll = rng.random()
            k = 1 if roll < 0.3 else 2 if roll < 0.7 else len(names)
            q: QD = (6, 8, 8, 0)
            for name in rng.sample(names, min(k, len(names))):
                topics_by_name[name][f"Topic-{t:05d}"] = q
        for n, name in enumerate(names):
            for b in range(spec.slaves + 1):
                addr = f"10.{c}.{n}.{b + 1}:10911"
                members.append(_Member(f"cluster-{c}", name, addr, b, topics_by_name[name]))
    order = list(range(len(members)))
    rng.shuffle(order)
    for i in order[: spec.flappers]:
        members[i].flapper = True
    for i in order[spec.flappers : spec.flappers + spec.slow]:
        members[i].slow = True
    return members


def simulate(spec: FleetSpec, sink: Sink, shard: int = 0, shards: int = 1) -> None:
    """Drive a :class:`Registry` with the fleet of this shard (its clusters) through the spec's
    days. Deterministic for a (spec, shard, shards)."""
    _Simulation(spec, sink, shard, shards).run()


class _Simulation:
    """One shard's discrete-event simulation: a time-ordered queue of actions, fleet-wide
    (sweep, wipe, addperm, churn; member -1 or a name index) or of one member (start, beat,
    reregister, flap, crash, restart, close, flapclose, stale). Every random draw happens in a
    fixed order, so a run is reproducible."""

    def __init__(self, spec: FleetSpec, sink: Sink, shard: int, shards: int) -> None:
        self.spec, self.sink, self.shard = spec, sink, shard
        self.rng = random.Random(f"{spec.seed}/{shard}/{shards}")
        self.emitted = 0
        self.reg = Registry(self._counting, via=f"worker-{shard}")
        self.members = _fleet(spec, shard, shards, self.rng)
        self.end = spec.start_ms + int(spec.days * DAY_MS)
        self.queue: list[tuple[int, int, int, str, int]] = []  # (time, tiebreak, member, action, incarnation)
        self.tick = 0
        self.names: list[str] = []
        self.extra_topics = 0

    def _counting(self, ts: int, kind: str, fields: Fields) -> None:
        self.emitted += 1
        self.sink(ts, kind, fields)

    def at(self, t: int, m: int, action: str, inc: int = 0) -> None:
        self.tick += 1
        heapq.heappush(self.queue, (t, self.tick, m, action, inc))

    def per_day(self, rate: float) -> int:
        return int(self.rng.expovariate(rate) * DAY_MS) if rate > 0 else self.end

    def sweep_after(self, deadline: int) -> None:
        self.at((deadline // SWEEP_MS + 1) * SWEEP_MS + self.rng.randrange(0, 50), -1, "sweep")

    def schedule(self) -> None:
        spec, rng, at = self.spec, self.rng, self.at
        for i, m in enumerate(self.members):
            first = spec.start_ms + rng.randrange(0, 10_000) + (0 if m.broker_id == 0 else 2_000)
            at(first, i, "start")
            at(spec.start_ms + self.per_day(spec.crashes), i, "crash")
            at(spec.start_ms + self.per_day(spec.restarts), i, "restart")
            at(spec.start_ms + self.per_day(spec.closes), i, "close")
            if m.flapper:
                at(spec.start_ms + rng.randrange(0, DAY_MS), i, "flap")
        at(spec.start_ms + self.per_day(spec.wipes_per_day), -1, "wipe")
        at(spec.start_ms + self.per_day(spec.topic_churn_per_day), -1, "churn")
        self.names = sorted({m.name for m in self.members})

    def run(self) -> None:
        self.schedule()
        fleet = {"sweep": self.sweep, "wipe": self.wipe, "addperm": self.addperm, "churn": self.churn}
        member = {
            "start": self.start,
            "beat": self.beat,
            "reregister": self.reregister,
            "flap": self.flap,
            "stale": self.stale,
            **dict.fromkeys(("crash", "restart", "close", "flapclose"), self.leave),
        }
        while self.queue and self.emitted < (self.spec.max_events or float("inf")):
            t, _, i, action, inc = heapq.heappop(self.queue)
            if t >= self.end:
                break
            if action in fleet:
                fleet[action](t, i)
                continue
            m = self.members[i]
            if action in ("beat", "reregister") and (inc != m.incarnation or not m.alive):
                continue
            member[action](t, i, m, action, inc)

    # ---- fleet-wide actions ----
    def sweep(self, t: int, _: int) -> None:
        self.reg.sweep(t)

    def wipe(self, t: int, _: int) -> None:
        if self.names:
            name = self.rng.choice(self.names)
            if name in self.reg.brokers:
                self.reg.change_perm(t, name, wipe=True)
                self.at(t + self.rng.randrange(600_000, 3_600_000), self.names.index(name), "addperm")
        self.at(t + self.per_day(self.spec.wipes_per_day), -1, "wipe")

    def addperm(self, t: int, name_index: int) -> None:
        self.reg.change_perm(t, self.names[name_index], wipe=False)

    def churn(self, t: int, _: int) -> None:
        reg, rng = self.reg, self.rng
        live_names = [n for n in self.names if n in reg.brokers]
        if live_names and rng.random() < 0.6:
            self.extra_topics += 1
            chosen = rng.sample(live_names, min(2, len(live_names)))
            topic = f"Admin-{self.shard}-{self.extra_topics:04d}"
            reg.topic_register(t, topic, {n: (6, 4, 4, 0) for n in chosen})
        elif reg.queues:
            reg.topic_delete(t, rng.choice(sorted(reg.queues)))
        self.at(t + self.per_day(self.spec.topic_churn_per_day), -1, "churn")

    # ---- one member's actions ----
    def _register(self, t: int, m: _Member) -> None:
        spec = self.spec
        m.epoch = self.reg.register(
            t, m.cluster, m.addr, m.name, m.broker_id, m.topics,
            timeout=spec.timeout_ms, data_version=m.data_version, acting=spec.acting_master,
        )  # fmt: skip

    def refresh_next(self, i: int, m: _Member, t: int) -> None:
        spec = self.spec
        interval = spec.heartbeat_ms or spec.register_ms
        gap = int(interval * self.rng.uniform(0.9, 1.1))
        if m.slow and self.rng.random() < 0.02:
            gap = int(spec.timeout_ms * self.rng.uniform(0.5, 1.15))
        info = self.reg.live.get((m.cluster, m.addr))
        if info is not None and t + gap > info.deadline:
            self.sweep_after(info.deadline)
        self.at(t + gap, i, "beat" if spec.heartbeat_ms else "reregister", m.incarnation)

    def start(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        if m.alive:
            return
        m.alive = True
        m.incarnation += 1
        self._register(t, m)
        if self.spec.heartbeat_ms:
            self.at(t + self.spec.register_ms, i, "reregister", m.incarnation)
        self.refresh_next(i, m, t)

    def beat(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        self.reg.heartbeat(t, m.cluster, m.addr)
        self.refresh_next(i, m, t)

    def reregister(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        if self.rng.random() < 0.002:
            m.data_version += 1  # the broker's topic config changed
        self._register(t, m)
        if self.spec.heartbeat_ms:
            self.at(
                t + int(self.spec.register_ms * self.rng.uniform(0.95, 1.05)), i, "reregister", m.incarnation
            )
        else:
            self.refresh_next(i, m, t)

    def flap(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        """An hour of connection drops and reconnects, every day."""
        self.at(t + DAY_MS, i, "flap")
        for k in range(self.rng.randrange(4, 9)):
            self.at(t + k * self.rng.randrange(300_000, 450_000) + 1, i, "flapclose")

    def leave(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        """crash (expired later by a sweep), restart (unregister), close or flapclose (a fenced
        close removal), each followed by a start; crash, restart and close recur."""
        reg, rng, spec = self.reg, self.rng, self.spec
        if m.alive:
            m.alive = False
            m.incarnation += 1
            if action == "crash":
                info = reg.live.get((m.cluster, m.addr))
                if info is not None:
                    self.sweep_after(info.deadline)
                self.at(t + rng.randrange(30_000, 900_000), i, "start")
            elif action == "restart":
                reg.unregister(t, m.cluster, m.addr, m.name, m.broker_id)
                self.at(t + rng.randrange(5_000, 120_000), i, "start")
            else:
                reg.unregister(
                    t, m.cluster, m.addr, m.name, m.broker_id, reason=EventKind.CLOSE, fence=m.epoch
                )
                self.at(t + rng.randrange(1_000, 10_000), i, "start")
                if rng.random() < spec.stale_closes:
                    self.at(t + rng.randrange(15_000, 30_000), i, "stale", m.epoch)
        if action != "flapclose":
            rate = {"crash": spec.crashes, "restart": spec.restarts, "close": spec.closes}[action]
            self.at(t + self.per_day(rate), i, action)

    def stale(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        self.reg.unregister(t, m.cluster, m.addr, m.name, m.broker_id, reason=EventKind.CLOSE, fence=inc)


def _run_shard(args: tuple[FleetSpec, str, int, int, str]) -> tuple[int, int]:
    spec, out, shard, shards, fmt = args
    writer = ShardWriter(Path(out), shard, shards, spec.bad_rate, spec.seed, fmt)
    try:
        simulate(spec, writer, shard, shards)
    finally:
        writer.close()
    return writer.events, writer.bad


def generate(
    spec: FleetSpec, out: str | os.PathLike[str], shards: int = 1, fmt: str = "jsonl"
) -> tuple[int, int]:
    """Write the fleet's history under ``out`` in the export's ``fmt`` (``jsonl`` or
    ``parquet``); returns (events, extra bad lines). Shards split the clusters between
    processes; each shard is an independent sub-fleet."""
    layout.check_format(fmt)
    shards = max(1, min(shards, spec.clusters))
    if spec.max_events:
        spec = replace(spec, max_events=-(-spec.max_events // shards))
    jobs = [(spec, str(out), s, shards, fmt) for s in range(shards)]
    if shards == 1:
        results = [_run_shard(jobs[0])]
    else:
        with get_context("spawn").Pool(shards) as pool:
            results = pool.map(_run_shard, jobs)
    return sum(r[0] for r in results), sum(r[1] for r in results)


def iter_lines(spec: FleetSpec) -> Iterator[str]:
    """The whole history of a one-shard fleet as lines, in memory (tests)."""
    log = MemoryLog()
    simulate(spec, log)
    yield from log.lines
