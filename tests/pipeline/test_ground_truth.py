"""Ground truth: a scripted fleet on real workers → export → the job, every table checked
against the script's own clock.

Two workers (the real aiohttp app with its remoting listener and its 200 ms expiry sweep) share
one Redis; brokers speak the RocketMQ remoting protocol to them. Time is compressed: heartbeat
timeouts of 1-3 s, a script of about 5 s.

Tolerance: every action the script takes is bracketed by two reads of the Redis clock, one
before the request and one after its reply. The service stamps each event with the Redis
clock inside the Lua script that runs between those two reads, so an event's time must lie in
its action's bracket: no fixed tolerance, the bound is the request's own round trip (a few ms,
more on a loaded machine). Events the script does not cause directly are bounded by what it
can observe: a dropped connection's ``close`` lies between the abort and the moment another
worker no longer returns the broker's route; an expiry ends the session at its deadline, which
is the last refresh's time plus the timeout (exact, from the refresh's bracket).
Durations are checked against the difference of their two brackets.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
from pyspark.sql import Row, SparkSession
from redis.asyncio import Redis

from namesrv.config import Settings
from namesrv.domain.codes import RequestCode
from namesrv.events.export import Exporter
from namesrv.keys import REMOTING
from namesrv.pipeline import io
from namesrv.pipeline.job import PipelineConfig, run
from namesrv.pipeline.report import render
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from tests.conftest import close_client, start_client

pytestmark = [pytest.mark.spark, pytest.mark.redis, pytest.mark.slow, pytest.mark.timeout(300)]
CLUSTER = "GtCluster"
TOPIC_NOT_EXIST = 17


@dataclass(frozen=True)
class Bracket:
    before: int
    after: int

    def holds(self, t: int | None, offset: int = 0) -> bool:
        return t is not None and self.before + offset <= t <= self.after + offset


@dataclass
class Script:
    redis: Redis
    t0: float = 0.0
    marks: dict[str, Bracket] = field(default_factory=dict)

    async def now_ms(self) -> int:
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def at(self, second: float, label: str, action: Callable[[], Awaitable[Any]]) -> None:
        """Run ``action`` at ``second`` of the script and remember its bracket under ``label``."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self.t0 + second - loop.time()))
        before = await self.now_ms()
        await action()
        self.marks[label] = Bracket(before, await self.now_ms())


def _broker(conn: RemotingClient, name: str, n: int, timeout_ms: int, broker_id: int = 0) -> SimBroker:
    # every broker also serves TBW102, as real brokers do (a first registration with a single
    # topic is refused, rule R7)
    topics = topic_configs([f"T-{name}", "TBW102"])
    addr = f"127.0.0.{n}:{10911 + broker_id}"
    return SimBroker(conn, CLUSTER, name, addr, broker_id=broker_id, topics=topics, timeout_ms=timeout_ms)


async def _ok(reply: Awaitable[Any]) -> None:
    assert (await reply).code == 0


async def _route_code(addr: str, topic: str) -> int:
    async with await RemotingClient.connect(addr) as c:
        return (await c.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code


async def drive(script: Script, addr1: str, addr2: str) -> tuple[dict[str, SimBroker], list[RemotingClient]]:
    """The fleet's five seconds. Refreshes are REGISTER_BROKER (a reply to bracket; with an
    unchanged data version they touch no queue). Returns the brokers and the connections, to
    close after the export (a closed connection removes its brokers)."""
    c1, c2, cd = [await RemotingClient.connect(a) for a in (addr1, addr2, addr2)]
    admin = await RemotingClient.connect(addr1)
    b = {
        "steady": _broker(c1, "gt-steady", 1, 3000),
        "silent": _broker(c1, "gt-silent", 2, 1000),
        "clean": _broker(c2, "gt-clean", 3, 3000),
        "drop": _broker(cd, "gt-drop", 4, 3000),
        "late": _broker(c2, "gt-late", 5, 2000),
        "perm": _broker(c1, "gt-perm", 6, 3000),
        "flap": _broker(c2, "gt-flap", 7, 3000),
        "master": _broker(c1, "gt-ms", 8, 3000),
        "slave": _broker(c2, "gt-ms", 8, 3000, broker_id=1),
    }
    s = script
    s.t0 = asyncio.get_running_loop().time()
    plan: list[tuple[float, str, Callable[[], Awaitable[Any]]]] = []
    for key in ("steady", "silent", "clean", "drop", "late", "perm", "master", "slave"):
        plan.append((0.0, f"{key}@0", b[key].register))
    for i, t in enumerate((0.25, 0.75, 1.25, 1.75)):
        plan.append((t, f"flap-up{i}", b["flap"].register))
        if i < 3:
            plan.append((t + 0.25, f"flap-down{i}", lambda: _ok(b["flap"].unregister())))
    for t in (0.5, 1.0):
        plan.append((t, f"silent@{t}", b["silent"].register))
    for t in (0.5, 1.0, 2.6, 3.0, 3.5, 4.0, 4.5):  # one gap of 1.6 s = 0.8 x its 2 s timeout
        plan.append((t, f"late@{t}", b["late"].register))
    for t in (1.0, 2.0, 3.0, 4.0):
        keys = ["steady", "perm", "slave"] + (["master"] if t < 3.5 else []) + (["flap"] if t > 1.75 else [])
        plan.extend((t, f"{key}@{t}", b[key].register) for key in keys)
    plan.append(
        (
            1.5,
            "wipe",
            lambda: _ok(admin.invoke(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "gt-perm"})),
        )
    )
    plan.append(
        (
            3.0,
            "add",
            lambda: _ok(admin.invoke(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "gt-perm"})),
        )
    )
    plan.append((2.0, "clean-down", lambda: _ok(b["clean"].unregister())))
    plan.append((3.5, "master-down", lambda: _ok(b["master"].unregister())))

    async def abort() -> None:
        """A crashed broker (connection reset); done when the other worker no longer routes it."""
        cd.abort()
        for _ in range(200):
            if await _route_code(addr1, "T-gt-drop") == TOPIC_NOT_EXIST:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the dropped broker's route did not go")

    plan.append((2.5, "drop-abort", abort))
    plan.append((4.6, "steady-last", b["steady"].register))
    for t, label, action in sorted(plan, key=lambda p: p[0]):
        await s.at(t, label, action)
    await s.at(4.7, "last", b["steady"].register)  # the log's last event
    return b, [c1, c2, admin]


