"""Sizes and knobs of a benchmark run: command-line flags, with a ``--smoke`` preset of tiny sizes."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from bench.peers import Peer, parse_peer

PHASES = ("memory", "remoting", "http", "overload", "steady", "registration", "expiry", "watch")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class BenchConfig:
    # route lookups
    warmup: float = 2.0  # s of load before each measurement window
    duration: float = 5.0  # s of each measurement window
    topics: int = 10_000  # topics of the "spread" scenario (all registered by every spread broker)
    hot_topics: int = 8  # the "hot" scenario cycles over this many of them
    spread_brokers: int = 4  # simulated brokers that register the spread topics (route width)
    procs: int = 2  # load generator processes
    # their nice value; 0 = the servers' priority (bench/README.md: why that is the default)
    loadgen_nice: int = 0
    # remoting load: "native" (bench/native/rmqload.c, a fraction of the CPU per request) or "python"
    loadgen: str = "native"
    conns: int = 4  # remoting connections per load process per worker
    depth: int = 8  # remoting requests in flight per connection (closed loop)
    http_conns: int = 8  # HTTP connections per load process per worker
    http_depth: int = 2  # HTTP requests pipelined per connection
    fleet_sizes: tuple[int, ...] = (1, 2)  # worker processes
    load_fraction: float = 0.8  # the open-loop latency run, as a fraction of the measured peak
    # overload (#26): 100% and 120% of the peak for this long, then 50% for recovery_seconds
    overload_seconds: float = 30.0
    recovery_seconds: float = 10.0
    # registration
    reg_sizes: tuple[int, ...] = (1000, 10_000)
    reg_reps: int = 5
    # steady state (Lua under heartbeats, unchanged re-registrations and reads)
    steady_seconds: float = 5.0
    steady_read_rate: float = 1000.0
    steady_heartbeat_brokers: int = 20
    steady_heartbeat_interval: float = 0.1  # s between heartbeats of each broker (compressed time)
    # liveness
    expiry_timeout_ms: int = 2000
    expiry_brokers: int = 6
    crash_brokers: int = 6
    sweep_ms: int = 500  # scanNotActiveBrokerInterval given to the workers
    # the run
    namespace: str = "bench"
    worker_env: tuple[tuple[str, str], ...] = ()
    phases: tuple[str, ...] = PHASES
    out_dir: Path = RESULTS_DIR
    keep_logs: bool = False
    wait_quiet: float = 0.0  # s to wait, at most, for the machine to go quiet before starting
    quiet_cores: float = 0.25  # "quiet": other processes use fewer cores than this
    label: str = ""
    smoke: bool = False
    peers: tuple[Peer, ...] = ()  # other NameServers measured in the same run (--peer)
    # s of lookups sent to each peer before its first window: a JVM compiles its hot paths only
    # after thousands of calls, and the first window would otherwise measure the interpreter
    peer_warmup: float = 20.0

    def as_dict(self) -> dict[str, object]:
        return config_dict(self)


def config_dict(config: Any) -> dict[str, object]:
    """A bench configuration dataclass as JSON-ready values (paths and peers as strings)."""
    out: dict[str, object] = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if isinstance(value, Path):
            value = str(value)
        elif f.name == "peers":
            value = [str(p) for p in value]
        out[f.name] = value
    return out


SMOKE = BenchConfig(
    warmup=0.3,
    duration=0.6,
    topics=300,
    hot_topics=4,
    spread_brokers=2,
    procs=2,
    conns=2,
    depth=4,
    http_conns=2,
    http_depth=2,
    reg_sizes=(50, 300),
    reg_reps=2,
    overload_seconds=1.0,
    recovery_seconds=1.0,
    steady_seconds=1.0,
    steady_read_rate=200.0,
    steady_heartbeat_brokers=3,
    expiry_timeout_ms=1000,
    expiry_brokers=2,
    crash_brokers=2,
    sweep_ms=200,
    peer_warmup=1.0,
    smoke=True,
)


def _ints(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.replace(" ", "").split(",") if v)
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return values


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def comma_choices(
    text: str, allowed: Sequence[str], refusal: str, *, at_least_one: bool = False
) -> tuple[str, ...]:
    """A comma-separated flag whose every item is one of ``allowed`` (argparse's ``type``);
    ``refusal`` starts the error that lists the others."""
    chosen = tuple(p for p in text.replace(" ", "").split(",") if p)
    unknown = [p for p in chosen if p not in allowed]
    if unknown or (at_least_one and not chosen):
        raise argparse.ArgumentTypeError(f"{refusal} {unknown}; choose from {', '.join(allowed)}")
    return chosen


def _phases(text: str) -> tuple[str, ...]:
    return comma_choices(text, PHASES, "unknown phase(s)")


LOADGENS = ("native", "python")


def add_loadgen_flags(p: argparse.ArgumentParser, nice: int, kind: str) -> None:
    p.add_argument(
        "--loadgen-nice",
        type=int,
        choices=range(20),
        metavar="0-19",
        help=f"the load processes' nice value; 0 = the servers' priority (default {nice})",
    )
    p.add_argument(
        "--loadgen",
        choices=LOADGENS,
        help=(
            "what sends the remoting load: native = bench/native/rmqload.c (built with the machine's "
            f"C compiler; Python where there is none), python = bench/loadgen.py (default {kind})"
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    d = BenchConfig()
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark the namesrv fleet against its targets and print one table "
        "(also written as JSON under bench/results/).",
    )
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness works (~30 s)")
    p.add_argument("--warmup", type=float, help=f"s of load before each window (default {d.warmup})")
    p.add_argument(
        "--peer-warmup",
        type=float,
        help=f"s of lookups (hot, then spread) to each peer before its first window, so a JVM has "
        f"compiled its hot paths (default {d.peer_warmup})",
    )
    p.add_argument("--duration", type=float, help=f"s per measurement window (default {d.duration})")
    p.add_argument("--topics", type=int, help=f"topics of the spread scenario (default {d.topics})")
    p.add_argument("--hot-topics", type=int, help=f"topics of the hot scenario (default {d.hot_topics})")
    p.add_argument(
        "--spread-brokers", type=int, help=f"brokers holding the topics (default {d.spread_brokers})"
    )
    p.add_argument("--procs", type=int, help=f"load generator processes (default {d.procs})")
    add_loadgen_flags(p, d.loadgen_nice, d.loadgen)
    p.add_argument(
        "--conns", type=int, help=f"remoting conns per load process per worker (default {d.conns})"
    )
    p.add_argument("--depth", type=int, help=f"remoting requests in flight per conn (default {d.depth})")
    p.add_argument(
        "--http-conns", type=int, help=f"HTTP conns per load process per worker (default {d.http_conns})"
    )
    p.add_argument(
        "--http-depth", type=int, help=f"HTTP requests pipelined per conn (default {d.http_depth})"
    )
    p.add_argument("--fleet-sizes", type=_ints, help="worker counts to measure, e.g. 1,2 (default 1,2)")
    p.add_argument("--load-fraction", type=float, help="open-loop rate as a fraction of peak (default 0.8)")
    p.add_argument("--reg-sizes", type=_ints, help="topics per registering broker (default 1000,10000)")
    p.add_argument("--reg-reps", type=int, help=f"registrations per kind and size (default {d.reg_reps})")
    p.add_argument(
        "--overload-seconds",
        type=float,
        help=f"length of each overload step, 100%% and 120%% of the peak (default {d.overload_seconds})",
    )
    p.add_argument(
        "--recovery-seconds",
        type=float,
        help=f"length of the 50%% step after each overload (default {d.recovery_seconds})",
    )
    p.add_argument(
        "--steady-seconds", type=float, help=f"length of the steady-state phase (default {d.steady_seconds})"
    )
    p.add_argument(
        "--steady-read-rate", type=float, help=f"route reads/s during it (default {d.steady_read_rate:g})"
    )
    p.add_argument(
        "--expiry-timeout-ms",
        type=int,
        help=f"heartbeatTimeoutMillis of silent brokers (default {d.expiry_timeout_ms})",
    )
    p.add_argument("--expiry-brokers", type=int, help=f"silent brokers (default {d.expiry_brokers})")
    p.add_argument("--crash-brokers", type=int, help=f"crashed brokers (default {d.crash_brokers})")
    p.add_argument(
        "--sweep-ms", type=int, help=f"workers' scanNotActiveBrokerInterval (default {d.sweep_ms})"
    )
    p.add_argument(
        "--worker-env",
        type=_env_pair,
        action="append",
        metavar="KEY=VALUE",
        help="extra environment for the workers, e.g. NAMESRV_REGISTER_CHUNK_TOPICS=500 (repeatable)",
    )
    p.add_argument("--phases", type=_phases, help=f"run only these phases (default all: {','.join(PHASES)})")
    p.add_argument("--out-dir", type=Path, help="where the JSON result goes (default bench/results)")
    p.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (printed path)")
    p.add_argument(
        "--wait-quiet",
        type=float,
        metavar="SECONDS",
        help="before starting, wait up to this long for other processes to leave the CPUs idle",
    )
    p.add_argument(
        "--quiet-cores",
        type=float,
        help=f"'idle' for --wait-quiet: other load below this (default {d.quiet_cores})",
    )
    p.add_argument(
        "--peer",
        type=parse_peer,
        action="append",
        metavar="NAME=HOST:PORT[@PID]",
        help="another NameServer already running (a Java one, another fleet): the same lookup and "
        "registration phases run against it in turns with ours; @PID gives its CPU per lookup (repeatable)",
    )
    p.add_argument("--label", help="a free-text label stored in the result (e.g. the branch under test)")
    return p


def parse_config(argv: Sequence[str] | None = None) -> BenchConfig:
    args = build_parser().parse_args(argv)
    env_smoke = os.environ.get("BENCH_SMOKE", "") not in ("", "0")
    config = SMOKE if args.smoke or env_smoke else BenchConfig()
    overrides = {
        name: value
        for name, value in vars(args).items()
        if value is not None and name not in ("smoke", "keep_logs", "worker_env", "peer")
    }
    if args.keep_logs:
        overrides["keep_logs"] = True
    if args.worker_env:
        overrides["worker_env"] = tuple(args.worker_env)
    if args.peer:
        names = [p.name for p in args.peer]
        if len(set(names)) != len(names):
            raise SystemExit("--peer names must differ")
        overrides["peers"] = tuple(args.peer)
    config = replace(config, **overrides)
    for name in (
        "procs",
        "conns",
        "depth",
        "http_conns",
        "http_depth",
        "topics",
        "hot_topics",
        "spread_brokers",
    ):
        if getattr(config, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    if config.hot_topics > config.topics:
        raise SystemExit("--hot-topics cannot exceed --topics")
    if config.expiry_timeout_ms < 1000:
        raise SystemExit("--expiry-timeout-ms must be at least 1000 (the service's minimum)")
    if config.sweep_ms < 100:
        raise SystemExit("--sweep-ms must be at least 100 (the service's minimum)")
    return config
