"""An in-memory model of the Lua scripts, for synthetic change-log history (no Spark, no Redis).

:class:`Registry` applies the same rules the scripts apply (R5/R8-R11 of a registration, U1-U5 of
a removal, the sweep, perm changes, topic admin) and emits the same event kinds
(:class:`~namesrv.store.changelog.EventKind`) with the same fields, so its output parses exactly
like an export of a real stream. Tests drive it by hand for small, exact logs;
:mod:`namesrv.pipeline.synth` drives it with a simulated fleet.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from namesrv.store.changelog import EventKind

Fields = dict[str, str]
Sink = Callable[[int, str, Fields], None]  # (ts, kind, fields without kind/ts)
QD = tuple[int, int, int, int]  # perm, readQueueNums, writeQueueNums, topicSysFlag
PERM_WRITE = 2


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
    # name -> the topic names of its last complete registration ({ns}:bdigest); dropped when
    # another request changes one of its queues, so its next registration writes them again
    digests: dict[str, frozenset[str]] = field(default_factory=dict)
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
        mode = 0
        if is_master or prime_slave:
            if register_first or changed:
                mode = 1  # upsert every topic whose queue differs
            elif self.digests.get(name) != frozenset(topics):
                mode = 2  # add only the topics missing for the broker name
        new_session = prev is None or prev.deadline < ts
        self.epoch += 1
        deadline = ts + timeout
        self.live[member] = _Live(cluster, name, broker_id, self.epoch, deadline, timeout, data_version)
        dv = f'{{"counter":{data_version},"stateVersion":0,"timestamp":{data_version}}}'
        self.sink(
            ts,
            EventKind.REGISTER,
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
            self._write_topics(ts, (cluster, addr, name), topics, mode, prime_slave and acting, dv)
        return self.epoch

    def _write_topics(
        self, ts: int, who: tuple[str, str, str], topics: dict[str, QD], mode: int, wipe: bool, dv: str
    ) -> None:
        """registerBrokerTopics' chunks: every queue that differs (mode 1) or only those the broker
        name lacks (mode 2); the final chunk commits the topic digest."""
        cluster, addr, name = who
        items = sorted(topics.items())
        if mode == 2:
            items = [(t, q) for t, q in items if name not in self.queues.get(t, {})]
        chunks = [items[i : i + self.chunk] for i in range(0, len(items), self.chunk)] or [[]]
        for n, part in enumerate(chunks):
            upserted: list[str] = []
            shared: dict[str, int] = {}  # QueueData JSON -> its index in queueDatas
            for topic, q in part:
                if wipe:
                    q = (q[0] & ~PERM_WRITE, q[1], q[2], q[3])
                if self._set_queue(topic, name, q):
                    index = shared.setdefault(qd_json(name, q), len(shared))
                    upserted.append(f"[{orjson.dumps(topic).decode()},{index}]")
            final = n == len(chunks) - 1
            if final:
                self.digests[name] = frozenset(topics)
            if upserted or final:
                self.sink(
                    ts,
                    EventKind.REGISTER_QUEUES,
                    {
                        "cluster": cluster,
                        "brokerName": name,
                        "brokerAddr": addr,
                        "epoch": str(self.epoch),
                        "upserted": "[" + ",".join(upserted) + "]",
                        "queueDatas": "[" + ",".join(shared) + "]",
                        "removed": "[]",
                        "final": "1" if final else "0",
                        "chunk": str(n),
                        "dataVersion": dv,
                    },
                )

    # ---- 904 / 322 ----
    def heartbeat(self, ts: int, cluster: str, addr: str, source: str = "904") -> bool:
        info = self.live.get((cluster, addr))
        if info is None:
            return False
        info.deadline = ts + info.timeout
        self.sink(
            ts,
            EventKind.HEARTBEAT,
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
        reason: str = EventKind.UNREGISTER,
        fence: int | None = None,
    ) -> bool:
        """``reason`` is ``unregister`` or ``close``; with ``fence`` a stale removal is refused
        (a ``fenced`` event) and False is returned."""
        info = self.live.get((cluster, addr))
        epoch = "" if info is None else str(info.epoch)
        if fence is not None and epoch != str(fence):
            self.sink(
                ts,
                EventKind.FENCED,
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
                EventKind.EXPIRE,
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
                        self.digests.pop(name, None)
                elif bd["enableActingMaster"] and self._no_master(bd):
                    q = self.queues.get(topic, {}).get(name)
                    if q is not None and q[0] & PERM_WRITE:
                        q = (q[0] - PERM_WRITE, q[1], q[2], q[3])
                        self._set_queue(topic, name, q)
                        cleared.append(f"[{orjson.dumps(topic).decode()},{qd_json(name, q)}]")
            if removed or cleared:
                self.sink(
                    ts,
                    EventKind.CLEAN_QUEUES,
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
        if changed:
            self.digests.pop(name, None)
        self.sink(
            ts,
            EventKind.WIPE_PERM if wipe else EventKind.ADD_PERM,
            {"brokerName": name, "count": str(len(topics)), "upserted": "[" + ",".join(changed) + "]"},
        )
        return len(topics)

    def topic_register(self, ts: int, topic: str, queues: dict[str, QD]) -> None:
        written = []
        for name, q in queues.items():
            if name not in self.brokers:
                break
            self._set_queue(topic, name, q)
            self.digests.pop(name, None)
            written.append(f"[{orjson.dumps(topic).decode()},{qd_json(name, q)}]")
        if written:
            self.sink(
                ts, EventKind.TOPIC_REGISTER, {"topic": topic, "upserted": "[" + ",".join(written) + "]"}
            )

    def topic_delete(self, ts: int, topic: str) -> None:
        names = sorted(self.queues.get(topic, {}))
        for name in names:
            self._drop_queue(topic, name)
            self.digests.pop(name, None)
        if names:
            self.sink(
                ts, EventKind.TOPIC_DELETE, {"topic": topic, "cluster": "", "brokerNames": _names(names)}
            )

    def kv_put(self, ts: int, namespace: str, key: str, value: str) -> None:
        # As lua/kvPut-3.lua logs it: the value's length and SHA-1, never the value.
        data = value.encode()
        self.sink(
            ts,
            EventKind.KV_PUT,
            {
                "namespace": namespace,
                "key": key,
                "valueBytes": str(len(data)),
                "valueSha1": hashlib.sha1(data).hexdigest(),
            },
        )
