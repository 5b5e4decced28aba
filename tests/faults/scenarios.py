"""The fault scenarios: each runs real processes through one fault under load and returns figures.

``Lengths.short()`` is the form ``make test`` runs (test_faults.py asserts on its figures);
``Lengths.full()`` is ``make faults`` (python -m tests.faults), which prints the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from support.ports import free_port
from tests.faults.harness import (
    ABSENT,
    COLD_TOPICS,
    HOT_TOPICS,
    LOOKUP_TIMEOUT,
    STALENESS_BOUND,
    TRUTH_EVERY,
    Brokers,
    Fleet,
    RedisNode,
    Sample,
    SentinelSet,
    Worker,
    fleet,
    is_stale,
    metric_sum,
    metric_value,
    now,
    probe_cold,
    redis_host_port,
    scrape,
    scratch,
    sentinel_set,
    worker_environ,
)
from tests.faults.proxy import ProxyThread

QUIET_AFTER_EMPTY = 2.5  # s brokers stay quiet after Redis restarted empty (> the 2 s bound)

OUTAGE_AFTER_CHANGE_S = 0.3  # a stall or blackhole starts this long after broker-b changed every hot route


@dataclass(frozen=True)
class Lengths:
    warmup: float  # s of load before the fault (routes cached, truth known)
    hold: float  # s a worker stays dead / Redis stays down
    stall: float  # s of SIGSTOP
    period: float  # s between a broker's registrations
    settle: float  # s of load after recovery
    proxy_phase: float  # s of each proxy fault
    quiet: float  # s of load after a fault whose figures assert no agreement bound

    @staticmethod
    def short() -> Lengths:
        return Lengths(warmup=1.0, hold=1.0, stall=5.0, period=1.0, settle=2.5, proxy_phase=1.5, quiet=0.5)

    @staticmethod
    def full() -> Lengths:
        return Lengths(warmup=3.0, hold=5.0, stall=5.0, period=2.0, settle=6.0, proxy_phase=5.0, quiet=2.0)


@dataclass
class Figures:
    scenario: str
    fault_s: float = 0.0
    lookups: int = 0
    failed: int = 0  # lookups answered with an error or not at all (live workers only)
    error_window_s: float = 0.0  # wall time covered by failed lookups
    stale: int = 0  # answers Redis did not hold within the staleness bound
    max_cached_ms: float = 0.0  # slowest hot-topic lookup from the fault to the end
    p99_cached_ms: float = 0.0
    cold_max_ms: float | None = None  # slowest lookup of a never-cached topic during the fault
    cold_codes: dict[int, int] | None = None
    agree_s: float | None = None  # recovery -> last wrong or failed answer on any worker
    refused_registrations: int = 0
    missing_at_recovery: int | None = None  # (topic, broker) pairs Redis lacked when it came back
    lost_registrations: int | None = None  # the same, one period after recovery
    extra: dict[str, Any] = field(default_factory=dict)


def _brokers_in(d: str | None) -> set[str] | None:
    if d is None:
        return None
    if d == ABSENT:
        return set()
    return {b["brokerName"] for b in orjson.loads(d)["brokerDatas"]}


def _failed(s: Sample) -> bool:
    return s.code not in (0, 17)


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)]


def _queues_of_b(d: str | None) -> int | str | None:
    if d is None or d == ABSENT:
        return d
    return next(
        (q["writeQueueNums"] for q in orjson.loads(d)["queueDatas"] if q["brokerName"] == "broker-b"), None
    )


def _brief(d: str | None) -> str | None:
    """A route answer in a few characters: its broker names and broker-b's write queues."""
    if d is None or d == ABSENT:
        return d
    names = ",".join(sorted(n.removeprefix("broker-") for n in _brokers_in(d) or ()))
    return f"{names}/b{_queues_of_b(d)}"


