"""The Markdown table of a scale run: one column per shape and target, one line per row of issue
#27. A cell says what was measured, "n/a" what does not apply to that target, "-" what failed or
did not run (the JSON says why)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench import cpu_speed

Rows = dict[str, Any]
Cell = Callable[[Rows], str]


def _get(rows: Rows, *path: str) -> Any:
    value: Any = rows
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _num(value: Any, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _lookup(kind: str) -> Cell:
    def cell(rows: Rows) -> str:
        row = _get(rows, "lookups", kind)
        if row is None:
            return "n/a" if "not_run" in rows and kind != "peer" else "-"
        other = row.get("cores", {}).get("other", 0.0)
        return (
            f"{row['p50_ms']:.2f} / {row['p99_ms']:.2f} ms @ {row['target_rate']:,.0f}/s "
            f"(peak {row['peak_rps']:,.0f}/s, {row['errors']} errors; other processes {other:.1f} cores)"
        )

    return cell


def _admin(name: str) -> Cell:
    def cell(rows: Rows) -> str:
        row = _get(rows, "admin", name)
        if row is None:
            return "-"
        size = f"{row['body_bytes'] / 1024:,.0f} KiB"
        return (
            f"{row['ms']:.0f} ms, {size}"
            if row["outcome"] == "ok"
            else f"{row['ms']:.0f} ms: {row['outcome']}"
        )

    return cell


def _fixed(rows: Rows) -> str:
    row = _get(rows, "lookups", "cached_fixed")
    if row is None:
        return "n/a" if "not_run" in rows else "-"
    return (
        f"{row['p50_ms']:.2f} / {row['p99_ms']:.2f} ms @ {row['target_rate']:,.0f}/s ({row['errors']} errors)"
    )


def _registration(rows: Rows) -> str:
    reg = rows.get("registration")
    if reg is None:
        return "-"
    whole = f"whole after {reg['whole_s']:.2f} s" if reg["whole_s"] is not None else "NOT whole"
    return f"{whole} ({reg['requests']:,} requests, all replied {reg['all_replied_s']:.2f} s)"


def _cpu(phase: str) -> Cell:
    def cell(rows: Rows) -> str:
        cpu = _get(rows, phase, "cpu_seconds")
        if cpu is None:
            return "n/a" if "not_run" in rows else "-"
        failed = _get(rows, phase, "failed")
        return ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()) + (
            f" ({len(failed)} failed)" if failed else ""
        )

    return cell


def _memory(rows: Rows) -> str:
    mem = rows.get("memory")
    if mem is None:
        return "-"
    if "peer_rss_mib" in mem:
        return _num(mem["peer_rss_mib"], "peer RSS {:.0f} MiB")
    workers = " + ".join(f"{v:.0f}" for v in mem["worker_rss_mib"].values())
    after_cycle = (rows.get("rss_mib_after") or {}).get("cycle")
    cycle = (
        f"after the cycle: {' + '.join(f'{v:.0f}' for v in after_cycle.values())}; " if after_cycle else ""
    )
    at_end = " + ".join(f"{v:.0f}" for v in rows.get("rss_mib_at_end", {}).values())
    return (
        f"workers {workers} MiB ({cycle}at the end: {at_end}); "
        f"Redis {mem['redis_used_mib']:.0f} MiB ({mem['redis_bytes_per_queue_entry']:.0f} B/queue entry)"
    )


def _longest(rows: Rows) -> str:
    found = [
        (_get(rows, phase, "longest_command") or {}, phase)
        for phase in ("registration", "lookups", "cycle", "heal")
    ]
    found = [(c, p) for c, p in found if c.get("command")]
    if not found:
        return "n/a" if "not_run" in rows else "none over the threshold"
    command, phase = max(found, key=lambda cp: cp[0]["ms"])
    over = sum(c.get("over_target", 0) for c, _ in found)
    return f"{command['ms']:.1f} ms {command['command']} ({phase}); {over} over 25 ms"


def _redis_ms(phase: str) -> Cell:
    def cell(rows: Rows) -> str:
        value = _get(rows, phase, "redis_ms_per_request")
        return "n/a" if "not_run" in rows else _num(value, "{:.2f} ms")

    return cell


def _heal(rows: Rows) -> str:
    heal = rows.get("heal")
    if heal is None:
        return "n/a" if "not_run" in rows else "-"
    whole = (
        f"whole {heal['whole_after_s']:.2f} s after Redis answered"
        if heal["whole_after_s"] is not None
        else "NOT whole in the window"
    )
    lookups = heal["lookups"]
    probe = heal.get("uncached_worker") or {}
    codes = ", ".join(f"{k}: {v}" for k, v in sorted(probe.get("codes", {}).items()))
    return (
        f"{whole} (away {heal.get('redis_away_s', 0):.2f} s); TOPIC_NOT_EXIST {heal['topic_not_exist']}, "
        f"SYSTEM_ERROR {heal['system_error']}; "
        f"lookups p99 {lookups['p99_ms']:.2f} ms @ {lookups['target_rate']:,.0f}/s; "
        f"uncached worker answers {{{codes}}} p99 {_num(probe.get('p99_ms'), '{:.1f}')} ms"
        f"{_heal_cores(heal.get('timeline') or [])}"
    )


def _heal_cores(steps: list[dict[str, Any]]) -> str:
    """Cores busy while the heal ran (time-weighted over its steps): the machine, Redis, the
    workers. A machine near all its cores means the heal waited for CPU, not for anyone."""
    spans = [s["t"] - (steps[i - 1]["t"] if i else 0.0) for i, s in enumerate(steps)]
    total = sum(spans)
    if total <= 0:
        return ""

    def mean(role: str) -> float:
        return float(sum(s["cores"].get(role, 0.0) * w for s, w in zip(steps, spans, strict=True)) / total)

    roles = set().union(*(s["cores"] for s in steps))
    workers = sum(mean(r) for r in roles if r.startswith("worker"))
    return (
        f"; meanwhile cores busy: machine {mean('machine'):.2f}, Redis {mean('redis'):.2f}, "
        f"workers {workers:.2f}"
    )


ROWS: tuple[tuple[str, Cell], ...] = (
    (
        "shape",
        lambda r: (
            "{groups} groups, {brokers} brokers, {topics:,} topics, {queue_entries:,} queue entries".format(
                **r["facts"]
            )
        ),
    ),
    ("time to full registration", _registration),
    ("cached lookups p50 / p99 (80% of peak)", _lookup("cached")),
    ("uncached lookups p50 / p99 (80% of peak)", _lookup("uncached")),
    ("peer lookups p50 / p99 (80% of peak)", _lookup("peer")),
    ("cached lookups p50 / p99 at the heal's fixed rate", _fixed),
    (
        "worker µs CPU / cached, uncached lookup",
        lambda r: " / ".join(
            _num(_get(r, "lookups", k, "server_us_per_lookup"), "{:.0f}") for k in ("cached", "uncached")
        ),
    ),
    (
        "Redis µs / uncached lookup",
        lambda r: _num(_get(r, "lookups", "uncached", "redis_us_per_lookup"), "{:.0f}"),
    ),
    ("GET_ALL_TOPIC_LIST", _admin("all_topic_list")),
    ("GET_BROKER_CLUSTER_INFO", _admin("cluster_info")),
    ("GET_TOPICS_BY_CLUSTER", _admin("topics_by_cluster")),
    ("CPU s, full registration", _cpu("registration")),
    ("CPU s per re-registration cycle", _cpu("cycle")),
    ("Redis ms / new registration request", _redis_ms("registration")),
    ("Redis ms / unchanged re-registration", _redis_ms("cycle")),
    ("memory", _memory),
    ("longest Redis command", _longest),
    ("heal (Redis restarted empty)", _heal),
)


def render(result: dict[str, Any]) -> str:
    columns = [
        (shape, target, rows)
        for shape, targets in result["shapes"].items()
        for target, rows in targets.items()
    ]
    meta = result["meta"]
    lines = [
        f"bench-scale {meta['started']} git {meta['git']}; {meta['cpus_usable']} CPUs ({meta['cpu_model']}), "
        f"load average at start {meta['loadavg_at_start'][0]:.2f}, "
        f"other processes {meta['background_cores']:.2f} cores; "
        f"load generators at nice {result['config'].get('loadgen_nice', 0)}, remoting by "
        f"{meta.get('loadgen_remoting', 'python')}; "
        + cpu_speed.describe(meta.get("speed"), meta.get("speed_at_end")),
        "",
        "| row | " + " | ".join(f"{shape} / {target}" for shape, target, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for label, cell in ROWS:
        cells = []
        for _, _, rows in columns:
            try:
                cells.append(cell(rows))
            except (KeyError, TypeError, ValueError):
                cells.append("-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for shape, target, rows in columns:
        for phase, why in rows.get("failures", {}).items():
            lines.append(f"\n{shape}/{target} {phase} FAILED: {why.splitlines()[0]}")
        for what, why in rows.get("not_run", {}).items():
            lines.append(f"\n{shape}/{target} cannot run {what}: {why}")
    return "\n".join(lines)
