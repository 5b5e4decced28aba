"""Route reads that share connections (store/script_pipe.py), against a real redis-server process
that the tests stop, flush and restart."""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from namesrv.domain.errors import StoreUnavailable
from namesrv.store.keyspace import Keyspace
from namesrv.store.redis_client import close_client, make_client
from namesrv.store.registry_store import RegistryStore
from namesrv.store.script_pipe import BATCH_CALLS, LANES, ScriptPipe
from namesrv.store.scripts import ScriptRegistry, discover, parse_script
from tests.polling import eventually
from tests.redis_process import RedisProcess

ECHO = """--[[
KEYS[1] any key
ARGV: [1] a word; 'boom' fails
Returns: {ARGV[1], KEYS[1]}
]]
if ARGV[1] == 'boom' then return redis.error_reply('boom asked for') end
return {ARGV[1], KEYS[1]}
"""


@pytest.fixture
async def client(redis_process: RedisProcess) -> AsyncIterator[Redis]:
    redis = make_client(redis_process.url)
    yield redis
    await close_client(redis)


@pytest.fixture
async def pipe(client: Redis) -> AsyncIterator[ScriptPipe]:
    scripts = ScriptRegistry(client, {"echo": parse_script("echo-1.lua", ECHO)})
    await scripts.preload()
    piped = ScriptPipe(client, scripts)
    yield piped
    await piped.close()


def connections(redis: Redis) -> int:
    pool = redis.connection_pool
    return len(pool._available_connections) + len(pool._in_use_connections)


async def test_calls_made_together_share_one_connection_and_each_gets_its_own_reply(
    pipe: ScriptPipe, client: Redis
) -> None:
    replies = await asyncio.gather(
        *(pipe.call("echo", [f"k{i}"], [f"w{i}"], 5.0) for i in range(BATCH_CALLS))
    )
    assert replies == [[f"w{i}", f"k{i}"] for i in range(BATCH_CALLS)]
    assert connections(client) == 1
    assert await pipe.call("echo", ["k"], ["again"], 5.0) == ["again", "k"]
    assert connections(client) == 1


async def test_calls_leave_nothing_for_the_garbage_collector(pipe: ScriptPipe) -> None:
    async def rounds() -> None:
        for i in range(100):
            assert await pipe.call("echo", ["k"], [f"one-{i}"], 5.0) == [f"one-{i}", "k"]
        for i in range(10):
            together = await asyncio.gather(*(pipe.call("echo", ["k"], [f"{i}-{j}"], 5.0) for j in range(20)))
            assert together == [[f"{i}-{j}", "k"] for j in range(20)]

    await rounds()  # connections made, lazy imports done
    gc.collect()
    # A pass that had to open a connection (on a busy machine more batches can be in flight at
    # once than in the warm-up) finds the cycles redis-py leaves when the server refuses its
    # CLIENT SETINFO: set-up, not calls. A leak of the calls themselves shows in every pass.
    found = []
    for _ in range(3):
        gc.disable()
        try:
            await rounds()
            found.append(gc.collect())
        finally:
            gc.enable()
        if found[-1] == 0:
            break
    assert found[-1] == 0, found


async def test_more_calls_than_a_batch_holds_leave_in_batches_on_other_connections(
    pipe: ScriptPipe, client: Redis, redis_process: RedisProcess
) -> None:
    count = BATCH_CALLS * 2 + 1
    redis_process.signal(signal.SIGSTOP)  # every batch is still out when the next one leaves
    try:
        calls = [asyncio.ensure_future(pipe.call("echo", ["k"], [f"w{i}"], 5.0)) for i in range(count)]
        await asyncio.sleep(0.05)
        assert pipe.batches_in_flight == 3
    finally:
        redis_process.signal(signal.SIGCONT)
    assert await asyncio.gather(*calls) == [[f"w{i}", "k"] for i in range(count)]
    assert connections(client) == 3


async def test_calls_beyond_the_lanes_wait_for_one_and_leave_together(
    pipe: ScriptPipe, client: Redis
) -> None:
    waves = []
    for wave in range(LANES + 3):  # each wave is one turn of the loop: a batch of its own
        waves.append(
            [asyncio.ensure_future(pipe.call("echo", ["k"], [f"{wave}-{i}"], 5.0)) for i in range(5)]
        )
        await asyncio.sleep(0)
    for wave, calls in enumerate(waves):
        assert await asyncio.gather(*calls) == [[f"{wave}-{i}", "k"] for i in range(5)]
    assert connections(client) <= LANES