def by(rows: list[Row], *keys: str) -> dict[tuple[Any, ...], list[Row]]:
    out: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


async def test_every_table_matches_the_scripted_fleet(  # noqa: C901 - one scripted run, every table checked
    settings: Settings, redis: Redis, redis_url: str, namespace: str, spark: SparkSession, tmp_path: Path
) -> None:
    w1 = await start_client(settings)
    w2 = await start_client(dataclasses.replace(settings))
    script = Script(redis)
    conns: list[RemotingClient] = []
    export = tmp_path / "export"
    try:
        a1 = f"127.0.0.1:{w1.app[REMOTING].port}"
        a2 = f"127.0.0.1:{w2.app[REMOTING].port}"
        b, conns = await drive(script, a1, a2)
        # export at once, while every broker is still connected and before the next deadline
        client = sync_redis.Redis.from_url(redis_url)
        try:
            result = Exporter(client, Keyspace(namespace).events, export).run()
            assert result.exported > 0 and not result.gap_found
        finally:
            client.close()
    finally:
        for conn in conns:
            await conn.aclose()
        await close_client(w1)
        await close_client(w2)
    m = script.marks
    cfg = PipelineConfig(inputs=(str(export),), output=str(tmp_path / "tables"), bucket_ms=60_000)
    summary = run(spark, cfg)
    assert summary.rejected == 0
    assert m["last"].holds(summary.last_ts)
    end = summary.last_ts
    assert end is not None

    def table(name: str) -> list[Row]:
        from namesrv.pipeline.job import TABLES

        return io.read_table(spark, cfg.output, name, TABLES[name]).collect()

    # ---- sessions: how each member's sessions started and ended ----
    sessions = by(table("sessions"), "broker_addr")
    addr = {k: v.addr for k, v in b.items()}

    def one(key: str) -> Row:
        (s,) = sessions[(addr[key],)]
        return s

    for key in ("steady", "late", "perm", "slave"):
        s = one(key)
        assert (s["end_kind"], s["session_no"]) == ("open", 1), key
        assert m[f"{key}@0"].holds(s["start_ts"]), key
    silent = one("silent")
    assert silent["end_kind"] == "expire"
    assert silent["end_ts"] == silent["last_deadline"]
    assert m["silent@1.0"].holds(silent["end_ts"], offset=1000)  # last refresh + its 1 s timeout
    assert m["silent@1.0"].holds(silent["last_refresh_ts"])
    assert silent["refreshes"] == 3
    clean = one("clean")
    assert clean["end_kind"] == "unregister" and m["clean-down"].holds(clean["end_ts"])
    drop = one("drop")
    assert drop["end_kind"] == "close" and m["drop-abort"].holds(drop["end_ts"])
    master = one("master")
    assert master["end_kind"] == "unregister" and m["master-down"].holds(master["end_ts"])
    flap = sorted(sessions[(addr["flap"],)], key=lambda r: r["session_no"])
    assert [r["end_kind"] for r in flap] == ["unregister", "unregister", "unregister", "open"]
    for i, r in enumerate(flap):
        assert m[f"flap-up{i}"].holds(r["start_ts"])
        if i < 3:
            assert m[f"flap-down{i}"].holds(r["end_ts"])
            assert m[f"flap-down{i}"].after - m[f"flap-up{i}"].before >= r["duration_ms"]
            assert r["duration_ms"] >= m[f"flap-down{i}"].before - m[f"flap-up{i}"].after
    for s in [x for rows in sessions.values() for x in rows if x["end_kind"] == "open"]:
        assert s["end_ts"] is None and s["duration_ms"] is None  # still running

    # ---- flapping: more than 3 sessions in one hour ----
    flapping = table("flapping")
    assert [(r["broker_addr"], r["sessions"]) for r in flapping] == [(addr["flap"], 4)]

    # ---- broker_daily: removals per member ----
    daily = {r["broker_addr"]: r for r in table("broker_daily")}
    counts = {a: (r["unregisters"], r["closes"], r["expiries"], r["fenced"]) for a, r in daily.items()}
    assert counts == {
        addr["steady"]: (0, 0, 0, 0),
        addr["silent"]: (0, 0, 1, 0),
        addr["clean"]: (1, 0, 0, 0),
        addr["drop"]: (0, 1, 0, 0),
        addr["late"]: (0, 0, 0, 0),
        addr["perm"]: (0, 0, 0, 0),
        addr["flap"]: (3, 0, 0, 0),
        addr["master"]: (1, 0, 0, 0),
        addr["slave"]: (0, 0, 0, 0),
    }
    assert daily[addr["steady"]]["availability"] == 1.0

    # ---- heartbeat gaps: the late broker came to 0.8 of its timeout and survived ----
    gaps = {r["broker_addr"]: r for r in table("heartbeat_gaps")}
    late = gaps[addr["late"]]
    lo = m["late@2.6"].before - m["late@1.0"].after
    hi = m["late@2.6"].after - m["late@1.0"].before
    assert late["timeout_ms"] == 2000 and late["refreshes"] == 8 and late["late_gaps"] == 0
    assert lo <= late["max_gap_ms"] <= hi and late["at_risk"]
    assert not gaps[addr["steady"]]["at_risk"]

    # ---- topic writability ----
    unw = sorted(table("topic_unwritable"), key=lambda r: (r["topic"], r["start_ts"]))
    got = [(r["topic"], r["cause"], r["open_at_end"]) for r in unw]
    assert got == [
        ("T-gt-clean", "no_route", True),
        ("T-gt-drop", "no_route", True),
        ("T-gt-flap", "no_route", False),
        ("T-gt-flap", "no_route", False),
        ("T-gt-flap", "no_route", False),
        ("T-gt-ms", "no_live_master", True),
        ("T-gt-perm", "no_writable_queue", False),
        ("T-gt-silent", "no_route", True),  # past its deadline, then swept with its queue
    ]
    rows = by(unw, "topic")
    for r in unw:
        assert r["duration_ms"] == r["end_ts"] - r["start_ts"]
        if r["open_at_end"]:
            assert r["end_ts"] == end
    assert m["clean-down"].holds(rows[("T-gt-clean",)][0]["start_ts"])
    assert m["drop-abort"].holds(rows[("T-gt-drop",)][0]["start_ts"])
    for i, r in enumerate(rows[("T-gt-flap",)]):
        assert m[f"flap-down{i}"].holds(r["start_ts"]) and m[f"flap-up{i + 1}"].holds(r["end_ts"])
    assert m["master-down"].holds(rows[("T-gt-ms",)][0]["start_ts"])
    (perm,) = rows[("T-gt-perm",)]
    assert m["wipe"].holds(perm["start_ts"]) and m["add"].holds(perm["end_ts"])
    assert rows[("T-gt-silent",)][0]["start_ts"] == silent["end_ts"]  # from its deadline

    # ---- registry size at the end of the log ----
    size = sorted(table("registry_size"), key=lambda r: r["bucket_start_ts"])[-1]
    # names left: steady, late, perm, flap, ms (its slave); visible: those with the slave;
    # topics with a queue: theirs and TBW102 (a queue on each of the 5 names); write queues: 8
    # per queue, T-gt-perm's restored
    assert (size["clusters"], size["broker_names"], size["live_brokers"]) == (1, 5, 5)
    assert (size["topics"], size["queues"], size["write_queues"]) == (6, 10, 80)

    # ---- the events themselves ----
    events = table("events")
    kinds: dict[str, int] = {}
    for e in events:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    assert {
        k: kinds.get(k, 0) for k in ("expire", "unregister", "close", "wipePerm", "addPerm", "fenced")
    } == {
        "expire": 1,
        "unregister": 5,
        "close": 1,
        "wipePerm": 1,
        "addPerm": 1,
        "fenced": 0,
    }
    assert summary.events == result.exported == len(events)

    # ---- the report's headline says it in words ----
    text = render(spark, cfg.output, tmp_path / "report").read_text()
    for expected in (
        r"1 topic had no route for [0-9.]+ s \(broker gt-silent expired\), still at the end of the log",
        r"1 topic had no route for [0-9.]+ s \(broker gt-clean unregistered\), still at the end",
        r"1 topic had no route for [0-9.]+ s \(broker gt-drop lost its connection\), still at the end",
        r"1 topic had no writable queue for [0-9.]+ s \(broker gt-perm had its write permission wiped\)",
        r"1 topic had no live master for [0-9.]+ s, still at the end of the log",
    ):
        assert re.search(expected, text), expected
