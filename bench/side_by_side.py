"""The side-by-side table: one worker next to every peer NameServer of the run (``--peer``)."""

from __future__ import annotations

from typing import Any

from bench.tables import num as _num
from bench.tables import table as _table


def side_by_side(result: dict[str, Any]) -> list[str]:
    """Ours (1 worker) next to every peer, scenario by scenario, with peer ÷ ours ratios."""
    peers: list[str] = [str(p).split("=", 1)[0] for p in result.get("config", {}).get("peers", [])]
    if not peers:
        return []
    lookups: list[dict[str, Any]] = result.get("lookups", [])

    def lookup(server: str, pattern: str, load: str) -> dict[str, Any] | None:
        return next(
            (
                r
                for r in lookups
                if r["scenario"]["server"] == server
                and r["scenario"]["pattern"] == pattern
                and r["scenario"]["load"] == load
                and r["scenario"]["protocol"] == "remoting"
                and (server != "fleet" or r["scenario"]["size"] == 1)
            ),
            None,
        )

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}×" if a and b else "-"

    rows: list[list[str]] = []
    for pattern in ("hot", "spread"):
        for load in sorted({r["scenario"]["load"] for r in lookups}, key=lambda x: x != "peak"):
            ours = lookup("fleet", pattern, load)
            if ours is None:
                continue
            for metric, key, fmt in (
                ("req/s", "rps", ",.0f"),
                ("p99 ms", "p99_ms", ".2f"),
                ("server µs/lookup", "server_us_per_request", ".1f"),
            ):
                line = [f"lookup {pattern} {load}", metric, _num(ours.get(key), fmt)]
                for name in peers:
                    theirs = lookup(name, pattern, load)
                    value = theirs.get(key) if theirs else None
                    line += ["n/a" if value is None else _num(value, fmt), ratio(value, ours.get(key))]
                rows.append(line)
    regs: list[dict[str, Any]] = result.get("registration", [])
    for r in (r for r in regs if r.get("target", "fleet") == "fleet"):
        line = [f"REGISTER_BROKER {r['kind']} {r['topics']:,}", "median ms", f"{r['median_ms']:.1f}"]
        for name in peers:
            theirs = next(
                (
                    x
                    for x in regs
                    if x.get("target") == name and x["kind"] == r["kind"] and x["topics"] == r["topics"]
                ),
                None,
            )
            value = theirs["median_ms"] if theirs else None
            line += ["n/a" if value is None else f"{value:.1f}", ratio(value, r["median_ms"])]
        rows.append(line)
    headers = ["measurement", "unit", "ours (1 worker)"]
    for name in peers:
        headers += [name, f"{name} ÷ ours"]
    return [
        "Side by side: one worker and each peer, same scenario, run in turns "
        "(µs/lookup = server CPU per lookup; n/a without the peer's pid)",
        *_table(headers, rows, right=set(range(2, len(headers)))),
        "",
    ]
