"""Synthetic change-log history for tests and benchmarks (no Spark, no Redis).

:class:`Registry` is a small in-memory model of the Lua scripts: it applies the same rules the
scripts apply (R5/R8-R11 of a registration, U1-U5 of a removal, the sweep, perm changes, topic
admin) and emits the same event kinds with the same fields, so its output parses exactly like
an export of a real stream. Tests drive it by hand for small, exact logs; :func:`simulate`
drives it with a fleet (clusters of master/slave brokers, thousands of topics) living through
days of heartbeats, re-registrations, crashes, flaps, slow heartbeats, stale connection closes
and admin wipes. :func:`generate` writes that history as the export does (gzip JSON lines or
Parquet in ``day=YYYY-MM-DD`` folders), in parallel shards (one process each, independent
sub-fleets).
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import orjson

from namesrv.events import layout
from namesrv.pipeline.fleetspec import DAY_MS, PRESETS, FleetSpec

__all__ = ["PRESETS", "FleetSpec", "IdClock", "MemoryLog", "Registry", "generate", "iter_lines", "simulate"]

Fields = dict[str, str]
Sink = Callable[[int, str, Fields], None]  # (ts, kind, fields without kind/ts)
QD = tuple[int, int, int, int]  # perm, readQueueNums, writeQueueNums, topicSysFlag
PERM_WRITE = 2
SWEEP_MS = 5_000


def qd_json(name: str, q: QD) -> str:
    perm, read, write, flag = q
    return (
        f'{{"brokerName":{orjson.dumps(name).decode()},"perm":{perm},"readQueueNums":{read},'
        f'"topicSysFlag":{flag},"writeQueueNums":{write}}}'
    )


def _names(items: list[str]) -> str:
    return orjson.dumps(items).decode()


@dataclass
class _Live:
    cluster: str
    name: str
    broker_id: int
    epoch: int
    deadline: int
    timeout: int
    data_version: int


@dataclass
class Registry:
    """The registry's tables, changed only through methods that mirror the Lua scripts."""

    sink: Sink
    chunk: int = 1000
    via: str = "synth"
    brokers: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> BrokerData
    live: dict[tuple[str, str], _Live] = field(default_factory=dict)  # (cluster, addr) -> live
    queues: dict[str, dict[str, QD]] = field(default_factory=dict)  # topic -> name -> QueueData
    btopics: dict[str, set[str]] = field(default_factory=dict)  # name -> topics
    epoch: int = 0

    # ---- helpers ----
    def _bd_json(self, name: str) -> str:
        bd = self.brokers.get(name)
        return "" if bd is None else orjson.dumps(bd).decode()

    def _member(self, cluster: str, addr: str, name: str, broker_id: int | str) -> Fields:
        return {"cluster": cluster, "brokerName": name, "brokerAddr": addr, "brokerId": str(broker_id)}

    def _set_queue(self, topic: str, name: str, q: QD) -> bool:
        per = self.queues.setdefault(topic, {})
        if per.get(name) == q:
            return False
        per[name] = q
        self.btopics.setdefault(name, set()).add(topic)
        return True

    def _drop_queue(self, topic: str, name: str) -> bool:
        per = self.queues.get(topic)
        if per is None or name not in per:
            return False
        del per[name]
        if not per:
            del self.queues[topic]
        self.btopics.get(name, set()).discard(topic)
        return True

    @staticmethod
    def _no_master(bd: dict[str, Any] | None) -> bool:
        return bd is None or not bd["brokerAddrs"] or min(int(i) for i in bd["brokerAddrs"]) > 0

    # ---- 103 REGISTER_BROKER (registerBroker + registerBrokerTopics) ----
    def register(
        self,
        ts: int,
        cluster: str,
        addr: str,
        name: str,
        broker_id: int,
        topics: dict[str, QD],
        *,
        timeout: int = 30_000,
        data_version: int = 1,
        acting: bool = False,
    ) -> int:
        """A registration that is accepted (result ok); returns its epoch."""
        bd = self.brokers.get(name)
        register_first = bd is None
        if bd is None:
            bd = {"cluster": cluster, "brokerName": name, "brokerAddrs": {}, "enableActingMaster": acting}
            self.brokers[name] = bd
        bd["enableActingMaster"] = acting
        addrs: dict[str, str] = bd["brokerAddrs"]
        for i, a in list(addrs.items()):  # R5
            if a == addr and i != str(broker_id):
                del addrs[i]
        old = addrs.get(str(broker_id))
        if not old:
            register_first = True
        addrs[str(broker_id)] = addr
        member = (cluster, addr)
        prev = self.live.get(member)
        is_master = broker_id == 0
        prime_slave = not is_master and broker_id == min(int(i) for i in addrs)
        changed = prev is None or prev.data_version != data_version
        mode = 1 if (is_master or prime_slave) and (register_first or changed) else 0
        new_session = prev is None or prev.deadline < ts
        self.epoch += 1
        deadline = ts + timeout
        self.live[member] = _Live(cluster, name, broker_id, self.epoch, deadline, timeout, data_version)
        dv = f'{{"counter":{data_version},"stateVersion":0,"timestamp":{data_version}}}'
        self.sink(
            ts,
            "register",
            {
                "result": "ok",
                **self._member(cluster, addr, name, broker_id),
                "epoch": str(self.epoch),
                "deadline": str(deadline),
                "timeoutMillis": str(timeout),
                "dataVersion": dv,
                "newSession": "1" if new_session else "0",
                "mode": str(mode),
                "brokerData": self._bd_json(name),
                "haServerAddr": addr,
                "via": self.via,
            },
        )
        if mode:
            wipe = prime_slave and acting
            items = sorted(topics.items())
            chunks = [items[i : i + self.chunk] for i in range(0, len(items), self.chunk)] or [[]]
            for n, part in enumerate(chunks):
                upserted = []
                for topic, q in part:
                    if wipe:
                        q = (q[0] & ~PERM_WRITE, q[1], q[2], q[3])
                    if self._set_queue(topic, name, q):
                        upserted.append(f"[{orjson.dumps(topic).decode()},{qd_json(name, q)}]")
                final = n == len(chunks) - 1
                if upserted or final:
                    self.sink(
                        ts,
                        "registerQueues",
                        {
                            "cluster": cluster,
                            "brokerName": name,
                            "brokerAddr": addr,
                            "epoch": str(self.epoch),
                            "upserted": "[" + ",".join(upserted) + "]",
                            "removed": "[]",
                            "final": "1" if final else "0",
                            "chunk": str(n),
                            "dataVersion": dv,
                        },
                    )
        return self.epoch

    # ---- 904 / 322 ----
    def heartbeat(self, ts: int, cluster: str, addr: str, source: str = "904") -> bool:
        info = self.live.get((cluster, addr))
        if info is None:
            return False
        info.deadline = ts + info.timeout
        self.sink(
            ts,
            "heartbeat",
            {
                **self._member(cluster, addr, info.name, info.broker_id),
                "epoch": str(info.epoch),
                "deadline": str(info.deadline),
                "timeoutMillis": str(info.timeout),
                "source": source,
                "via": self.via,
            },
        )
        return True

    # ---- removals: unregisterBroker, expireBrokers, then cleanBrokerTopics ----
    def _unregister_core(self, cluster: str, addr: str, name: str) -> tuple[bool, bool]:
        self.live.pop((cluster, addr), None)
        bd = self.brokers.get(name)
        removed = pending = False
        if bd is not None:
            addrs: dict[str, str] = bd["brokerAddrs"]
            hit = [i for i, a in addrs.items() if a == addr]
            for i in hit:
                del addrs[i]
            if not addrs:
                del self.brokers[name]
                removed = pending = True
            elif hit and bd["enableActingMaster"] and self._no_master(bd):
                pending = True
        return removed, pending

    def unregister(
        self,
        ts: int,
        cluster: str,
        addr: str,
        name: str,
        broker_id: int,
        *,
        reason: str = "unregister",
        fence: int | None = None,
    ) -> bool:
        """``reason`` is ``unregister`` or ``close``; with ``fence`` a stale removal is refused
        (a ``fenced`` event) and False is returned."""
        info = self.live.get((cluster, addr))
        epoch = "" if info is None else str(info.epoch)
        if fence is not None and epoch != str(fence):
            self.sink(
                ts,
                "fenced",
                {
                    "reason": reason,
                    **self._member(cluster, addr, name, broker_id),
                    "epoch": str(fence),
                    "currentEpoch": epoch,
                    "via": self.via,
                },
            )
            return False
        removed, pending = self._unregister_core(cluster, addr, name)
        self.sink(
            ts,
            reason,
            {
                **self._member(cluster, addr, name, broker_id),
                "epoch": epoch,
                "brokerData": self._bd_json(name),
                "removed": "1" if removed else "0",
                "via": self.via,
            },
        )
        if pending:
            self.clean(ts, name)
        return True

    def sweep(self, ts: int) -> int:
        """expireBrokers: every member whose deadline is before ``ts``; then cleanups."""
        due = sorted((info.deadline, m) for m, info in self.live.items() if info.deadline < ts)
        names: list[str] = []
        for deadline, (cluster, addr) in due:
            info = self.live[(cluster, addr)]
            removed, pending = self._unregister_core(cluster, addr, info.name)
            if pending and info.name not in names:
                names.append(info.name)
            self.sink(
                ts,
                "expire",
                {
                    **self._member(cluster, addr, info.name, info.broker_id),
                    "epoch": str(info.epoch),
                    "deadline": str(deadline),
                    "timeoutMillis": str(info.timeout),
                    "brokerData": self._bd_json(info.name),
                    "removed": "1" if removed else "0",
                    "via": self.via,
                },
            )
        for name in names:
            self.clean(ts, name)
        return len(due)

    def clean(self, ts: int, name: str) -> None:
        """cleanBrokerTopics for every chunk of the name's topics."""
        topics = sorted(self.btopics.get(name, set()))
        bd = self.brokers.get(name)
        for i in range(0, len(topics), self.chunk):
            removed: list[str] = []
            cleared: list[str] = []
            for topic in topics[i : i + self.chunk]:
                if bd is None:
                    if self._drop_queue(topic, name):
                        removed.append(topic)
                elif bd["enableActingMaster"] and self._no_master(bd):
                    q = self.queues.get(topic, {}).get(name)
                    if q is not None and q[0] & PERM_WRITE:
                        q = (q[0] - PERM_WRITE, q[1], q[2], q[3])
                        self._set_queue(topic, name, q)
                        cleared.append(f"[{orjson.dumps(topic).decode()},{qd_json(name, q)}]")
            if removed or cleared:
                self.sink(
                    ts,
                    "cleanQueues",
                    {
                        "brokerName": name,
                        "removed": _names(removed),
                        "upserted": "[" + ",".join(cleared) + "]",
                    },
                )
        if bd is None:
            self.btopics.pop(name, None)

    # ---- admin: 205/327, 216/217, KV ----
    def change_perm(self, ts: int, name: str, *, wipe: bool) -> int:
        changed: list[str] = []
        topics = sorted(self.btopics.get(name, set()))
        for topic in topics:
            q = self.queues[topic][name]
            perm = q[0] & ~PERM_WRITE if wipe else 6
            if perm != q[0]:
                q = (perm, q[1], q[2], q[3])
                self._set_queue(topic, name, q)
                changed.append(f"[{orjson.dumps(topic).decode()},{qd_json(name, q)}]")
        self.sink(
            ts,
            "wipePerm" if wipe else "addPerm",
            {"brokerName": name, "count": str(len(topics)), "upserted": "[" + ",".join(changed) + "]"},
        )
        return len(topics)

    def topic_register(self, ts: int, topic: str, queues: dict[str, QD]) -> None:
        written = []
        for name, q in queues.items():
            if name not in self.brokers:
                break
            self._set_queue(topic, name, q)
            written.append(f"[{orjson.dumps(topic).decode()},{qd_json(name, q)}]")
        if written:
            self.sink(ts, "topicRegister", {"topic": topic, "upserted": "[" + ",".join(written) + "]"})

    def topic_delete(self, ts: int, topic: str) -> None:
        names = sorted(self.queues.get(topic, {}))
        for name in names:
            self._drop_queue(topic, name)
        if names:
            self.sink(ts, "topicDelete", {"topic": topic, "cluster": "", "brokerNames": _names(names)})

    def kv_put(self, ts: int, namespace: str, key: str, value: str) -> None:
        # As lua/kvPut-3.lua logs it: the value's length and SHA-1, never the value.
        data = value.encode()
        self.sink(
            ts,
            "kvPut",
            {
                "namespace": namespace,
                "key": key,
                "valueBytes": str(len(data)),
                "valueSha1": hashlib.sha1(data).hexdigest(),
            },
        )


