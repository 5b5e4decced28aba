"""The verdict on each row and the one Markdown table."""

from __future__ import annotations

import math
from typing import Any

from bench.abuse.config import ANSWERED_MIN_PCT, RSS_ALLOWANCE_MIB
from bench.abuse.scenarios import NAMES

KIB_PER_MIB = 1024
LEGIT = (("remoting", "lookups"), ("http", "HTTP lookups"), ("register", "registrations"))
ATTACKER_ENTRIES = 6  # outcomes shown per row; the JSON has them all


def judge(row: dict[str, Any]) -> list[str]:
    """Why the row misses the issue's bounds (empty: it passes): every kind of legitimate request
    answered at >= 99%, each worker's RSS after <= its baseline + 150 MiB, both workers serving,
    and the attack ran as written (no attack loop died of an error)."""
    why: list[str] = []
    for kind, label in LEGIT:
        pct = row["legit"][kind]["answered_pct"]
        if not pct >= ANSWERED_MIN_PCT:  # NaN (nothing sent) misses too
            why.append(f"{label} answered {_pct(pct)}")
    for worker, rss in row["rss_kib"].items():
        grown = (rss["after"] - rss["baseline"]) / KIB_PER_MIB
        if grown > RSS_ALLOWANCE_MIB:
            why.append(f"{worker} RSS after +{grown:.1f} MiB")
    why.extend(f"worker-{i} {state}" for i, state in enumerate(row["health"]) if state != "serving")
    errors = row["attacker"].get("errors", 0)
    if errors:
        why.append(f"{errors} attack loops failed: {row['attacker'].get('first_errors')}")
    return why


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}%"


def _ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "unanswered"
    return f"{value:.1f} ms" if value < 100 else f"{value:,.0f} ms"


def _answered(summary: dict[str, Any]) -> str:
    return f"{_pct(summary['answered_pct'])} of {summary['sent']:,}"


def _rss(row: dict[str, Any]) -> str:
    parts = []
    for worker, rss in row["rss_kib"].items():
        short = worker.replace("worker-", "w")
        values = " / ".join(f"{rss[k] / KIB_PER_MIB:.0f}" for k in ("baseline", "peak", "after"))
        parts.append(f"{short} {values}")
    return " · ".join(parts)


def _attacker(row: dict[str, Any]) -> str:
    if row["scenario"] == "baseline":
        return "-"
    tally: dict[str, int] = row["attacker"].get("tally", {})
    # what came back; the requests sent are the sum of it (the JSON has both)
    entries = sorted(((k, n) for k, n in tally.items() if not k.endswith("sent")), key=lambda kv: -kv[1])
    shown = [f"{key} ×{count:,}" for key, count in entries[:ATTACKER_ENTRIES]]
    if len(entries) > ATTACKER_ENTRIES:
        shown.append(f"+{len(entries) - ATTACKER_ENTRIES} more")
    return ", ".join(shown).replace("|", "/") or "nothing"


def _cores(row: dict[str, Any]) -> str:
    cores = row["cores"]
    # the legitimate client and Redis are "others" here too; the JSON has each on its own
    others = cores["other"] + cores["redis"] + cores["client"]
    text = f"{cores['workers']:.2f} · {cores['attacker']:.2f} · {others:.2f}"
    skipped = row["legit"]["client_skipped_ticks"]
    return text + (f" (client late: {skipped:,} sends skipped)" if skipped else "")


def table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    out = []
    for row in sorted(rows, key=lambda r: NAMES.index(r["scenario"])):
        legit = row["legit"]
        lines = row["log_lines"]
        why = row["why"]
        name = row["scenario"] + (f" ({row['source']})" if row["source"] else "")
        out.append(
            [
                name,
                _answered(legit["remoting"]),
                _ms(legit["remoting"]["p99_ms"]),
                _answered(legit["http"]),
                _answered(legit["register"]),
                _rss(row),
                f"{row['redis']['after'] / (1 << 20):.1f} MiB",
                f"{sum(lines.values()):,} ({' + '.join(str(n) for n in lines.values())})",
                _cores(row),
                _attacker(row),
                "PASS" if not why else "MISS: " + "; ".join(why),
            ]
        )
    return out


HEADERS = (
    "attack",
    "lookups answered",
    "lookups p99",
    "HTTP lookups answered",
    "registrations answered",
    "worker RSS MiB: baseline / peak / after",
    "Redis used_memory after",
    "log lines (w0 + w1)",
    "cores: workers · attacker · others",
    "what the attacker got",
    "result",
)


def markdown(rows: list[dict[str, Any]]) -> str:
    def line(cells: list[str] | tuple[str, ...]) -> str:
        return "| " + " | ".join(cells) + " |"

    body = [line(HEADERS), line(["---"] * len(HEADERS))]
    body.extend(line(r) for r in table_rows(rows))
    return "\n".join(body)


def render(result: dict[str, Any]) -> str:
    meta, cfg = result["meta"], result["config"]
    misses = [r["scenario"] for r in result["rows"] if r["why"]]
    head = (
        f"`make abuse` {meta['started']}, commit {meta['git']}, {meta['cpus_usable']} cores "
        f"({meta['cpu_model']}), load average {meta['loadavg_at_start'][0]:.2f} at start; "
        f"{cfg['seconds']:g} s per attack, RSS 'after' {cfg['settle']:g} s after it stopped"
        f"{' (short form)' if cfg['short'] else ''}."
    )
    verdict = (
        f"{len(result['rows']) - len(misses)} of {len(result['rows'])} rows PASS"
        + (f"; MISS: {', '.join(misses)}" if misses else "")
        + f" (legitimate requests answered >= {ANSWERED_MIN_PCT:g}%, RSS after <= baseline + "
        f"{RSS_ALLOWANCE_MIB} MiB, both workers serving)."
    )
    failures = [f"- {name}: {text}" for name, text in result.get("failures", {}).items()]
    return "\n".join([head, "", markdown(result["rows"]), "", verdict, *failures])
