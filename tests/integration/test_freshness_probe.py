"""The freshness probe against a real Redis, with the worker's GIL held for real: a worker too busy
to run its own poll thread still knows that nothing changed, and never claims to know a change it
has not applied (issue 26)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Mapping
from functools import partial

import pytest
from redis.asyncio import Redis

from namesrv.registry import freshness_probe
from namesrv.registry.changefeed import ChangeFeed
from namesrv.registry.freshness_probe import FreshnessProbe
from namesrv.store.health import RedisHealth
from namesrv.store.keyspace import Keyspace
from namesrv.store.scripts import ScriptRegistry
from tests.polling import eventually

POLL_S = 0.025
HOLD_S = 1.0  # the probe polls every 25 ms: dozens of chances, even on a busy machine
_LIBC = ctypes.PyDLL(None)  # PyDLL: a call through it keeps the GIL, like a long C routine


def hold_gil(seconds: float) -> None:
    """Keep this process's GIL for ``seconds``: no other thread of it runs any Python meanwhile."""
    _LIBC.usleep(int(seconds * 1_000_000))


class Applied:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    async def on_event(self, kind: str, fields: Mapping[str, str]) -> None:
        self.kinds.append(kind)

    async def on_reset(self, reason: str) -> None:
        pass

    def on_recovered(self, since: float) -> None:
        pass


@pytest.fixture
def keys(namespace: str) -> Keyspace:
    return Keyspace(namespace)


def probed_feed(redis: Redis, redis_url: str, keys: Keyspace, *, poll_interval: float) -> ChangeFeed:
    """A change feed with a freshness probe polling every ``POLL_S``; the feed's own thread
    polls every ``poll_interval``."""
    probe = FreshnessProbe(redis_url, keys.namespace, interval=POLL_S, timeout_s=1.0)
    return ChangeFeed(
        ScriptRegistry(redis),
        keys,
        health=RedisHealth(),
        poll_interval=poll_interval,
        timeout_s=1.0,
        stall_s=0.05,
        probe=probe,
    )


@pytest.fixture
async def feed(redis: Redis, redis_url: str, keys: Keyspace) -> AsyncIterator[tuple[ChangeFeed, Applied]]:
    await redis.xadd(keys.events, {"kind": "before"})
    # The feed's own thread polls once at the start, then only when asked: whatever moves its
    # knowledge on later is the probe's doing.
    feed = probed_feed(redis, redis_url, keys, poll_interval=60.0)
    probe = feed.probe
    assert probe is not None
    applied = Applied()
    feed.subscribe(applied)
    await feed.start()
    try:
        await eventually(lambda: feed.known_at is not None and probe.reading() is not None, timeout=30)
        yield feed, applied
    finally:
        await feed.stop()


async def test_a_worker_holding_its_gil_still_knows_nothing_changed(feed: tuple[ChangeFeed, Applied]) -> None:
    changefeed, _ = feed
    vouched = changefeed.probe_vouched
    held_from = time.monotonic()
    hold_gil(HOLD_S)
    known, own = changefeed.known_at, changefeed._known_at
    # The poll thread could not even read the clock while the GIL was held (and rests between
    # polls for a minute here): only the probe can know the state of Redis during the hold.
    assert own is not None and own < held_from
    assert known is not None and known > held_from
    assert changefeed.probe_vouched == vouched + 1


async def test_the_probe_never_vouches_for_a_change_the_worker_has_not_applied(
    feed: tuple[ChangeFeed, Applied], redis_url: str, keys: Keyspace
) -> None:
    changefeed, applied = feed
    # Another process commits a change every 20 ms and prints when each had been committed.
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(
            f"""
            import sys, time, redis
            r = redis.Redis.from_url({redis_url!r})
            print("ready", flush=True)
            end = time.monotonic() + {HOLD_S + 1.0}
            while time.monotonic() < end:
                r.xadd({keys.events!r}, {{"kind": "during"}})
                print(time.monotonic(), flush=True)
                time.sleep(0.02)
            """
        ),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert writer.stdout is not None
        assert await writer.stdout.readline() == b"ready\n"
        await asyncio.sleep(0.2)  # commits under way
        hold_gil(HOLD_S)
        known = changefeed.known_at
        count = applied.kinds.count("during")
        out, _ = await writer.communicate()
    finally:
        if writer.returncode is None:
            writer.kill()
            await writer.wait()
    committed = [float(line) for line in out.split()]
    assert known is not None
    # Every change committed before `known` must have been applied by then.
    assert sum(1 for t in committed if t < known) <= count
    assert len(committed) > count  # changes were committed during the hold, unapplied


