"""The fault suite, short form: real redis-server, Sentinel, worker processes and the fault proxy,
with the bounds of issue 10's "Done when" asserted on the figures (``make faults`` prints them at
full length).

Bounds are the issue's, with margins for a loaded 2-core machine where a bound is a time: the
agreement bound is 2 s as stated; "cached lookups under 100 ms" is asserted on the 99th percentile
(the maximum by the client's 3 s timeout: no hang); "uncached lookups fail within about 1 s"
is asserted as under 2 s (the 1 s deadline plus 1 s of scheduling margin).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from support.quiet_gc import quiet_gc
from tests.faults import scenarios
from tests.faults.scenarios import Figures, Lengths
from tests.polling import scaled

pytestmark = [
    pytest.mark.faults,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]

# The fault suite's bounds are the fleet's promises on a quiet 2-core machine; a busy one (other
# test workers, a CPU hog) stretches every one of them, so they scale with the load factor like
# every deadline of the tests (NAMESRV_TEST_LOAD_FACTOR, tests/polling.py). `make faults` at
# full length on a quiet machine is where the figures themselves are judged.
AGREE_BOUND_S = scaled(2.0)
FAIL_FAST_MS = scaled(2000.0)
CLIENT_TIMEOUT_MS = scaled(3000.0)  # the RocketMQ client's default: a lookup past it has hung
OUTAGE_REMARK = "route unavailable: Redis unreachable"


def _run(coro: Any) -> Any:
    import uvloop

    return uvloop.run(coro)


Run = tuple[list[Figures], list[Figures], dict[str, Any], dict[str, Any]]


async def _everything() -> Run:
    # The harness (load driver, brokers, truth sampler and the proxy thread) is one Python
    # process: a full collection over everything pytest has loaded would stall all of them at
    # once and be read as the fleet's figures. Collect rarely, as the workers do.
    quiet_gc()
    # One fleet at a time: on a 2-core machine two fleets at once (six workers, two sets of
    # brokers and drivers, the proxy thread sharing this process's GIL with the drivers) slow
    # Redis replies past the stall threshold, and the figures then measure the machine.
    single = await scenarios.single_redis(Lengths.short())
    sentinel = await scenarios.sentinel_failover(Lengths.short())
    # The start-up checks time a process start: alone, so the scenarios' load does not decide it.
    startup = await scenarios.start_without_redis(wait=10.0)
    password = await scenarios.wrong_password(deadline=10.0)
    return single, sentinel, startup, password


@pytest.fixture(scope="module")
def _run_all() -> Iterator[Run]:
    # quiet_gc() changes this whole process: give the collector back as it was, so the tests
    # that run after these on the same (xdist) worker see Python's usual one.
    thresholds = gc.get_threshold()
    try:
        out: Run = _run(_everything())
        path = os.environ.get("FAULTS_FIGURES")
        if path:  # the figures behind the assertions, for a report
            rows = [dataclasses.asdict(r) for r in out[0] + out[1]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"rows": rows, "startup": out[2], "password": out[3]}, f, indent=2)
        yield out
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.fixture(scope="module")
def single(_run_all: Run) -> dict[str, Figures]:
    return {_key(row.scenario): row for row in _run_all[0]}


def _key(name: str) -> str:
    for key, marker in (
        ("kill", "kill -9 one worker"),
        ("latency", "+50 ms"),
        ("resets", "reset"),
        ("blackhole", "blackhole"),
        ("stall", "SIGSTOP"),
        ("aof", "AOF"),
        ("empty", "empty"),
    ):
        if marker in name:
            return key
    return name


@pytest.fixture(scope="module")
def sentinel(_run_all: Run) -> Figures:
    return _run_all[1][0]


@pytest.fixture(scope="module")
def startup(_run_all: Run) -> dict[str, Any]:
    return _run_all[2]


@pytest.fixture(scope="module")
def bad_password(_run_all: Run) -> dict[str, Any]:
    return _run_all[3]


# ---- kill -9 a worker ----


def test_kill9_the_other_worker_keeps_serving_and_the_restarted_one_answers_right(
    single: dict[str, Figures],
) -> None:
    f = single["kill"]
    assert f.extra["survivor_failed"] == 0
    assert f.failed == 0  # the restarted worker included, from its first answer on
    assert f.stale == 0
    assert f.extra["first_answer_code"] == 0
    assert f.extra["first_answer_stale"] is False
    assert f.lost_registrations == 0


# ---- the proxy between workers and Redis ----


# Latency and resets change what a worker knows of Redis from one poll to the next: the first
# polls after 50 ms are added look like a stall until the worker has learnt the new round trip,
# and a reset can land between two reads of one lookup. A handful of failed lookups in the
# moment of change is tolerated (1 in 200); nothing stale and nothing lost is not.
MAX_FAILED_SHARE = 1 / 200


# When the round trip jumps from about 1 ms to 100 ms at once, the first poll sent into the
# latency is outstanding past the stall threshold (50 ms) with no other reply since: the worker
# cannot tell it from a stalled Redis and answers from memory until that poll returns. A change
# Redis committed just before (a broker registering as the latency begins) is then served late
# for about one round trip; from the first slow reply on, the worker knows the new round trip
# and lookups wait for reads instead. So stale answers may only come from the onset: the stall
# threshold, two slow round trips and the staleness bound, with scheduling margin.
LATENCY_ONSET_S = scaled(0.5)


def test_added_latency_fails_almost_nothing_and_serves_stale_only_at_its_onset(
    single: dict[str, Figures],
) -> None:
    f = single["latency"]
    assert f.failed <= f.lookups * MAX_FAILED_SHARE
    if f.stale:
        first, last = f.extra["stale_sent_s"]
        assert 0.0 <= first <= last < LATENCY_ONSET_S
    assert f.lost_registrations == 0


def test_connection_resets_fail_almost_nothing_and_serve_nothing_stale(single: dict[str, Figures]) -> None:
    f = single["resets"]
    assert f.failed <= f.lookups * MAX_FAILED_SHARE
    assert (f.stale, f.lost_registrations) == (0, 0)
    assert f.agree_s is not None and f.agree_s <= AGREE_BOUND_S


CACHED_P99_MS = 100.0  # "cached lookups answer under 100 ms"; measured p99 is about 1 ms


def _cached_lookups_keep_answering(f: Figures) -> None:
    # Every registration of broker-b changes all the hot routes: if the fault begins right after
    # one, none of them is cached any more, and each such lookup is read within
    # redisTimeoutMillis (1 s) or failed; the rest answer from memory. So the 99th percentile is
    # held to the 100 ms and the maximum to "no hang": a stale wait then a read, two
    # deadlines at most.
    assert f.extra["during_p99_ms"] < CACHED_P99_MS
    assert f.extra["during_max_ms"] < CLIENT_TIMEOUT_MS


def test_blackhole_cached_lookups_keep_answering(single: dict[str, Figures]) -> None:
    _cached_lookups_keep_answering(single["blackhole"])


def test_blackhole_uncached_lookups_fail_fast_with_a_clear_remark(single: dict[str, Figures]) -> None:
    f = single["blackhole"]
    assert f.cold_codes == {1: 6}
    assert all(r.startswith(OUTAGE_REMARK) for r in f.extra["cold_remarks"])
    assert f.cold_max_ms is not None and f.cold_max_ms < FAIL_FAST_MS


def test_blackhole_every_worker_agrees_within_2s_after_it_ends(single: dict[str, Figures]) -> None:
    f = single["blackhole"]
    # Both workers are cut off, and brokers register through them, so nothing changes in Redis
    # meanwhile: what they serve from memory is what Redis holds. (The phase starts clear of a
    # broker's registration; a blackhole within one poll after one is the known window of docs/operations.md.)
    assert f.stale == 0
    assert f.agree_s is not None and f.agree_s <= AGREE_BOUND_S
    assert f.lost_registrations == 0


# ---- Redis SIGSTOP ----


def test_stall_cached_lookups_answer_under_100ms(single: dict[str, Figures]) -> None:
    _cached_lookups_keep_answering(single["stall"])


def test_stall_uncached_lookups_fail_within_about_1s(single: dict[str, Figures]) -> None:
    f = single["stall"]
    assert f.cold_codes == {1: 6}
    assert all(r.startswith(OUTAGE_REMARK) for r in f.extra["cold_remarks"])
    assert f.cold_max_ms is not None and f.cold_max_ms < FAIL_FAST_MS


def test_stall_registration_is_refused_fast_naming_redis(single: dict[str, Figures]) -> None:
    reg = single["stall"].extra["stall_registration"]
    assert reg["code"] == 1
    assert "redis" in reg["remark"].lower()
    assert reg["ms"] < FAIL_FAST_MS


def test_stall_is_seen_in_the_metrics(single: dict[str, Figures]) -> None:
    f = single["stall"]
    assert f.extra["redis_up_during"] == 0
    assert f.extra["redis_up_after"] == 1
    assert f.extra["outage_lookups"] is not None and f.extra["outage_lookups"] > 0


def test_stall_everything_recovers_after_sigcont(single: dict[str, Figures]) -> None:
    f = single["stall"]
    assert f.stale == 0
    assert f.agree_s is not None and f.agree_s <= AGREE_BOUND_S
    assert f.lost_registrations == 0


# ---- Redis restarts ----


def test_restart_from_aof_loses_no_registration_and_workers_agree_within_2s(
    single: dict[str, Figures],
) -> None:
    f = single["aof"]
    assert f.missing_at_recovery == 0  # AOF everysec kept every broker
    assert f.lost_registrations == 0
    assert f.agree_s is not None and f.agree_s <= AGREE_BOUND_S


def test_restart_empty_is_healed_by_the_workers_and_no_client_is_told_a_topic_is_gone(
    single: dict[str, Figures],
) -> None:
    f = single["empty"]
    # The table really was emptied: Redis came back with a new data set, and what came back came
    # from the workers' replays, at least one per broker (a second loss noticed during the heal,
    # a gap after the new data set, starts it over; how much a first look after the restart sees
    # depends on who is quicker, the heal or the look).
    assert f.extra["heal_replayed"] >= 3, f
    # The brokers are held off: the workers' kept registrations bring every route back (#27),
    # and meanwhile clients get the routes from before the loss or "not ready", never "no topic".
    assert f.extra["healed_s"] is not None and f.extra["healed_s"] <= AGREE_BOUND_S, f
    assert f.extra["not_exist_answers"] == 0, f
    assert f.agree_s is not None and f.agree_s <= AGREE_BOUND_S, f
    # Once healed, nothing Redis did not hold (a route missing a broker longer than the bound).
    assert f.extra["stale_after_heal"] == 0, f
    assert f.extra["redis_resets"] is not None and all(
        r is not None and r >= 1 for r in f.extra["redis_resets"]
    )


def test_restart_empty_brokers_next_period_brings_every_registration_back(single: dict[str, Figures]) -> None:
    assert single["empty"].lost_registrations == 0


def test_restart_empty_workers_follow_changes_again_once_brokers_are_back(single: dict[str, Figures]) -> None:
    # before the worker changes the change feed stays blocked on the vanished stream: routes that
    # change after the restart are missed until the 30 s feed check
    assert single["empty"].extra["agree_after_brokers_back_s"] <= AGREE_BOUND_S


# ---- Sentinel ----


def test_sentinel_failover_loses_no_registration(sentinel: Figures) -> None:
    assert sentinel.extra["promoted"] is True
    assert sentinel.missing_at_recovery == 0
    assert sentinel.lost_registrations == 0


# Sentinel promotes the replica before it demotes the old master: in between, a worker still
# connected to the old master reads a table that the brokers (through the other worker, already on
# the new master) no longer write to, and serves it. When the old master is demoted its stream is
# replaced, the worker sees its last entry gone and starts over. The stale answers of that window
# are a figure of the table in docs/operations.md; the bound here is on how long it lasts.
FAILOVER_AGREE_BOUND_S = scaled(5.0)


def test_sentinel_failover_every_worker_agrees_soon_after(sentinel: Figures) -> None:
    assert sentinel.agree_s is not None and sentinel.agree_s <= FAILOVER_AGREE_BOUND_S


# ---- start-up ----


def test_worker_started_without_redis_is_live_and_says_why_it_is_not_ready(startup: dict[str, Any]) -> None:
    assert startup["livez"] == 200
    assert startup["readyz"] == 503
    assert "redis" in startup["readyz_body"].lower()
    assert startup["alive"] is True


def test_wrong_redis_password_exits_nonzero_with_one_line(bad_password: dict[str, Any]) -> None:
    assert bad_password["exit_code"] not in (None, 0)
    assert bad_password["lines"] == 1
    assert bad_password["mentions_secret"] is False
