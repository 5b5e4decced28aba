"""``namesrv-sim``: N simulated brokers, each on its own connection, against a NameServer fleet.

    namesrv-sim --namesrv 127.0.0.1:9876 --brokers 10 --topics 100 --period 30 --duration 60

Each broker registers M topics every ``--period`` seconds (and heartbeats every ``--heartbeat``
seconds when given), then unregisters at the end, or just drops its connection with ``--crash``.
Like a real broker, one whose connection drops or whose registration fails reconnects and
registers again (after 0.5 s, doubling up to ``--period``). Exit status: 0 when every broker
registered, 1 when the NameServer is unreachable at start or a broker never registered, 2 for
bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from namesrv.sim.broker import RegistrationFailed, SimBroker, topic_configs
from namesrv.sim.client import RemotingClient, RemotingClientError

FIRST_RETRY_SECONDS = 0.5
# What a broker can recover from by reconnecting and registering again.
RETRYABLE = (RemotingClientError, RegistrationFailed, OSError, TimeoutError)


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
        "--access-key",
        help="sign every request with this ACL account; its secret key comes from the environment "
        "variable NAMESRV_SIM_SECRET_KEY (never a command line, which other users can read)",
    )
    p.add_argument(
        "--crash", action="store_true", help="at the end, drop connections instead of unregistering"
    )
    return p


@dataclass
class Outcome:
    stats: dict[str, list[float]]
    never_registered: list[str]  # "name/addr" of brokers whose every registration failed
    retries: int
    errors: list[str]  # what stopped a broker for good (not retryable)


def _say(text: str) -> None:
    print(f"namesrv-sim: {text}", file=sys.stderr, flush=True)


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def keep_registered(
    broker: SimBroker,
    address: str,
    stop: asyncio.Event,
    args: argparse.Namespace,
    stats: dict[str, list[float]],
) -> int:
    """Run the broker until ``stop``; on a dropped connection or a failed registration, reconnect
    and start over after a growing pause, as a broker's BrokerOuterAPI keeps trying. Returns the
    number of retries."""
    delay, retries = FIRST_RETRY_SECONDS, 0
    while not stop.is_set():
        try:
            if broker.client.closed.is_set():
                broker.client = await broker.client.reopen(address)
            await broker.run(stop, period=args.period, heartbeat=args.heartbeat, stats=stats)
            break
        except RETRYABLE as exc:
            retries += 1
            _say(f"{broker.name} {broker.addr}: {exc or type(exc).__name__}; retrying in {delay:.1f} s")
            broker.client.abort()
            await _wait(stop, delay)
            delay = min(delay * 2, max(args.period, FIRST_RETRY_SECONDS))
    return retries


async def _leave(broker: SimBroker, crash: bool) -> None:
    if crash or broker.client.closed.is_set():
        broker.client.abort()
        return
    with contextlib.suppress(*RETRYABLE):
        await broker.unregister()
    await broker.client.aclose()


async def simulate(args: argparse.Namespace) -> Outcome:
    brokers: list[SimBroker] = []
    credentials = (args.access_key, os.environ.get("NAMESRV_SIM_SECRET_KEY", "")) if args.access_key else None
    for group in range(args.brokers):
        topics = topic_configs([f"SimTopic-{t:05d}" for t in range(args.topics)])
        for i in range(args.slaves + 1):
            client = await RemotingClient.connect(args.namesrv, credentials=credentials)
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
    runners = [asyncio.create_task(keep_registered(b, args.namesrv, stop, args, stats)) for b in brokers]
    try:
        if args.duration > 0:
            await asyncio.sleep(args.duration)
        else:
            await asyncio.Event().wait()
    finally:
        stop.set()
        done = await asyncio.gather(*runners, return_exceptions=True)
        await asyncio.gather(*(_leave(b, args.crash) for b in brokers))
    never = [f"{b.name}/{b.addr}" for b in brokers if b.registrations == 0]
    errors = [f"{type(r).__name__}: {r}" for r in done if isinstance(r, BaseException)]
    return Outcome(stats, never, sum(r for r in done if isinstance(r, int)), errors)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.topics == 1:
        # Every NameServer refuses a broker's first registration with exactly one topic (R7).
        parser.error("--topics 1 is refused by the NameServer (a first registration needs 0 or 2+ topics)")
    try:
        outcome = asyncio.run(simulate(args))
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        print(f"namesrv-sim: cannot reach {args.namesrv}: {exc}", file=sys.stderr)
        return 1
    for name, samples in outcome.stats.items():
        ms = sorted(s * 1000 for s in samples)
        print(
            f"{name}: {len(ms)} calls, p50 {statistics.median(ms):.2f} ms, "
            f"p99 {ms[max(0, int(len(ms) * 0.99) - 1)]:.2f} ms, max {ms[-1]:.2f} ms"
        )
    if outcome.retries:
        print(f"retries: {outcome.retries}")
    for error in outcome.errors:
        _say(f"a broker stopped: {error}")
    if outcome.never_registered:
        names = ", ".join(outcome.never_registered)
        _say(f"{len(outcome.never_registered)} broker(s) never registered: {names}")
    if outcome.never_registered or outcome.errors:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
