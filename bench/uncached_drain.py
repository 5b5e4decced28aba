"""How fast a worker without the route cache drains the backlog of a short stall.

One worker (``routeCacheEnabled = false``) on a private Redis holding 100 broker groups, topic
``G100`` on all of them (a 25 KB answer, as at the RIP-29 shape). An open-loop load of ``--rate``
lookups/s over 8 connections; at 2, 4 and 6 s the worker is stopped (SIGSTOP) for ``--stall``
seconds. Printed per run: the p99 of the quiet second before the first stall, how long after
each stall until every lookup of a 50 ms slice is answered within 10 ms again, and the p99 of
the whole run. ``--other PATH`` alternates with the code of another checkout (its ``service``
folder first on ``PYTHONPATH``), for an A/B on the same machine state:

    python -m bench.uncached_drain --rate 1800 --rounds 3 --other /tmp/oldtree

Not part of ``make bench``; about 12 s per run. The load runs in this process, so the rate a
machine sustains is lower than the worker's own peak.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import uvloop

from bench import route_read
from bench.procs import start_worker, wait_http_ready
from namesrv.domain.codes import RequestCode
from namesrv.sim.client import RemotingClient
from support.redis_launcher import local_redis

CONNECTIONS = 8
STALLS_AT = (2.0, 4.0, 6.0)
SECONDS = 8.0
SLICE_S = 0.05
ANSWERED_WITHIN_S = 0.010


async def open_loop(address: str, rate: float, stall_s: float, pid: int) -> list[tuple[float, float]]:
    """(intended send time from the start, latency) of every lookup."""
    clients = [await RemotingClient.connect(address) for _ in range(CONNECTIONS)]
    timings: list[tuple[float, float]] = []
    start = time.perf_counter() + 0.2

    async def lookup(client: RemotingClient, at: float) -> None:
        reply = await client.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "G100"}, timeout=30)
        if reply.code != 0:
            raise RuntimeError(f"lookup answered code {reply.code}: {reply.remark}")
        timings.append((at - start, time.perf_counter() - at))

    async def stall() -> None:
        for at in STALLS_AT:
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            os.kill(pid, signal.SIGSTOP)
            # blocking on purpose, as in the runs docs/design.md cites: the load pauses too, and the
            # lookups due meanwhile count from when they were due
            time.sleep(stall_s)  # noqa: ASYNC251
            os.kill(pid, signal.SIGCONT)

    stalls = asyncio.ensure_future(stall())
    sent = []
    try:
        for i in range(int(SECONDS * rate)):
            at = start + i / rate
            ahead = at - time.perf_counter()
            if ahead > 0:
                await asyncio.sleep(ahead)
            sent.append(asyncio.ensure_future(lookup(clients[i % CONNECTIONS], at)))
        await asyncio.gather(*sent)
        await stalls
    finally:
        for client in clients:
            client.close()
    return timings


def drained_after(timings: list[tuple[float, float]], since: float) -> float | None:
    """Seconds from ``since`` until a 50 ms slice whose lookups were all answered in time."""
    slices: dict[int, float] = {}
    for at, took in timings:
        if at >= since:
            key = int((at - since) / SLICE_S)
            slices[key] = max(slices.get(key, 0.0), took)
    for key in sorted(slices):
        if slices[key] < ANSWERED_WITHIN_S:
            return round(key * SLICE_S, 2)
    return None


def p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.99)] if ordered else float("nan")


async def run(url: str, label: str, env: dict[str, str], rate: float, stall_s: float, logs: Path) -> str:
    name = "drain-" + "".join(ch if ch.isalnum() else "-" for ch in label)
    worker = start_worker(name, url, route_read.NAMESPACE, logs, env)
    try:
        await wait_http_ready(worker.proc, f"http://127.0.0.1:{worker.http_port}/readyz")
        timings = await open_loop(f"127.0.0.1:{worker.remoting_port}", rate, stall_s, worker.proc.pid)
    finally:
        await worker.proc.stop()
    quiet = p99([took for at, took in timings if STALLS_AT[0] - 1.0 <= at < STALLS_AT[0]])
    drains = [drained_after(timings, at + stall_s) for at in STALLS_AT]
    return (
        f"{label}: quiet p99 {quiet * 1000:.1f} ms, drained after each stall in "
        f"{' / '.join('never' if d is None else f'{d:.2f}' for d in drains)} s, "
        f"p99 of the run {p99([took for _, took in timings]) * 1000:.1f} ms"
    )


async def measure(opts: argparse.Namespace, variants: dict[str, dict[str, str]]) -> None:
    with local_redis() as url, tempfile.TemporaryDirectory(prefix="namesrv-drain-") as logs:
        redis, store = await route_read.registry(url, [100])
        await store.close()
        await redis.aclose()
        stall_ms = opts.stall * 1000
        print(f"uncached lookups of a 100-group route at {opts.rate:,.0f}/s, stalls of {stall_ms:.0f} ms:")
        for _ in range(opts.rounds):  # alternated: a machine's noise falls on both alike
            for label, extra in variants.items():
                env = {"NAMESRV_ROUTE_CACHE_ENABLED": "false", **extra}
                print("  " + await run(url, label, env, opts.rate, opts.stall, Path(logs)), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.uncached_drain", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rate", type=float, default=1500.0, help="lookups per second offered")
    parser.add_argument("--stall", type=float, default=0.05, help="seconds the worker is stopped, each time")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--other", help="another checkout to alternate with (an A/B)")
    opts = parser.parse_args(argv)
    if opts.rate <= 0 or not 0 < opts.stall < 1.5 or opts.rounds < 1:
        parser.error("--rate must be positive, --stall between 0 and 1.5 s, --rounds at least 1")
    variants: dict[str, dict[str, str]] = {"this checkout": {}}
    if opts.other:
        tree = Path(opts.other).resolve()
        variants[str(tree)] = {"PYTHONPATH": f"{tree / 'service'}:{tree}"}
    uvloop.run(measure(opts, variants))


if __name__ == "__main__":
    main()