def _final_check(f: Fleet) -> dict[str, Any]:
    """broker-b's queue count in its last registration (the script), in the truth worker's last
    sample, and in each worker's last answer: which side a stale count comes from."""
    b = next(x for x in f.brokers.sims if x.name == "broker-b")
    last = [r for r in f.brokers.records if r.broker == "broker-b"][-1]
    out: dict[str, Any] = {"script": 4 + b.counter % 2 * 4 if last.code == 0 else f"refused {last.code}"}
    out["truth"] = _queues_of_b(f.truth.samples[-1].routes[HOT_TOPICS[0]]) if f.truth.samples else None
    for w in f.workers:
        answers = [s for s in f.driver.samples if s.worker == w.name and s.topic == HOT_TOPICS[0]]
        out[w.name] = _queues_of_b(answers[-1].digest) if answers else None
    return out


def _stale_detail(f: Fleet, stale: list[Sample], t0: float) -> dict[str, Any]:
    """Where stale answers came from, on the fault's clock (s): the first few of the first stale
    topic, what the truth read of that topic around them, and broker-b's registrations meanwhile."""
    topic = stale[0].topic if stale else HOT_TOPICS[0]
    first = [s for s in stale if s.topic == topic][:6]
    if not first:
        return {}
    lo, hi = first[0].sent - 1.0, first[-1].replied + 1.0
    truth: list[tuple[float, float, str | None]] = []
    for t in f.truth.samples:
        if lo <= t.start <= hi:
            q = _brief(t.routes.get(topic))
            if not truth or truth[-1][2] != q:
                truth.append((round(t.start - t0, 3), round(t.end - t0, 3), q))
    window = [t for t in f.truth.samples if lo <= t.start <= hi]
    return {
        "truth_samples": len(window),
        "truth_last": round(window[-1].end - t0, 3) if window else None,
        "topic": topic,
        "stale": [
            (s.worker, round(s.sent - t0, 3), round(s.replied - t0, 3), _brief(s.digest)) for s in first
        ],
        "truth_changes": truth,
        "broker_b": [
            (round(r.at - t0, 3), round(r.latency, 3), r.code, r.queues)
            for r in f.brokers.records
            if r.broker == "broker-b" and lo - 2.0 <= r.at <= hi
        ],
    }


async def analyze(
    f: Fleet,
    name: str,
    t_fault: float,
    t_recover: float,
    *,
    ignore: Callable[[Sample], bool] = lambda s: False,
) -> Figures:
    """Figures over the samples from the fault to now (samples ``ignore`` drops count nowhere)."""
    t_end = now()
    await f.truth.wait_past(t_end + TRUTH_EVERY)
    samples = [s for s in f.driver.all_samples() if t_fault <= s.sent < t_end and not ignore(s)]
    failed = [s for s in samples if _failed(s)]
    stale = [s for s in samples if is_stale(s, f.truth)]
    cached = [s.latency * 1000 for s in samples if s.code == 0]
    bad_after = [s for s in samples if s.sent >= t_recover and (_failed(s) or s in stale)]
    by_worker: dict[str, int] = {}
    for s in stale:
        by_worker[s.worker] = by_worker.get(s.worker, 0) + 1
    figs = Figures(
        scenario=name,
        fault_s=round(t_recover - t_fault, 2),
        lookups=len(samples),
        failed=len(failed),
        error_window_s=round(_union_length([(s.sent, s.replied) for s in failed]), 2),
        stale=len(stale),
        max_cached_ms=round(max([s.latency * 1000 for s in samples], default=0.0), 1),
        p99_cached_ms=round(_p99(cached), 1),
        agree_s=round(max((s.replied for s in bad_after), default=t_recover) - t_recover, 2),
        refused_registrations=sum(1 for r in f.brokers.records if t_fault <= r.at < t_end and r.code != 0),
    )
    late_failures = [s for s in bad_after if _failed(s)][:6]
    if late_failures:  # failures after the fault ended: what they said, on the fault's clock
        figs.extra["failed_after"] = [
            (s.worker, round(s.sent - t_fault, 3), round(s.latency, 3), s.code, s.remark[:90])
            for s in late_failures
        ]
    if by_worker:  # stale on every worker at once would rather point at the truth worker
        figs.extra["stale_by_worker"] = by_worker
        # On the fault's clock: whether stale answers belong to the fault's first moment only.
        figs.extra["stale_sent_s"] = [
            round(min(s.sent for s in stale) - t_fault, 3),
            round(max(s.sent for s in stale) - t_fault, 3),
        ]
        figs.extra["final_broker_b_queues"] = _final_check(f)
        figs.extra["stale_detail"] = _stale_detail(f, stale, t_fault)
    expected = len(HOT_TOPICS) * len(Brokers.NAMES)
    for sample in f.truth.samples:
        if sample.start >= t_recover and all(d is not None for d in sample.routes.values()):
            present = sum(len(_brokers_in(d) or ()) for d in sample.routes.values())
            figs.missing_at_recovery = expected - present
            break
    present_now = 0
    for topic in HOT_TOPICS:
        names = await f.truth.brokers_of(topic)
        present_now += len(names or ())
    figs.lost_registrations = expected - present_now
    return figs


