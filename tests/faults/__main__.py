"""``make faults``: every fault scenario at full length, then one Markdown table of figures.

python -m tests.faults [--short] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from tests.faults import scenarios
from tests.faults.scenarios import Figures, Lengths

COLUMNS = (
    ("fault", "scenario"),
    ("fault s", "fault_s"),
    ("lookups", "lookups"),
    ("failed", "failed"),
    ("error window s", "error_window_s"),
    ("stale answers", "stale"),
    ("max lookup ms", "max_cached_ms"),
    ("uncached: max ms (codes)", "cold"),
    ("all agree after s", "agree_s"),
    ("refused registrations", "refused_registrations"),
    ("missing at recovery", "missing_at_recovery"),
    ("lost after a period", "lost_registrations"),
)


def _cell(row: Figures, key: str) -> str:
    if key == "cold":
        if row.cold_max_ms is None:
            return ""
        return f"{row.cold_max_ms:g} ({', '.join(f'{c}: {n}' for c, n in (row.cold_codes or {}).items())})"
    value = getattr(row, key)
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def table(rows: Sequence[Figures]) -> str:
    lines = [
        "| " + " | ".join(title for title, _ in COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(_cell(r, key) for _, key in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


async def run_all(lengths: Lengths, *, full: bool) -> tuple[list[Figures], dict[str, Any]]:
    rows = await scenarios.single_redis(lengths)
    rows += await scenarios.sentinel_failover(lengths, kill_master=full)
    checks = {
        "start without Redis": await scenarios.start_without_redis(),
        "wrong Redis password": await scenarios.wrong_password(),
    }
    return rows, checks


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the short form make test runs")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    import uvloop

    lengths = Lengths.short() if args.short else Lengths.full()
    rows, checks = uvloop.run(run_all(lengths, full=not args.short))
    print(f"\nFault suite ({'short' if args.short else 'full'} form; broker period {lengths.period:g} s)\n")
    print(table(rows))
    print()
    for row in rows:
        if row.extra:
            print(f"- {row.scenario}: {json.dumps(row.extra, sort_keys=True)}")
    for name, result in checks.items():
        print(f"- {name}: {json.dumps(result, sort_keys=True)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": [dataclasses.asdict(r) for r in rows], "checks": checks}, f, indent=2)
    return 0


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    sys.exit(main())
