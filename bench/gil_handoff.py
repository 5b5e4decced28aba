"""How long the change feed's poll thread waits for the GIL while the event loop thread is busy.

A worker polls the change log on a thread of its own (``registry/changefeed.py``), but each step of
a poll (waking up, sending, reading the reply) needs the GIL. While the loop thread answers
lookups without pause, the poll thread gets it only when the loop thread is made to let go: after
the switch interval, Python's 5 ms by default, several times a poll. This measures the round trip
of a PING sent every 25 ms (the feed's poll interval) from such a thread beside a thread that never
stops computing, at Python's default and at the worker's ``SWITCH_INTERVAL_S``, and how much work
the busy thread got done in each (the cost of switching more often):

    python -m bench.gil_handoff            # 5 s per setting, twice each, on a private Redis
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from collections.abc import Sequence

from redis.asyncio import Redis

from bench.stats import percentile_ms
from namesrv.runner import SWITCH_INTERVAL_S
from support.redis_launcher import local_redis

PYTHON_DEFAULT_S = 0.005
POLL_EVERY_S = 0.025


def measure(url: str, switch_interval: float, seconds: float) -> tuple[list[float], int]:
    """(sorted PING round trips in s, units of work the busy thread did) at ``switch_interval``."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    rtts: list[float] = []
    stop = threading.Event()

    async def poll() -> None:
        redis = Redis.from_url(url)
        try:
            while not stop.is_set():
                sent = time.perf_counter()
                await redis.ping()
                rtts.append(time.perf_counter() - sent)
                await asyncio.sleep(POLL_EVERY_S)
        finally:
            await redis.aclose()

    poller = threading.Thread(target=lambda: asyncio.run(poll()), name="poll")
    work = 0
    try:
        poller.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:  # the loop thread, answering lookups without pause
            for i in range(1000):
                work += i & 1
    finally:
        stop.set()
        poller.join()
        sys.setswitchinterval(before)
    return sorted(rtts), work


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gil_handoff", description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="per run (default 5)")
    p.add_argument("--runs", type=int, default=2, help="runs per setting, alternating (default 2)")
    args = p.parse_args(argv)
    print("switch interval  polls  round trip p50 ms  p99 ms  max ms  busy thread's work")
    with local_redis() as url:
        for _ in range(args.runs):
            for interval in (PYTHON_DEFAULT_S, SWITCH_INTERVAL_S):
                rtts, work = measure(url, interval, args.seconds)
                print(
                    f"{interval * 1000:>12g} ms  {len(rtts):>5}  {percentile_ms(rtts, 50):>17.2f}  "
                    f"{percentile_ms(rtts, 99):>6.2f}  {rtts[-1] * 1000:>6.2f}  {work:>18,}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