# ---- one Redis, behind the fault proxy: a sequence of faults on one fleet -------------------------


@dataclass
class Rig:
    f: Fleet
    node: RedisNode
    proxy: ProxyThread
    lengths: Lengths


def _codes(samples: list[Sample]) -> dict[int, int]:
    out: dict[int, int] = {}
    for s in samples:
        out[s.code] = out.get(s.code, 0) + 1
    return dict(sorted(out.items()))


def _cold_start(rig: Rig, topics: tuple[str, ...]) -> asyncio.Task[list[Sample]]:
    """Probes of never-cached topics, in the background: the fault ends on time even when they hang."""
    return asyncio.ensure_future(probe_cold(rig.f.workers, topics))


async def _cold(probes: asyncio.Task[list[Sample]], figs: Figures) -> None:
    cold = await asyncio.wait_for(probes, 60)
    figs.cold_max_ms = round(max(s.latency for s in cold) * 1000, 1)
    figs.cold_codes = _codes(cold)
    figs.extra["cold_remarks"] = sorted({s.remark[:60] for s in cold})


def _during(rig: Rig, figs: Figures, t0: float, t1: float) -> None:
    """Hot-topic lookups sent while the fault lasted: the static-stability figures."""
    during = [s for s in rig.f.driver.all_samples() if t0 <= s.sent < t1]
    figs.extra["during_max_ms"] = round(max((s.latency for s in during), default=0) * 1000, 1)
    figs.extra["during_p99_ms"] = round(_p99([s.latency * 1000 for s in during]), 1)
    figs.extra["during_failed"] = sum(1 for s in during if _failed(s))
    figs.extra["during_lookups"] = len(during)


async def phase_kill_worker(rig: Rig) -> Figures:
    """kill -9 one worker under load; the other keeps serving; restart it on the same ports."""
    f, lengths = rig.f, rig.lengths
    victim = f.workers[1]
    t_fault = now()
    await victim.kill9()
    await asyncio.sleep(lengths.hold)
    t_restart = now()
    victim.spawn()
    await victim.wait_serving()
    t_recover = now()
    await asyncio.sleep(lengths.quiet + 1.0)
    first = next((s for s in f.driver.samples if s.worker == victim.name and s.sent >= t_recover), None)

    def dead_window(s: Sample) -> bool:
        return s.worker == victim.name and s.sent < t_recover

    figs = await analyze(f, "kill -9 one worker", t_fault, t_recover, ignore=dead_window)
    figs.extra |= {
        "survivor_failed": sum(
            1 for s in f.driver.samples if s.worker != victim.name and s.sent >= t_fault and _failed(s)
        ),
        "restart_to_ready_s": round(t_recover - t_restart, 2),
        "first_answer_code": None if first is None else first.code,
        "first_answer_stale": None if first is None else is_stale(first, f.truth),
        "lost_with_victim": sum(1 for s in f.driver.samples if dead_window(s) and s.sent >= t_fault),
    }
    return figs


