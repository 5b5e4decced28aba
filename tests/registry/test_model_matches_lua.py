"""The pipeline's model of the registry (``pipeline/registry_model.py``, which synthesises change-log
history) against the Lua scripts themselves (#28): the same operation sequences, drawn by
Hypothesis, go through the model and through :class:`RegistryService` on a real Redis, and the
change-log entries they append must agree kind by kind and field by field.

Compared: every field the model writes, but the clock's (``ts``, ``deadline``) and ``via``; JSON
fields as values (key order and the order of lists of queues are the writers' business)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.pipeline.registry_model import QD, Registry
from namesrv.registry.service import RegistryService
from namesrv.store.changelog import upserts
from namesrv.store.keyspace import Keyspace
from namesrv.store.registry_store import RegistryStore
from namesrv.store.scripts import ScriptRegistry
from tests.builders import register

CLUSTER = "C"
# (address, broker name, broker id): a master and its slave, and another master
MEMBERS = [("127.0.0.1:10911", "b1", 0), ("127.0.0.1:10921", "b1", 1), ("127.0.0.1:10931", "b2", 0)]
TOPICS = ["T1", "T2", "T3", "T4", "T5"]
SHAPES: list[QD] = [(6, 8, 8, 0), (6, 4, 4, 0)]  # perm, read, write, topicSysFlag
IGNORED = {"ts", "deadline", "via", "queueDatas"}  # queueDatas: compared through `upserted`
JSON_FIELDS = {"brokerData", "dataVersion"}
UNORDERED = {"upserted", "removed", "brokerNames"}  # JSON lists whose order the writer picks (a flag too)

register_op = st.tuples(
    st.just("register"),
    st.integers(0, len(MEMBERS) - 1),
    st.frozensets(st.sampled_from(TOPICS), min_size=2, max_size=5),
    st.integers(0, len(SHAPES) - 1),
)
member_op = st.tuples(st.sampled_from(["heartbeat", "unregister"]), st.integers(0, len(MEMBERS) - 1))
perm_op = st.tuples(st.just("perm"), st.sampled_from(["b1", "b2"]), st.booleans())
delete_op = st.tuples(st.just("delete"), st.sampled_from(TOPICS))
operations = st.lists(st.one_of(register_op, member_op, perm_op, delete_op), min_size=1, max_size=12)


@dataclass
class Model:
    events: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    registry: Registry = field(init=False)
    versions: dict[int, tuple[int, frozenset[str], int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.registry = Registry(lambda ts, kind, fields: self.events.append((kind, dict(fields))))


def _data_version(model: Model, who: int, topics: frozenset[str], shape: int) -> int:
    """A member's dataVersion counter: the same while it sends the same table, else the next."""
    last = model.versions.get(who)
    if last is not None and last[1:] == (topics, shape):
        return last[0]
    version = (last[0] + 1) if last else 1
    model.versions[who] = (version, topics, shape)
    return version


def _normal(fields: dict[str, str], keys: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys - IGNORED:
        value = fields.get(key)
        if value is not None and key in JSON_FIELDS and value:
            out[key] = orjson.loads(value)
        elif value is not None and key == "upserted":
            out[key] = sorted(orjson.dumps(list(pair)).decode() for pair in upserts(fields))
        elif value is not None and key in UNORDERED and value.startswith("["):
            out[key] = sorted(orjson.dumps(item).decode() for item in orjson.loads(value))
        else:
            out[key] = value
    return out


async def _apply(service: RegistryService, model: Model, ops: list[Any]) -> None:
    reg = model.registry
    for op in ops:
        kind = op[0]
        if kind == "register":
            _, who, topics, shape = op
            addr, name, broker_id = MEMBERS[who]
            if broker_id and (CLUSTER, MEMBERS[who - 1][0]) not in reg.live:
                continue  # a slave only next to its live master: the model does not cover the rest
            version = _data_version(model, who, topics, shape)
            q = SHAPES[shape]
            table = {t: (q[1], q[2], q[0], q[3]) for t in sorted(topics)}  # read, write, perm, flag
            request = register(
                CLUSTER,
                name,
                addr,
                broker_id,
                table,
                counter=version,
                timestamp=version,
                ha=addr,
                timeout=30_000,
            )
            result, _ = await service.register_broker(request)
            assert result is not None and result.accepted
            reg.register(0, CLUSTER, addr, name, broker_id, {t: q for t in topics}, data_version=version)
        elif kind in ("heartbeat", "unregister"):
            addr, name, broker_id = MEMBERS[op[1]]
            if (CLUSTER, addr) not in reg.live:
                continue  # of a member not registered: the scripts change nothing, by design
            if kind == "heartbeat":
                assert await service.heartbeat(CLUSTER, addr)
                reg.heartbeat(0, CLUSTER, addr)
            else:
                assert await service.unregister_broker(CLUSTER, addr, name, broker_id)
                reg.unregister(0, CLUSTER, addr, name, broker_id)
        elif kind == "perm":
            _, name, wipe = op
            if not reg.btopics.get(name):
                continue
            await service.change_write_perm(name, wipe=wipe)
            reg.change_perm(0, name, wipe=wipe)
        elif kind == "delete":
            topic = op[1]
            if not reg.queues.get(topic):
                continue
            await service.delete_topic(topic)
            reg.topic_delete(0, topic)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
async def test_the_model_appends_what_the_scripts_append(
    ops: list[Any], redis: Redis, settings: Settings
) -> None:
    namespace = f"m-{uuid.uuid4().hex[:10]}"
    scripts = ScriptRegistry(redis)
    store = RegistryStore(redis, Keyspace(namespace), scripts, events_max_len=10000, worker_id="model")
    service = RegistryService(store, lambda: settings)
    model = Model()
    # No per-example cleanup: the namespace is the example's own, and a SCAN for its keys walks
    # every key the session's Redis holds (millions late in a full run: minutes for 150 examples).
    await _apply(service, model, ops)
    lua = [(f["kind"], f) for _, f in await redis.xrange(Keyspace(namespace).events)]
    assert [k for k, _ in lua] == [k for k, _ in model.events], ops
    for (kind, real), (_, synthetic) in zip(lua, model.events, strict=True):
        keys = set(synthetic)
        assert _normal(real, keys) == _normal(synthetic, keys), (kind, ops)