async def test_an_error_reply_fails_its_own_call_and_no_other(pipe: ScriptPipe, client: Redis) -> None:
    words = ["a", "boom", "c", "d"]
    replies = await asyncio.gather(
        *(pipe.call("echo", ["k"], [w], 5.0) for w in words), return_exceptions=True
    )
    assert replies[0] == ["a", "k"] and replies[2] == ["c", "k"] and replies[3] == ["d", "k"]
    assert isinstance(replies[1], ResponseError) and "boom asked for" in str(replies[1])
    assert await pipe.call("echo", ["k"], ["e"], 5.0) == ["e", "k"]
    assert connections(client) == 1  # an error reply leaves the connection in step


async def test_a_flushed_script_is_loaded_again(pipe: ScriptPipe, client: Redis) -> None:
    assert await pipe.call("echo", ["k"], ["before"], 5.0) == ["before", "k"]
    await client.script_flush()
    assert await pipe.call("echo", ["k"], ["after"], 5.0) == ["after", "k"]


async def test_a_stalled_redis_fails_a_call_at_its_deadline_and_its_late_reply_reaches_nobody(
    pipe: ScriptPipe, redis_process: RedisProcess
) -> None:
    assert await pipe.call("echo", ["k"], ["warm"], 5.0) == ["warm", "k"]
    redis_process.signal(signal.SIGSTOP)
    try:
        # the deadline is a timer of the event loop, on its clock (uvloop's lags the real one by
        # as much as the turn of the loop has run so far, and counts whole ms: 8244.668 - 8244.368
        # is 0.29999... in floating point, so the bound allows for the rounding, not for a ms)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await pipe.call("echo", ["k"], ["old"], 0.3)
        assert loop.time() - started >= 0.3 - 1e-9
        # nobody waits for that batch any more: it stops, Redis still stopped, and frees its lane
        await eventually(lambda: pipe.batches_in_flight == 0, timeout=3.0)
    finally:
        redis_process.signal(signal.SIGCONT)
    # The connection that carried "old" was closed with its batch: the next call must read its
    # own reply, never the late one.
    assert await pipe.call("echo", ["k"], ["new"], 5.0) == ["new", "k"]


async def test_a_restarted_redis_fails_the_waiting_batch_with_a_connection_error(
    pipe: ScriptPipe, redis_process: RedisProcess
) -> None:
    assert await pipe.call("echo", ["k"], ["warm"], 5.0) == ["warm", "k"]
    await redis_process.stop()
    with pytest.raises(RedisConnectionError):
        await pipe.call("echo", ["k"], ["down"], 5.0)
    await redis_process.start()
    assert await pipe.call("echo", ["k"], ["up"], 5.0) == ["up", "k"]  # loaded again: NOSCRIPT


async def test_connections_kept_across_a_restart_are_replaced_without_failing_a_call(
    pipe: ScriptPipe, client: Redis, redis_process: RedisProcess
) -> None:
    waves = []
    redis_process.signal(signal.SIGSTOP)  # no batch ends before the last leaves: one connection each
    try:
        for wave in range(LANES):
            waves.append(
                [asyncio.ensure_future(pipe.call("echo", ["k"], [f"{wave}-{i}"], 5.0)) for i in range(3)]
            )
            await asyncio.sleep(0.01)
    finally:
        redis_process.signal(signal.SIGCONT)
    for wave, calls in enumerate(waves):
        assert await asyncio.gather(*calls) == [[f"{wave}-{i}", "k"] for i in range(3)]
    assert connections(client) == LANES
    await redis_process.stop()
    await redis_process.start()  # every kept connection is closed now, and the script gone
    for attempt in range(LANES + 1):
        assert await pipe.call("echo", ["k"], [f"after-{attempt}"], 5.0) == [f"after-{attempt}", "k"]


async def test_the_store_reads_routes_through_a_restart_and_fails_a_stall_within_its_timeout(
    client: Redis, redis_process: RedisProcess
) -> None:
    scripts = ScriptRegistry(client, discover())
    await scripts.preload()
    store = RegistryStore(client, Keyspace("pipe"), scripts, 1000, "w1", timeout_s=0.4)
    try:
        assert store.pipe is not None
        snap = await store.route("T", with_order=False)
        assert snap.broker_datas == [] and snap.queue_datas == []
        await redis_process.stop()
        await redis_process.start()  # empty, no scripts: the idle connection is dead
        snap = await store.route("T", with_order=False)  # retried on a new connection
        assert snap.broker_datas == []
        redis_process.signal(signal.SIGSTOP)
        try:
            with pytest.raises(StoreUnavailable, match="no answer within 400 ms"):
                await store.route("T", with_order=False)
        finally:
            redis_process.signal(signal.SIGCONT)
        assert (await store.route("T", with_order=False)).broker_datas == []
    finally:
        await store.close()
