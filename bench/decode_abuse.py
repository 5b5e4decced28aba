"""Issue #25 row 1, measured: what REGISTER_BROKER bodies make a worker process hold.

``python -m bench.decode_abuse`` starts a private Redis and one worker (``python -m namesrv``),
then, one phase after another and each with ``/livez`` probed every 50 ms:

1. 20 connections each send the issue's zip bomb (64 KB of zlib: a 63 MiB length, then 63 MiB
   of '0'), ``compressed=true``;
2. 20 connections each send a real 100,000-topic compressed body at once (distinct brokers);
3. 4 connections each send a 14.6 MB JSON body (60,000 topics, near frameMaxLength) at once.

It prints the largest real bodies it builds (100,000 topics, both layouts), and per phase the
replies, the worker's RSS (before, sampled peak, and after it settles), the decode budget's
high-water mark and the slowest ``/livez``. ``--worker-env KEY=VALUE`` sets worker options.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import struct
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.procs import Worker, start_worker, wait_http_ready
from namesrv.domain.model import DataVersion, TopicConfig
from namesrv.protocol.register_body import crc32_masked
from namesrv.sim.bodies import register_body_compressed, register_body_json
from namesrv.sim.client import RemotingClient, RemotingClientError
from support.redis_launcher import local_redis

MIB = 1 << 20
SETTLE_S = 5.0  # after a phase: long enough for the allocator trim and the brokers' removal


def rss(pid: int, field_name: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field_name} not in /proc/{pid}/status")


def issue_bomb() -> bytes:
    return zlib.compress(struct.pack(">i", 63 << 20) + b"0" * (63 << 20), 9)


def topics(n: int, name_length: int, attributes: dict[str, str]) -> dict[str, TopicConfig]:
    names = [f"business-domain-service-events-{i:06d}".ljust(name_length, "x") for i in range(n)]
    return {name: TopicConfig(name, 16, 16, 6, attributes=attributes) for name in names}


def body_sizes() -> list[str]:
    """The largest real bodies: 100,000 topics, from typical names to Java's longest."""
    lines = []
    version = DataVersion(1, 0, 1700000000000)
    for length, attributes in (
        (40, {}),
        (40, {"+message.type": "NORMAL"}),
        (64, {"+message.type": "NORMAL"}),
        (127, {"+message.type": "NORMAL", "+queue.type": "BCQ"}),
    ):
        configs = topics(100_000, length, attributes)
        compressed = register_body_compressed(configs, version)
        json_mb = len(register_body_json(configs, version)) / 1e6
        inflated_mb = len(zlib.decompress(compressed)) / 1e6
        lines.append(
            f"100,000 topics, {length}-char names, {len(attributes)} attribute(s): JSON {json_mb:.1f} MB; "
            f"compressed {len(compressed) / 1e3:.0f} KB inflating to {inflated_mb:.1f} MB"
        )
    return lines


@dataclass
class Phase:
    name: str
    replies: collections.Counter[tuple[int, str]] = field(default_factory=collections.Counter)
    livez_ms: list[float] = field(default_factory=list)
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    seconds: float = 0.0

    def report(self) -> str:
        replies = ", ".join(
            f"{n} x code {code} {remark[:90]!r}" for (code, remark), n in self.replies.items()
        )
        livez = f"max {max(self.livez_ms):.0f} ms over {len(self.livez_ms)}" if self.livez_ms else "none"
        return (
            f"[{self.name}] {self.seconds:.1f} s; replies: {replies}\n"
            f"    RSS before {self.rss_before / MIB:.0f} MiB, peak {self.rss_peak / MIB:.0f} MiB, "
            f"after {self.rss_after / MIB:.0f} MiB; /livez {livez}"
        )


async def send(port: int, body: bytes, addr: str, *, compressed: bool) -> tuple[int, str]:
    ext = {
        "brokerId": "0",
        "bodyCrc32": str(crc32_masked(body)),
        "clusterName": "DefaultCluster",
        "brokerAddr": addr,
        "haServerAddr": addr,
        "compressed": "true" if compressed else "false",
        "brokerName": "broker-" + addr.replace(".", "-").replace(":", "-"),
    }
    try:
        async with await RemotingClient.connect(f"127.0.0.1:{port}") as client:
            reply = await client.invoke(103, ext, body, timeout=300)
    except (RemotingClientError, ConnectionError, TimeoutError) as exc:
        return -1, f"{type(exc).__name__}: {exc}"
    return reply.code, reply.remark or ""


async def run_phase(worker: Worker, name: str, bodies: list[bytes], *, compressed: bool) -> Phase:
    pid = worker.proc.pid
    phase = Phase(name, rss_before=rss(pid))
    done = asyncio.Event()

    async def probe() -> None:
        async with aiohttp.ClientSession() as session:
            while not done.is_set():
                started = time.perf_counter()
                async with session.get(f"{worker.url}/livez") as resp:
                    await resp.read()
                phase.livez_ms.append((time.perf_counter() - started) * 1000)
                phase.rss_peak = max(phase.rss_peak, rss(pid))
                await asyncio.sleep(0.05)

    probing = asyncio.create_task(probe())
    started = time.perf_counter()
    replies = await asyncio.gather(
        *(
            send(worker.remoting_port, body, f"10.{i // 250}.{i % 250}.1:10911", compressed=compressed)
            for i, body in enumerate(bodies)
        )
    )
    phase.seconds = time.perf_counter() - started
    done.set()
    await probing
    phase.replies.update(replies)
    phase.rss_peak = max(phase.rss_peak, rss(pid))
    await asyncio.sleep(SETTLE_S)
    phase.rss_after = rss(pid)
    return phase


async def high_water(worker: Worker) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{worker.url}/metrics") as resp:
        text = await resp.text()
    lines = [
        line for line in text.splitlines() if line.startswith(("namesrv_decode_budget", "namesrv_limit"))
    ]
    return "\n    ".join(lines)


async def main_async(worker_env: dict[str, str]) -> None:
    print("\n".join(body_sizes()))
    big = register_body_compressed(topics(100_000, 40, {"+message.type": "NORMAL"}), DataVersion(1, 0, 5))
    json_body = register_body_json(topics(60_000, 40, {"+message.type": "NORMAL"}), DataVersion(1, 0, 5))
    with local_redis() as url, tempfile.TemporaryDirectory(prefix="decode-abuse-") as logs:
        env = {"NAMESRV_LOG_LEVEL": "WARNING", **worker_env}
        worker = start_worker("worker", url, "abuse", Path(logs), env)
        try:
            await wait_http_ready(worker.proc, f"{worker.url}/readyz")
            await asyncio.sleep(1)
            print(f"worker RSS at start: {rss(worker.proc.pid) / MIB:.0f} MiB")
            phases = [
                await run_phase(worker, "20 zip bombs", [issue_bomb()] * 20, compressed=True),
                await run_phase(worker, "20 x 100k-topic compressed", [big] * 20, compressed=True),
                await run_phase(worker, "4 x 14.6 MB JSON", [json_body] * 4, compressed=False),
            ]
            for phase in phases:
                print(phase.report())
            print(f"worker peak RSS (VmHWM): {rss(worker.proc.pid, 'VmHWM') / MIB:.0f} MiB")
            print("    " + await high_water(worker))
        finally:
            await worker.proc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode_abuse", description=__doc__.split("\n")[0])
    parser.add_argument("--worker-env", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    asyncio.run(main_async(dict(item.split("=", 1) for item in args.worker_env)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
