"""Sizes and knobs of a scale run: every size a flag, ``--scale`` to shrink the shapes and
``--smoke`` for tiny ones (the harness checked end to end in well under two minutes)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.config import add_loadgen_flags, comma_choices, config_dict
from bench.peers import Peer, parse_peer

SHAPES = ("rip29", "wide", "many")
SKIPPABLE = ("memory", "admin", "lookups", "cycle", "heal")  # registration fills the fleet: never
RESULTS_DIR = Path(__file__).resolve().parents[1] / "results" / "scale"


@dataclass(frozen=True)
class ScaleConfig:
    shapes: tuple[str, ...] = SHAPES
    scale: float = 1.0  # multiplies the queue entries of every shape (see sized())
    # rip29: groups x (1 master + slaves), every group holds every topic
    rip29_groups: int = 100
    rip29_slaves: int = 2
    rip29_topics: int = 10_000
    # wide: one broker, split registration, compressed bodies
    wide_topics: int = 100_000
    wide_split: int = 800  # RocketMQ 5.x splitRegistrationSize
    # many: groups x topics per group, each topic on `many_spread` groups
    many_groups: int = 100
    many_topics: int = 10_000
    many_spread: int = 4
    # the fleet
    workers: int = 2  # workers with the route cache; one more worker runs without it (uncached)
    reg_concurrency: int = 32  # registrations in flight while the fleet fills
    # lookups
    lookup_topics: int = 10_000  # topics the lookups pick from (uniformly), sampled from the shape
    procs: int = 2  # load generator processes
    loadgen_nice: int = 0  # their nice value (as make bench's --loadgen-nice)
    loadgen: str = "native"  # what sends the remoting load (as make bench's --loadgen)
    conns: int = 4
    depth: int = 8
    peak_seconds: float = 3.0
    warmup: float = 1.0
    duration: float = 5.0
    load_fraction: float = 0.8
    # re-registration cycle
    cycle_seconds: float = 30.0  # every broker re-registers once (unchanged) within this
    # heal
    heal_seconds: float = 20.0  # the lookup window that starts as Redis restarts empty
    # lookups/s to the cached workers during the heal: a fixed client load (a fraction of a peak
    # measured on a shared machine overloads it when other processes take the cores back)
    heal_rate: float = 2000.0
    heal_uncached_rate: float = 100.0  # lookups/s to the worker without the route cache meanwhile
    slowlog_us: int = 1000  # commands at least this long are logged (the longest is reported)
    # the run
    namespace: str = "scale"
    peers: tuple[Peer, ...] = ()
    out_dir: Path = RESULTS_DIR
    keep_logs: bool = False
    label: str = ""
    smoke: bool = False
    skip: tuple[str, ...] = ()  # phases left out (a heal measured without the rows before it)

    def sized(self) -> ScaleConfig:
        """The shapes after ``scale``: rip29 and many shrink groups and topics by sqrt(scale) each
        (so the product, the queue entries, shrinks by ``scale`` and both dimensions stay
        visible); wide shrinks its topics by ``scale``. many keeps a multiple of its spread."""
        if self.scale == 1.0:
            return self
        root = math.sqrt(self.scale)
        spread = self.many_spread
        many_groups = max(spread, round(self.many_groups * root / spread) * spread)
        return replace(
            self,
            rip29_groups=max(1, round(self.rip29_groups * root)),
            rip29_topics=max(1, round(self.rip29_topics * root)),
            wide_topics=max(1, round(self.wide_topics * self.scale)),
            many_groups=many_groups,
            many_topics=max(1, round(self.many_topics * root)),
        )

    def as_dict(self) -> dict[str, object]:
        return config_dict(self)


SMOKE = ScaleConfig(
    rip29_groups=3,
    rip29_topics=40,
    wide_topics=1700,  # three split requests of 800, 800, 100
    many_groups=4,
    many_topics=30,
    workers=1,
    reg_concurrency=8,
    lookup_topics=100,
    procs=1,
    conns=1,
    depth=4,
    peak_seconds=0.5,
    warmup=0.3,
    duration=0.6,
    cycle_seconds=1.0,
    heal_seconds=4.0,
    heal_rate=300.0,
    heal_uncached_rate=50.0,
    smoke=True,
)

POSITIVE_INTS = (
    "rip29_groups",
    "rip29_topics",
    "wide_topics",
    "wide_split",
    "many_groups",
    "many_topics",
    "many_spread",
    "workers",
    "reg_concurrency",
    "lookup_topics",
    "procs",
    "conns",
    "depth",
)


def _shapes(text: str) -> tuple[str, ...]:
    return comma_choices(text, SHAPES, "unknown shape(s)", at_least_one=True)


def _skips(text: str) -> tuple[str, ...]:
    return comma_choices(text, SKIPPABLE, "cannot skip")


def build_parser() -> argparse.ArgumentParser:
    d = ScaleConfig()
    p = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description="The fleet at RIP-29 scale and beyond (issue #27): one Markdown table per run, "
        "the JSON under bench/results/scale/.",
    )
    p.add_argument("--smoke", action="store_true", help="tiny shapes: checks the harness works (< 2 min)")
    p.add_argument("--shape", dest="shapes", type=_shapes, help=f"shapes to run (default {','.join(SHAPES)})")
    p.add_argument("--scale", type=float, help="multiply every shape's queue entries by this (e.g. 0.01)")
    for name in POSITIVE_INTS:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"(default {getattr(d, name)})")
    for name in (
        "peak_seconds",
        "warmup",
        "duration",
        "load_fraction",
        "cycle_seconds",
        "heal_seconds",
        "heal_rate",
        "heal_uncached_rate",
    ):
        p.add_argument(f"--{name.replace('_', '-')}", type=float, help=f"(default {getattr(d, name)})")
    add_loadgen_flags(p, d.loadgen_nice, d.loadgen)
    p.add_argument("--slowlog-us", type=int, help=f"SLOWLOG threshold in µs (default {d.slowlog_us})")
    p.add_argument(
        "--peer",
        type=parse_peer,
        action="append",
        metavar="NAME=HOST:PORT[@PID]",
        help="another NameServer already running (e.g. Java): every shape it can run runs against "
        "it too, right after ours; @PID gives its RSS (repeatable)",
    )
    p.add_argument(
        "--skip",
        type=_skips,
        help=f"phases to leave out, comma-separated ({', '.join(SKIPPABLE)}): e.g. to measure the heal alone",
    )
    p.add_argument("--out-dir", type=Path, help="where the JSON goes (default bench/results/scale)")
    p.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (printed path)")
    p.add_argument("--label", help="a free-text label stored in the result")
    return p


def parse_config(argv: Sequence[str] | None = None) -> ScaleConfig:
    args = build_parser().parse_args(argv)
    config = SMOKE if args.smoke else ScaleConfig()
    overrides = {
        k: v for k, v in vars(args).items() if v is not None and k not in ("smoke", "keep_logs", "peer")
    }
    if args.keep_logs:
        overrides["keep_logs"] = True
    if args.peer:
        if len({p.name for p in args.peer}) != len(args.peer):
            raise SystemExit("--peer names must differ")
        overrides["peers"] = tuple(args.peer)
    config = replace(config, **overrides)
    for name in POSITIVE_INTS:
        if getattr(config, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 < config.scale <= 1:
        raise SystemExit("--scale must be in (0, 1]")
    if config.many_groups % config.many_spread:
        raise SystemExit("--many-groups must be a multiple of --many-spread")
    if not 0 < config.load_fraction <= 1:
        raise SystemExit("--load-fraction must be in (0, 1]")
    if min(config.heal_rate, config.heal_seconds, config.heal_uncached_rate) <= 0:
        raise SystemExit("--heal-rate, --heal-uncached-rate and --heal-seconds must be positive")
    return config.sized()
