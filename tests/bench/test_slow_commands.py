"""``bench.scale.slow``: the longest Redis command of a phase is the fleet's, never one the harness
sent itself to read or reset the SLOWLOG (a RESET of 3,000 entries once took 25.5 ms)."""

from __future__ import annotations

from redis.asyncio import Redis

from bench.scale.slow import SlowCommands
from tests.redis_server import local_redis

BUSY_LUA = "local i = 0 while i < 200000 do i = i + 1 end return i"


async def test_a_phase_counts_the_fleets_commands_not_the_harness_reading_the_log() -> None:
    with local_redis() as url:
        redis = Redis.from_url(url)
        try:
            slow = SlowCommands.of(redis, threshold_us=0)  # every command is logged
            await slow.start()  # CONFIG SET twice, then SLOWLOG RESET: all logged
            await redis.set("k", "v")
            await redis.hset("h", "f", "v")
            first = await slow.collect()
            await redis.eval(BUSY_LUA, 0)
            second = await slow.collect()  # the log now starts with the first collect's RESET
            raw = await redis.slowlog_get(-1)
        finally:
            await redis.aclose()
    assert first["logged"] == 2
    assert first["command"] in {"set", "hset"}
    assert second["logged"] == 1
    assert second["command"].startswith("eval")
    assert second["top_ms"] == [second["ms"]]
    # what it left out is there: the second collect's own RESET, logged after it ran
    assert [bytes(e["command"]).split()[0].lower() for e in raw] == [b"slowlog"]