async def test_the_probe_rests_while_the_worker_keeps_up(
    redis: Redis, redis_url: str, keys: Keyspace
) -> None:
    feed = probed_feed(redis, redis_url, keys, poll_interval=POLL_S)
    probe = feed.probe
    assert probe is not None
    await feed.start()
    try:
        await eventually(lambda: feed.known_at is not None and probe.alive(), timeout=30)
        await asyncio.sleep(2.0)  # 80 polls if it did not rest
        reading = probe.reading()
    finally:
        await feed.stop()
    # None: not a single poll. A worker on a busy machine may fall behind now and then; 80 or
    # more would mean no rest at all.
    assert reading is None or reading.polls < 20


async def test_a_probe_that_died_is_started_again(
    feed: tuple[ChangeFeed, Applied], monkeypatch: pytest.MonkeyPatch
) -> None:
    changefeed, _ = feed
    probe = changefeed.probe
    assert probe is not None and probe.alive()
    monkeypatch.setattr(freshness_probe, "RESTART_AFTER_S", 0.0)
    first = probe.reading()
    assert probe._proc is not None
    os.kill(probe._proc.pid, signal.SIGKILL)
    await eventually(lambda: probe.restarts == 1 and probe.alive(), timeout=30)
    await eventually(lambda: (probe.reading() or first) != first, timeout=30)


async def test_the_probe_ends_with_its_worker_and_never_prints_the_url(
    capfd: pytest.CaptureFixture[str],
) -> None:
    secret = "s3cr3t-probe-password"
    probe = FreshnessProbe(f"redis://:{secret}@127.0.0.1:1/0", "probe-test", interval=POLL_S, timeout_s=0.2)
    probe.start()
    try:
        await eventually(lambda: "Redis did not answer" in capfd.readouterr().err, timeout=30)
    finally:
        probe.stop()
    assert not probe.alive()
    assert secret not in capfd.readouterr().err


def test_the_probe_dies_with_a_killed_worker(redis_url: str) -> None:
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time
                from namesrv.registry.freshness_probe import FreshnessProbe
                probe = FreshnessProbe({redis_url!r}, "probe-test", interval=0.025, timeout_s=1.0)
                probe.start()
                print(probe._proc.pid, flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    probe_pid = int(worker.stdout.readline())
    worker.kill()
    worker.wait()
    worker.stdout.close()

    def gone() -> bool:
        try:
            os.kill(probe_pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{probe_pid}/stat") as stat:  # a zombie waiting for init counts as gone
            return stat.read().split(")")[-1].split()[0] == "Z"

    deadline = time.monotonic() + 30
    while not gone():
        assert time.monotonic() < deadline, "the probe outlived its worker"
        time.sleep(0.05)


def _knows(feed: ChangeFeed) -> bool:
    return feed.known_at is not None


async def test_stopping_while_the_thread_polls_flat_out_leaves_no_thread_failing(
    redis: Redis, redis_url: str, keys: Keyspace
) -> None:
    # The poll thread writes its knowledge to the memory shared with the probe: the probe (and
    # that memory) must go only after the thread has ended. Unhandled thread exceptions fail the
    # test (pytest's threadexception plugin, warnings as errors).
    for _ in range(5):
        feed = probed_feed(redis, redis_url, keys, poll_interval=0.0)
        probe = feed.probe
        assert probe is not None
        await feed.start()
        await eventually(partial(_knows, feed), timeout=30)
        await feed.stop()
        assert not probe.alive() and probe.reading() is None
