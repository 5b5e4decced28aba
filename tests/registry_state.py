"""What a registry holds, for tests that check a refusal changed nothing."""

from __future__ import annotations

from redis.asyncio import Redis

from namesrv.store.keyspace import Keyspace

SCAN_COUNT = 10_000


async def drop_namespace(redis_url: str, namespace: str) -> None:
    """Every key of the namespace gone: for tests that leave a registry too big to keep beside
    every other test's in the session's Redis."""
    raw = Redis.from_url(redis_url)
    try:
        batch: list[bytes] = []
        async for key in raw.scan_iter(match=f"{{{namespace}}}:*", count=SCAN_COUNT):
            batch.append(key)
            if len(batch) >= 1000:
                await raw.unlink(*batch)
                batch.clear()
        if batch:
            await raw.unlink(*batch)
    finally:
        await raw.aclose()


async def snapshot(redis_url: str, namespace: str, *, events: bool = True) -> dict[str, object]:
    """Every key of the namespace with its DUMP (equal snapshots: nothing changed), but the fleet's
    own bookkeeping, which running workers update every second whatever clients do: the workers'
    beats ({ns}:workers) and the fleet's last beat (the lastBeat field of {ns}:meta).
    ``events=False`` leaves the change log out too."""
    k = Keyspace(namespace)
    raw = Redis.from_url(redis_url)
    try:
        # the session's Redis holds every test's keys (100,000-topic registrations among them):
        # SCAN's default 10 a call made one snapshot tens of thousands of round trips
        scanned = raw.scan_iter(match=f"{{{namespace}}}:*", count=SCAN_COUNT)
        keys = sorted([key.decode() async for key in scanned])
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
