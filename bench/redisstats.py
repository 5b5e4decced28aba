"""What Redis itself says: the duration of every Lua call (SLOWLOG), per-command totals
(INFO commandstats), memory (MEMORY STATS) and the server clock.

SLOWLOG durations are the time Redis spent executing the command, network excluded: for EVALSHA
that is exactly how long the script blocked every other client. Scripts are named by matching
their SHA against the project's Lua library (``namesrv.store.scripts.discover``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from bench.stats import percentile

LUA_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")


def script_names() -> dict[str, str]:
    """SHA-1 -> script name for the scripts in this checkout, as sent to Redis 6 and, for the
    ``@master-only`` ones, as declared on Redis 7 (store.scripts.MASTER_ONLY)."""
    import hashlib

    from namesrv.store.scripts import MASTER_ONLY, discover

    names: dict[str, str] = {}
    for name, script in discover().items():
        names[script.sha] = name
        names[hashlib.sha1((MASTER_ONLY + script.source).encode()).hexdigest()] = name
    return names


@dataclass(frozen=True)
class LuaCall:
    script: str
    micros: int
    at: int  # unix s


class Slowlog:
    """Capture every command slower than a threshold between ``start()`` and ``collect()``."""

    def __init__(self, redis: Redis, names: dict[str, str]) -> None:
        self.redis = redis
        self.names = names

    async def start(self, threshold_us: int, max_len: int = 200_000) -> None:
        await self.redis.config_set("slowlog-max-len", max_len)
        await self.redis.config_set("slowlog-log-slower-than", threshold_us)
        await self.redis.slowlog_reset()

    async def stop(self) -> None:
        await self.redis.config_set("slowlog-log-slower-than", -1)

    async def collect(self, *, reset: bool = True) -> list[LuaCall]:
        """The Lua calls logged since the last reset (other commands are left out)."""
        entries: list[dict[str, Any]] = await self.redis.slowlog_get(-1)
        if reset:
            await self.redis.slowlog_reset()
        calls: list[LuaCall] = []
        for entry in entries:
            command = entry["command"]
            words = (command.decode(errors="replace") if isinstance(command, bytes) else str(command)).split(
                " "
            )
            if not words or words[0].lower() not in LUA_COMMANDS:
                continue
            ident = words[1] if len(words) > 1 else "?"
            name = self.names.get(
                ident.lower(), ident if words[0].lower().startswith("fcall") else f"sha:{ident[:8]}"
            )
            calls.append(LuaCall(name, int(entry["duration"]), int(entry["start_time"])))
        return calls


def lua_summary(calls: list[LuaCall]) -> dict[str, dict[str, Any]]:
    """Per script: calls, percentiles, longest, calls of 1 ms or more and total microseconds;
    plus ``*`` over all scripts (with ``longest_script``)."""
    by_script: dict[str, list[int]] = {}
    for call in calls:
        by_script.setdefault(call.script, []).append(call.micros)
    out: dict[str, dict[str, Any]] = {}
    for name, micros in sorted(by_script.items()):
        out[name] = _durations(micros)
    if calls:
        out["*"] = _durations([c.micros for c in calls])
        out["*"]["longest_script"] = max(calls, key=lambda c: c.micros).script
    return out


def _durations(micros: list[int]) -> dict[str, Any]:
    ordered = sorted(micros)
    return {
        "calls": len(ordered),
        "p50_us": percentile(ordered, 50),
        "p99_us": percentile(ordered, 99),
        "p999_us": percentile(ordered, 99.9),
        "max_us": ordered[-1],
        "over_1ms": sum(1 for m in ordered if m >= 1000),
        "total_us": sum(ordered),
    }


async def commandstats(redis: Redis) -> dict[str, dict[str, float]]:
    """INFO commandstats: command -> {calls, usec, usec_per_call}."""
    info: dict[str, Any] = await redis.info("commandstats")
    out: dict[str, dict[str, float]] = {}
    for key, value in info.items():
        if key.startswith("cmdstat_") and isinstance(value, dict):
            out[key[len("cmdstat_") :]] = {
                "calls": float(value.get("calls", 0)),
                "usec": float(value.get("usec", 0)),
                "usec_per_call": float(value.get("usec_per_call", 0)),
            }
    return out


async def reset_stats(redis: Redis) -> None:
    await redis.config_resetstat()


async def server_time_ms(redis: Redis) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def memory(redis: Redis) -> dict[str, int]:
    """used_memory (everything) and dataset.bytes (keys and values only: no client buffers,
    no allocator overhead of the server itself)."""
    info: dict[str, Any] = await redis.info("memory")
    stats: dict[str, Any] = await redis.memory_stats()
    dataset = stats.get("dataset.bytes", 0)
    return {"used_memory": int(info["used_memory"]), "dataset_bytes": int(dataset)}


async def key_memory(redis: Redis, key: str) -> int:
    value = await redis.memory_usage(key, samples=0)
    return int(value or 0)


async def redis_version(redis: Redis) -> str:
    info: dict[str, Any] = await redis.info("server")
    return str(info.get("redis_version", "?"))
