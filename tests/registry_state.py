"""What a registry holds, for tests that check a refusal changed nothing."""

from __future__ import annotations

from redis.asyncio import Redis

from namesrv.store.keyspace import Keyspace


async def snapshot(redis_url: str, namespace: str, *, events: bool = True) -> dict[str, object]:
    """Every key of the namespace with its DUMP (equal snapshots: nothing changed), but the fleet's
    own bookkeeping, which running workers update every second whatever clients do: the workers'
    beats ({ns}:workers) and the fleet's last beat (the lastBeat field of {ns}:meta).
    ``events=False`` leaves the change log out too."""
    k = Keyspace(namespace)
    raw = Redis.from_url(redis_url)
    try:
        keys = sorted([key.decode() async for key in raw.scan_iter(match=f"{{{namespace}}}:*")])
        out: dict[str, object] = {}
        for key in keys:
            if key == k.workers or (key == k.events and not events):
                continue
            if key == k.meta:
                out[key] = {f: v for f, v in (await raw.hgetall(key)).items() if f != b"lastBeat"}
            else:
                out[key] = await raw.dump(key)
        return out
    finally:
        await raw.aclose()