async def phase_proxy(rig: Rig) -> list[Figures]:
    """Faults between the workers and Redis (the truth worker goes direct): added latency,
    connection resets, a blackhole."""
    f, proxy, phase = rig.f, rig.proxy, rig.lengths.proxy_phase
    rows: list[Figures] = []
    # The worst moment for latency to begin: just after broker-b's registration changed every hot
    # route, before the worker behind the proxy has read that change (see the latency test).
    await f.brokers.registered("broker-b", timeout=3 * rig.lengths.period + 2.0)
    t0 = now()
    proxy.latency(0.05)  # +50 ms each way on every Redis call
    await asyncio.sleep(phase)
    proxy.heal()
    t1 = now()
    await asyncio.sleep(rig.lengths.quiet)
    rows.append(await analyze(f, "proxy: +50 ms each way to Redis", t0, t1))

    t0 = now()
    while now() - t0 < phase:
        proxy.reset()
        await asyncio.sleep(0.5)
    t1 = now()
    await asyncio.sleep(rig.lengths.settle)  # agreement within 2 s is asserted on this one
    rows.append(await analyze(f, "proxy: all Redis connections reset every 0.5 s", t0, t1))

    await _clear_of_a_change(rig)
    t0 = now()
    proxy.blackhole(True)  # packets dropped, connections stay open
    await asyncio.sleep(0.3)
    probes = _cold_start(rig, COLD_TOPICS[3:6])
    await asyncio.sleep(phase - (now() - t0))
    proxy.heal()
    t1 = now()
    await asyncio.sleep(rig.lengths.settle)
    row = await analyze(f, f"proxy: blackhole {phase:g} s", t0, t1)
    await _cold(probes, row)
    _during(rig, row, t0, t1)
    rows.append(row)
    # Connections whose replies were dropped stay stuck unless the worker gives up on them
    # (what agree_s above shows); end them, and let lookups stuck on them time out, so the next
    # fault starts from a clean fleet.
    proxy.reset()
    for _ in range(int(LOOKUP_TIMEOUT / 0.1)):
        if not any(sent < t1 for _, sent in f.driver.pending.values()):
            break
        await asyncio.sleep(0.1)
    return rows


async def _clear_of_a_change(rig: Rig) -> None:
    """Wait until the next fault is not within a few ms of broker-b's registration, which changes
    every hot route. Redis becoming unreachable in that window finds the worker that took the
    registration without the changed routes (it fails their lookups fast as not cached until
    Redis is back) and the others not yet told of the change (they serve the routes as before):
    docs/operations.md gives that window and one run's figures. Phases line up with the brokers'
    periods, so without this a fault fell into that window by chance, and its row measured the
    window instead of the fault."""
    await rig.f.brokers.registered("broker-b", timeout=3 * rig.lengths.period + 2.0)
    await asyncio.sleep(OUTAGE_AFTER_CHANGE_S)


async def phase_stall(rig: Rig) -> Figures:
    """Redis SIGSTOPped: cached lookups should keep answering, uncached ones fail fast; all
    recover after SIGCONT."""
    lengths = rig.lengths
    await _clear_of_a_change(rig)
    t_fault = now()
    rig.node.signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(0.5)
        probes = _cold_start(rig, COLD_TOPICS[:3])
        registration = asyncio.ensure_future(rig.f.brokers.register(2))  # one outside its period
        await asyncio.sleep(1.5)
        up_during = metric_value(await scrape(rig.f.workers[0]), "namesrv_redis_up")
        await asyncio.sleep(lengths.stall - (now() - t_fault))
    finally:
        rig.node.signal(signal.SIGCONT)
    t_recover = now()
    await asyncio.sleep(lengths.settle)
    after = await scrape(rig.f.workers[0])
    row = await analyze(rig.f, f"Redis SIGSTOP {lengths.stall:g} s", t_fault, t_recover)
    row.extra["redis_up_during"] = up_during
    row.extra["redis_up_after"] = metric_value(after, "namesrv_redis_up")
    row.extra["outage_lookups"] = metric_value(after, "namesrv_route_cache_lookups_total", 'result="outage"')
    await _cold(probes, row)
    _during(rig, row, t_fault, t_recover)
    reg = await asyncio.wait_for(registration, 60)
    row.extra["stall_registration"] = {
        "code": reg.code,
        "remark": reg.remark[:80],
        "ms": round(reg.latency * 1000, 1),
    }
    return row


HEAL_REPLAYED = 'namesrv_heal_replays_total{outcome="replayed"}'


async def _heal_replays(rig: Rig) -> float:
    """Registrations the workers replayed into Redis so far (the heal, #27)."""
    return sum([metric_sum(await scrape(w), HEAL_REPLAYED) or 0.0 for w in rig.f.workers])


