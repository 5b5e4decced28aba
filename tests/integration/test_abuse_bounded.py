"""The abuse of issue 11, against a real worker process: memory stays bounded.

100 connections each sending 10 MB of a frame they never finish, then 20 PUT_KV_CONFIG of 15 MB
values: the worker's peak RSS (VmHWM) stays within a generous bound over its start-up size, the
refused connections are closed, and Redis' memory does not grow with the refused values."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from pathlib import Path

import orjson
from redis.asyncio import Redis

from namesrv.sim.client import RemotingClient
from namesrv.store.keyspace import Keyspace
from tests.integration.test_lifecycle import Worker

MIB = 1024 * 1024
PARTIAL = 10 * MIB
# Peak RSS over start-up: the 64 MiB partial-frame budget, the decoder's copies of one 16 MiB
# frame at a time, allocator slack. Without the limits the same abuse took a worker to 1.29 GB.
RSS_BOUND = 200 * MIB


def rss(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"{field} not in /proc/{pid}/status")


async def hold_partial_frame(host: str, port: int, chunk: bytes) -> bool:
    """Send 10 MB of a frame that declares 12 MB, then wait; True when the worker closed us."""
    reader, writer = await asyncio.open_connection(host, port)
    header = orjson.dumps({"code": 105, "flag": 0, "language": "JAVA", "opaque": 1, "version": 479})
    try:
        writer.write(struct.pack(">ii", 12 * MIB, len(header)) + header)
        for _start in range(0, PARTIAL, len(chunk)):
            writer.write(chunk)
            await writer.drain()
        return await asyncio.wait_for(reader.read(1), 3) == b""
    except (ConnectionError, TimeoutError):
        return True
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_partial_frames_and_big_kv_values_keep_memory_bounded(
    redis_url: str, namespace: str, tmp_path: Path, redis: Redis
) -> None:
    worker = Worker({"NAMESRV_REDIS_URL": redis_url, "NAMESRV_NAMESPACE": namespace}, tmp_path)
    await worker.start()
    assert worker.proc is not None
    pid = worker.proc.pid
    try:
        start_rss = rss(pid)
        redis_before = int((await redis.info("memory"))["used_memory"])

        chunk = b"x" * MIB
        closed = await asyncio.gather(
            *(hold_partial_frame("127.0.0.1", worker.remoting, chunk) for _ in range(100))
        )
        # The budget holds 6 frames of 10 MB at most; every other connection was closed.
        assert sum(closed) >= 94

        async with await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as c:
            for i in range(20):
                reply = await c.invoke(100, {"namespace": "NS", "key": f"k{i}", "value": "v" * (15 * MIB)})
                assert (reply.code, reply.remark) == (
                    1,
                    f"KV value is {15 * MIB} bytes; the maximum is 65536 (kvValueMaxBytes)",
                )
            assert (await c.invoke(106)).code == 0  # still serving

        peak = rss(pid, "VmHWM")
        redis_after = int((await redis.info("memory"))["used_memory"])
        print(
            f"worker RSS at start {start_rss / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB; "
            f"Redis used_memory {redis_before / MIB:.1f} -> {redis_after / MIB:.1f} MiB"
        )
        assert peak - start_rss < RSS_BOUND
        assert redis_after - redis_before < 4 * MIB
        assert await redis.xlen(Keyspace(namespace).events) == 0
    finally:
        code, output = await worker.stop()
    assert code == 0, output
    assert "refusing" not in output  # no connection was refused for maxConnections
    assert "(partialFramesMaxBytes " in output