class IdClock:
    """Stream IDs ``<ms>-<seq>`` as Redis assigns them (never going back), made unique across
    ``shards`` independent generators by interleaving sequence numbers."""

    def __init__(self, shard: int = 0, shards: int = 1) -> None:
        self.shard, self.shards = shard, shards
        self.ms, self.seq = -1, 0

    def next(self, ts: int) -> str:
        if ts > self.ms:
            self.ms, self.seq = ts, 0
        else:
            self.seq += 1
        return f"{self.ms}-{self.seq * self.shards + self.shard}"


def line(entry_id: str, ts: int, kind: str, fields: Fields) -> bytes:
    return layout.jsonl_line(entry_id, {"kind": kind, "ts": str(ts), **fields})


class MemoryLog:
    """A sink that keeps the lines in memory (tests)."""

    def __init__(self) -> None:
        self.clock = IdClock()
        self.lines: list[str] = []

    def __call__(self, ts: int, kind: str, fields: Fields) -> None:
        self.lines.append(line(self.clock.next(ts), ts, kind, fields).decode().rstrip("\n"))


# ---------------------------------------------------------------- the fleet simulation


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
                reg.unregister(t, m.cluster, m.addr, m.name, m.broker_id, reason="close", fence=m.epoch)
                self.at(t + rng.randrange(1_000, 10_000), i, "start")
                if rng.random() < spec.stale_closes:
                    self.at(t + rng.randrange(15_000, 30_000), i, "stale", m.epoch)
        if action != "flapclose":
            rate = {"crash": spec.crashes, "restart": spec.restarts, "close": spec.closes}[action]
            self.at(t + self.per_day(rate), i, action)

    def stale(self, t: int, i: int, m: _Member, action: str, inc: int) -> None:
        self.reg.unregister(t, m.cluster, m.addr, m.name, m.broker_id, reason="close", fence=inc)