async def phase_redis_restart(rig: Rig, *, empty: bool) -> Figures:
    """Redis goes away under load and comes back on the same port: from its AOF (kill -9,
    appendonly everysec), or empty (SHUTDOWN NOSAVE with its data gone, as a Redis without
    persistence restarts)."""
    node = rig.node
    name = "Redis restart empty (SHUTDOWN NOSAVE)" if empty else "Redis kill -9, restart from AOF everysec"
    if empty:
        # Go just after the truth has read broker-b's latest change. A change that lands a moment
        # before Redis goes away is served from memory through the outage (rightly: Redis held
        # it), but a truth that never read it would count every such answer as stale.
        reg = await rig.f.brokers.registered("broker-b", timeout=3 * rig.lengths.period + 2.0)
        await rig.f.truth.wait_past(reg.at + reg.latency)
    else:
        await asyncio.sleep(1.1)  # everysec: what brokers wrote a second ago is on disk
    replayed_before = await _heal_replays(rig)
    t_fault = now()
    if empty:
        rig.f.brokers.hold_off(3600)  # until told below
        await node.shutdown_nosave()
        node.wipe()
    else:
        await node.kill9()
    await asyncio.sleep(min(rig.lengths.hold, 1.0))
    await node.start()
    t_recover = now()
    if empty:
        # Real brokers come back within their 30 s period; hold them off for longer than the
        # agreement bound, so what shows is whether the workers noticed Redis lost its data.
        rig.f.brokers.hold_off(QUIET_AFTER_EMPTY)
        await asyncio.sleep(QUIET_AFTER_EMPTY)
        t_brokers = now()
    await asyncio.sleep(rig.lengths.settle)
    t_end = now()
    figs = await analyze(rig.f, name, t_fault, t_recover)
    figs.extra["down_s"] = round(t_recover - t_fault, 2)
    figs.extra["redis_resets"] = [
        metric_sum(await scrape(w), "namesrv_redis_resets_total") for w in rig.f.workers
    ]
    figs.extra["heal_replayed"] = await _heal_replays(rig) - replayed_before
    if empty:
        # agreement while the table is empty (the brokers held off), then after they are back
        empty_window = [
            s
            for s in rig.f.driver.all_samples()
            if t_recover <= s.sent < t_brokers and (_failed(s) or is_stale(s, rig.f.truth))
        ]
        figs.extra["old_routes_served"] = sum(1 for s in empty_window if s.digest not in (None, ABSENT))
        figs.agree_s = round(max((s.replied for s in empty_window), default=t_recover) - t_recover, 2)
        # The fleet heals Redis from the registrations its workers kept (the brokers held off):
        # when the truth shows every hot topic again, and what clients were told before that.
        healed_at = next(
            (
                s.start
                for s in rig.f.truth.samples
                if s.start >= t_recover and all(s.routes.get(t) not in (None, ABSENT) for t in HOT_TOPICS)
            ),
            None,
        )
        figs.extra["healed_s"] = None if healed_at is None else round(healed_at - t_recover, 2)
        served = [s for s in rig.f.driver.all_samples() if t_recover <= s.sent < t_brokers]
        figs.extra["not_exist_answers"] = sum(1 for s in served if s.digest == ABSENT)
        figs.extra["stale_after_heal"] = sum(
            1
            for s in served
            if healed_at is not None and s.sent > healed_at + STALENESS_BOUND and is_stale(s, rig.f.truth)
        )
        figs.extra["agree_after_brokers_back_s"] = round(
            max(
                (
                    s.replied
                    for s in rig.f.driver.all_samples()
                    if t_brokers <= s.sent < t_end and (_failed(s) or is_stale(s, rig.f.truth))
                ),
                default=t_brokers,
            )
            - t_brokers,
            2,
        )
    return figs


async def single_redis(lengths: Lengths) -> list[Figures]:
    """One redis-server (AOF everysec) behind the fault proxy, one fleet, the faults in turn."""
    with scratch() as root:
        node = RedisNode(root / "redis", aof=True)
        await node.start()
        proxy = ProxyThread(*redis_host_port(node.url))
        try:
            async with fleet(proxy.url, root, truth_url=node.url, period=lengths.period) as f:
                rig = Rig(f, node, proxy, lengths)
                await asyncio.sleep(lengths.warmup)
                rows = [await phase_kill_worker(rig)]
                rows += await phase_proxy(rig)
                rows.append(await phase_stall(rig))
                rows.append(await phase_redis_restart(rig, empty=False))
                rows.append(await phase_redis_restart(rig, empty=True))
                return rows
        finally:
            proxy.close()
            node.stop()


