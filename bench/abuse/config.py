"""Flags of ``python -m bench.abuse`` (``make abuse ABUSE_ARGS=...``), with a ``--short`` preset."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from bench.abuse.legit import TrafficConfig
from bench.abuse.plan import Sizes
from bench.abuse.scenarios import NAMES
from bench.config import RESULTS_DIR

RSS_ALLOWANCE_MIB = 150  # the bound: a worker's RSS after an attack <= before + 150 MiB
ANSWERED_MIN_PCT = 99.0  # the bound: legitimate requests answered during every attack
Knobs = TypeVar("Knobs", Sizes, TrafficConfig)


@dataclass(frozen=True)
class AbuseConfig:
    seconds: float = 20.0  # each attack runs this long
    settle: float = 5.0  # s after an attack before RSS "after" is read (memory handed back)
    scenarios: tuple[str, ...] = NAMES
    sizes: Sizes = field(default_factory=Sizes)
    traffic: TrafficConfig = field(default_factory=TrafficConfig)
    worker_env: tuple[tuple[str, str], ...] = ()
    out_dir: Path = RESULTS_DIR
    keep_logs: bool = False
    short: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["out_dir"] = str(self.out_dir)
        return out


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{flag} takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _override(base: Knobs, pairs: dict[str, str], flag: str) -> Knobs:
    """``base`` (a dataclass) with the named fields set, each converted to the field's type."""
    known = {f.name: type(getattr(base, f.name)) for f in dataclasses.fields(base)}
    changes: dict[str, Any] = {}
    for key, value in pairs.items():
        if key not in known:
            raise argparse.ArgumentTypeError(f"{flag}: unknown {key!r}; one of {', '.join(known)}")
        changes[key] = known[key](value)
    return replace(base, **changes)


def _names(knobs: type[Sizes] | type[TrafficConfig]) -> str:
    return ", ".join(f.name for f in dataclasses.fields(knobs))


def parse_config(argv: Sequence[str] | None = None) -> AbuseConfig:
    p = argparse.ArgumentParser(
        prog="python -m bench.abuse",
        description="Every attack of issue #25 against a real fleet, beside legitimate traffic: one table.",
    )
    p.add_argument(
        "--short", action="store_true", help="a few seconds per attack, smaller floods (make test)"
    )
    p.add_argument("--seconds", type=float, help="how long each attack runs (default 20; --short 1.5)")
    p.add_argument("--settle", type=float, help="s after an attack before RSS 'after' (default 5; --short 1)")
    p.add_argument(
        "--scenarios", help=f"comma-separated, of: {', '.join(NAMES)} (default: all, in that order)"
    )
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"how hard an attack pushes (repeatable), one of: {_names(Sizes)}",
    )
    p.add_argument(
        "--traffic",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"the legitimate traffic (repeatable), one of: {_names(TrafficConfig)}",
    )
    p.add_argument(
        "--worker-env", action="append", default=[], metavar="KEY=VALUE", help="extra worker settings"
    )
    p.add_argument("--out-dir", type=Path, default=RESULTS_DIR, help="where the JSON goes")
    p.add_argument("--keep-logs", action="store_true", help="keep every process' log and print where")
    args = p.parse_args(argv)
    cfg = AbuseConfig(short=args.short, out_dir=args.out_dir, keep_logs=args.keep_logs)
    if args.short:
        cfg = replace(cfg, seconds=1.5, settle=1.0, sizes=Sizes.short())
    try:
        if args.scenarios:
            names = tuple(n.strip() for n in args.scenarios.split(",") if n.strip())
            unknown = [n for n in names if n not in NAMES]
            if unknown:
                raise argparse.ArgumentTypeError(f"unknown scenario(s) {', '.join(unknown)}")
            cfg = replace(cfg, scenarios=names)
        cfg = replace(
            cfg,
            sizes=_override(cfg.sizes, _pairs(args.size, "--size"), "--size"),
            traffic=_override(cfg.traffic, _pairs(args.traffic, "--traffic"), "--traffic"),
            worker_env=tuple(_pairs(args.worker_env, "--worker-env").items()),
        )
    except (argparse.ArgumentTypeError, ValueError) as exc:
        p.error(str(exc))
    if args.seconds is not None:
        cfg = replace(cfg, seconds=args.seconds)
    if args.settle is not None:
        cfg = replace(cfg, settle=args.settle)
    return cfg
