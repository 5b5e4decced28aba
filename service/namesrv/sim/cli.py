"""``namesrv-sim``: N simulated brokers, each on its own connection, against a NameServer fleet.

    namesrv-sim --namesrv 127.0.0.1:9876 --brokers 10 --topics 100 --period 30 --duration 60

Each broker registers M topics every ``--period`` seconds (and heartbeats every ``--heartbeat``
seconds when given), then unregisters at the end, or just drops its connection with ``--crash``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from collections.abc import Sequence

from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="namesrv-sim", description=__doc__.split("\n\n")[0])
    p.add_argument("--namesrv", default="127.0.0.1:9876", help="remoting address (default 127.0.0.1:9876)")
    p.add_argument("--brokers", type=int, default=4, help="broker groups (masters) to simulate")
    p.add_argument("--slaves", type=int, default=0, help="slaves per broker group")
    p.add_argument("--topics", type=int, default=20, help="topics per broker")
    p.add_argument("--cluster", default="SimCluster")
    p.add_argument("--period", type=float, default=30.0, help="seconds between registrations")
    p.add_argument("--heartbeat", type=float, default=0.0, help="seconds between heartbeats (0: none)")
    p.add_argument("--timeout-ms", type=int, default=None, help="heartbeatTimeoutMillis to send")
    p.add_argument("--duration", type=float, default=60.0, help="seconds to run (0: until Ctrl-C)")
    p.add_argument("--compressed", action="store_true", help="send compressed register bodies")
    p.add_argument(
        "--crash", action="store_true", help="at the end, drop connections instead of unregistering"
    )
    return p


async def simulate(args: argparse.Namespace) -> dict[str, list[float]]:
    brokers: list[SimBroker] = []
    for group in range(args.brokers):
        topics = topic_configs([f"SimTopic-{t:05d}" for t in range(args.topics)])
        for i in range(args.slaves + 1):
            client = await RemotingClient.connect(args.namesrv)
            brokers.append(
                SimBroker(
                    client,
                    args.cluster,
                    f"sim-broker-{group}",
                    f"127.0.0.{group % 250 + 1}:{10911 + 100 * i}",
                    broker_id=i,
                    topics=dict(topics),
                    timeout_ms=args.timeout_ms,
                    compressed=args.compressed,
                )
            )
    stop = asyncio.Event()
    stats: dict[str, list[float]] = {}
    runners = [
        asyncio.create_task(b.run(stop, period=args.period, heartbeat=args.heartbeat, stats=stats))
        for b in brokers
    ]
    try:
        if args.duration > 0:
            await asyncio.sleep(args.duration)
        else:
            await asyncio.Event().wait()
    finally:
        stop.set()
        await asyncio.gather(*runners, return_exceptions=True)
        for broker in brokers:
            if args.crash:
                broker.client.abort()
            else:
                await broker.unregister()
                await broker.client.aclose()
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        stats = asyncio.run(simulate(args))
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"namesrv-sim: cannot reach {args.namesrv}: {exc}", file=sys.stderr)
        return 1
    for name, samples in stats.items():
        ms = sorted(s * 1000 for s in samples)
        print(
            f"{name}: {len(ms)} calls, p50 {statistics.median(ms):.2f} ms, "
            f"p99 {ms[max(0, int(len(ms) * 0.99) - 1)]:.2f} ms, max {ms[-1]:.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