async def sentinel_failover(lengths: Lengths, *, kill_master: bool = False) -> list[Figures]:
    """Sentinel failover under load: SENTINEL FAILOVER, then (kill_master) kill -9 of the new
    master, which Sentinel must notice by itself (down-after-milliseconds 1000)."""
    with scratch() as root:
        async with sentinel_set(root) as s, fleet(s.url, root, period=lengths.period) as f:
            await asyncio.sleep(max(lengths.warmup, 1.1))  # routes cached, replica caught up, AOF written
            rows = [await _failover(s, f, lengths, "Sentinel: SENTINEL FAILOVER", kill=False)]
            if kill_master:
                rows.append(await _failover(s, f, lengths, "Sentinel: kill -9 the master", kill=True))
            return rows


async def _failover(s: SentinelSet, f: Fleet, lengths: Lengths, name: str, *, kill: bool) -> Figures:
    old = await s.master_port()
    t_fault = now()
    if kill:
        await (s.master if s.master.port == old else s.replica).kill9()
    else:
        await s.failover()
    deadline = now() + 30
    while now() < deadline:
        with contextlib.suppress(Exception):
            if await s.master_port() != old:
                break
        await asyncio.sleep(0.05)
    t_recover = now()
    await asyncio.sleep(lengths.settle)
    figs = await analyze(f, name, t_fault, t_recover)
    figs.extra["promoted"] = await s.master_port() != old
    figs.extra["failover_s"] = round(t_recover - t_fault, 2)
    return figs


async def start_without_redis(wait: float = 8.0) -> dict[str, Any]:
    """A worker whose Redis is not there: does it listen, and what do /livez and /readyz say?"""
    with scratch() as root:
        dead = RedisNode(root / "never")  # a free port nobody listens on
        worker = Worker("nostart", dead.url, "faults-start", root, {})
        worker.spawn()
        out: dict[str, Any] = {"livez": None, "readyz": None, "readyz_body": "", "listen_s": None}
        started = now()
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
                while now() - started < wait:
                    try:
                        async with session.get(worker.http + "/livez") as resp:
                            out["livez"] = resp.status
                        async with session.get(worker.http + "/readyz") as resp:
                            out["readyz"] = resp.status
                            out["readyz_body"] = await resp.text()
                        out["listen_s"] = round(now() - started, 2)
                        break
                    except (aiohttp.ClientError, OSError, TimeoutError):
                        await asyncio.sleep(0.1)
            out["alive"] = worker.proc is not None and worker.proc.alive()
        finally:
            await worker.stop()
        return out


async def wrong_password(deadline: float = 10.0) -> dict[str, Any]:
    """A worker given a wrong Redis password: exit code and what it printed."""
    with scratch() as root:
        node = RedisNode(root / "redis", extra=("--requirepass", "right-secret"))
        await node.start()
        try:
            url = f"redis://:wrong-secret@127.0.0.1:{node.port}/0"
            return await _run_with_deadline(url, deadline)
        finally:
            node.stop()


def _worker_env(url: str) -> dict[str, str]:
    return {
        **worker_environ(),
        "NAMESRV_REDIS_URL": url,
        "NAMESRV_NAMESPACE": "faults-auth",
        "NAMESRV_HTTP_PORT": str(free_port()),
        "NAMESRV_REMOTING_PORT": str(free_port()),
        "NAMESRV_LISTEN_HOST": "127.0.0.1",
        "NAMESRV_LOG_LEVEL": "WARNING",
    }


async def _run_with_deadline(url: str, deadline: float) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "namesrv",
        env=_worker_env(url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), deadline)
        code: int | None = proc.returncode
    except TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
        code = None  # still running at the deadline
    text = out.decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return {
        "exit_code": code,
        "lines": len(lines),
        "first_line": lines[0][:200] if lines else "",
        "mentions_secret": "wrong-secret" in text,
    }