# ---------------------------------------------------------------- files


class ShardWriter:
    """Writes one shard's events as ``day=YYYY-MM-DD/part-<shard>-<HH>.jsonl.gz`` (or
    ``.parquet``: :mod:`namesrv.events.layout`), one file per hour of log time, with optional
    bad lines mixed in."""

    def __init__(
        self, out: Path, shard: int, shards: int, bad_rate: float, seed: int, fmt: str = "jsonl"
    ) -> None:
        layout.check_format(fmt)
        self.out, self.shard, self.fmt = out, shard, fmt
        self.clock = IdClock(shard, shards)
        self.rng = random.Random(f"bad/{seed}/{shard}")
        self.bad_rate = bad_rate
        self.hour = -1
        self.path: Path | None = None
        self.file: gzip.GzipFile | None = None
        self.rows: list[layout.Entry] = []  # the current hour's entries, for Parquet
        self.events = 0
        self.bad = 0

    def _roll(self, ts: int) -> None:
        hour = ts // 3_600_000
        if self.path is None or hour != self.hour:
            self.close()
            self.hour = hour
            when = datetime.fromtimestamp(ts / 1000, UTC)
            folder = self.out / f"day={when:%Y-%m-%d}"
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / f"part-{self.shard:02d}-{when:%H}{layout.SUFFIX[self.fmt]}"
            if self.fmt == "jsonl":
                self.file = gzip.GzipFile(self.path, "wb", compresslevel=1)

    def _write(self, entry_id: str, fields: Fields) -> None:
        if self.file is not None:
            self.file.write(layout.jsonl_line(entry_id, fields))
        else:
            self.rows.append((entry_id, fields))

    def __call__(self, ts: int, kind: str, fields: Fields) -> None:
        self._roll(ts)
        entry_id = self.clock.next(ts)
        full = {"kind": kind, "ts": str(ts), **fields}
        self._write(entry_id, full)
        self.events += 1
        if self.bad_rate and self.rng.random() < self.bad_rate:
            self._bad(entry_id, full)
            self.bad += 1

    def _bad(self, entry_id: str, full: Fields) -> None:
        which = self.rng.randrange(5)
        if which == 0:
            self._write(entry_id, full)  # duplicate
        elif which == 1:  # truncated: corrupt text; a Parquet row cannot be, it loses its fields
            if self.file is not None:
                text = layout.jsonl_line(entry_id, full)
                self.file.write(text[: len(text) // 2] + b"\n")
            else:
                self.rows.append((entry_id, {}))
        elif which == 2:
            self._write(entry_id, full | {"kind": "brokerTeleport"})  # unknown kind
        elif which == 3:  # a field the kind requires is missing
            gone = next((k for k in ("brokerName", "topic", "namespace", "changes") if k in full), "")
            self._write(entry_id, {k: v for k, v in full.items() if k != gone})
        else:
            self._write(entry_id, full | {"ts": "soon"})

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        elif self.rows and self.path is not None:
            self.path.write_bytes(layout.parquet_bytes(self.rows))
        self.rows = []
        self.path = None


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
