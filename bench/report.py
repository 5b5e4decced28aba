"""The targets of the issue, checked against a run's results, and the one table ``make bench``
prints (the same text is stored in the JSON as ``table``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

JAVA_ROUTE_QPS = 31_000  # Java NameServer on a 2-core machine, client-bound (issue)
CEILING_RATIO = 0.80
P99_MS = 5.0
NEW_10K_MS = 50.0
UNCHANGED_10K_MS = 5.0
BUMPED_10K_MS = 10.0  # one topic of 10k changed
STEADY_LUA_MS = 1.0
NEW_10K_LUA_MS = 25.0
SILENT_LAG_MS = 1000  # gone within timeout + 1 s: at most 1 s after the deadline
CRASH_LAG_MS = 1000


@dataclass(frozen=True)
class Target:
    name: str
    value: str
    target: str
    result: str  # PASS, MISS or N/A
    note: str = ""


def _verdict(ok: bool | None) -> str:
    return "N/A" if ok is None else ("PASS" if ok else "MISS")


def _find(rows: Sequence[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row["scenario"].get(k) == v for k, v in match.items()):
            return row
    return None


def ceiling_ratio(rows: Sequence[dict[str, Any]], row: dict[str, Any]) -> float | None:
    s = row["scenario"]
    ceiling = _find(rows, protocol=s["protocol"], server="ceiling", size=s["size"], load="peak")
    if ceiling is None or not ceiling["rps"]:
        return None
    return float(row["rps"]) / float(ceiling["rps"])


NOISY_CORES = 0.25  # other processes used more than this during a window: say so next to it
LOAD_BOUND = 0.85  # a load process this busy may itself be the bottleneck
SETTLE_LIMIT = 29.0  # bench.procs.settle gave up waiting for the servers to go idle


def _errors_note(row: dict[str, Any]) -> str:
    notes = []
    if row["errors"]:
        notes.append(f"{row['errors']} error replies {row['error_codes']}")
    other = row["cores"].get("other", 0.0)
    if other > NOISY_CORES:
        notes.append(f"other processes used {other:.2f} cores")
    if row.get("settle_seconds", 0.0) >= SETTLE_LIMIT:
        notes.append("the servers were still busy with the previous phase's backlog")
    if row["loadgen_core_max"] > LOAD_BOUND:
        notes.append(f"a load process was {row['loadgen_core_max']:.0%} busy: the generator may be the limit")
    return "; ".join(notes)


def _phase_noise(row: dict[str, Any]) -> str:
    other = row.get("phase_cores", {}).get("other", 0.0)
    return f"other processes used {other:.2f} cores" if other > NOISY_CORES else ""


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n != 1 else ''}"


def evaluate(result: dict[str, Any]) -> list[Target]:
    targets: list[Target] = []
    rows: list[dict[str, Any]] = result.get("lookups", [])
    lf = result["config"]["load_fraction"]
    # --- route lookups vs the ceiling, per worker ---
    for size in result["config"]["fleet_sizes"]:
        for pattern in ("hot", "spread"):
            row = _find(rows, protocol="remoting", server="fleet", size=size, pattern=pattern, load="peak")
            name = f"route lookups ÷ bare ceiling, {_workers(size)}, remoting {pattern}"
            if row is None:
                if rows:
                    targets.append(Target(name, "-", f"≥ {CEILING_RATIO:.0%}", "N/A", "not measured"))
                continue
            ratio = ceiling_ratio(rows, row)
            value = "-" if ratio is None else f"{ratio:.0%} ({row['rps']:,.0f}/s)"
            ok = None if ratio is None else ratio >= CEILING_RATIO and not row["errors"]
            targets.append(Target(name, value, f"≥ {CEILING_RATIO:.0%}", _verdict(ok), _errors_note(row)))
    # --- 2 workers vs the Java NameServer ---
    for pattern in ("hot", "spread"):
        row = _find(rows, protocol="remoting", server="fleet", size=2, pattern=pattern, load="peak")
        if row is not None:
            ok = row["rps"] >= JAVA_ROUTE_QPS and not row["errors"]
            targets.append(
                Target(
                    f"route lookups, 2 workers, remoting {pattern}",
                    f"{row['rps']:,.0f}/s",
                    f"≥ {JAVA_ROUTE_QPS:,}/s (Java)",
                    _verdict(ok),
                    _errors_note(row),
                )
            )
    # --- p99 at 80% of peak ---
    for row in rows:
        s = row["scenario"]
        if s["server"] != "fleet" or s["load"] == "peak" or s["protocol"] != "remoting":
            continue
        achieved = row["rps"] / row["target_rate"] if row["target_rate"] else 0.0
        note = _errors_note(row)
        if achieved < 0.95:
            note = (note + "; " if note else "") + f"only {achieved:.0%} of the offered rate was served"
        ok = row["p99_ms"] <= P99_MS and achieved >= 0.95 and not row["errors"]
        targets.append(
            Target(
                f"p99 at {lf:.0%} of peak, {_workers(s['size'])}, remoting {s['pattern']}",
                f"{row['p99_ms']:.2f} ms @ {row['rps']:,.0f}/s",
                f"≤ {P99_MS:g} ms",
                _verdict(ok),
                note,
            )
        )
    # --- registration ---
    regs: list[dict[str, Any]] = [
        r for r in result.get("registration", []) if r.get("target", "fleet") == "fleet"
    ]
    if regs:
        size = max(r["topics"] for r in regs)
        label = f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)
        scale = "" if size == 10_000 else f" (sized {label}; target is for 10k)"
        for kind, limit in (("new", NEW_10K_MS), ("unchanged", UNCHANGED_10K_MS), ("bumped", BUMPED_10K_MS)):
            row = next((r for r in regs if r["topics"] == size and r["kind"] == kind), None)
            if row is None:
                continue
            targets.append(
                Target(
                    f"REGISTER_BROKER {kind}, {label} topics (median of {len(row['runs'])})",
                    f"{row['median_ms']:.1f} ms (max {row['max_ms']:.1f})",
                    f"≤ {limit:g} ms",
                    _verdict(row["median_ms"] <= limit),
                    "; ".join(n for n in (scale.strip(), _phase_noise(row)) if n),
                )
            )
        new = next((r for r in regs if r["topics"] == size and r["kind"] == "new"), None)
        if new is not None:
            targets.append(
                Target(
                    f"longest Lua call, new {label}-topic broker",
                    f"{new['lua_max_ms']:.2f} ms ({new['lua_max_script']})",
                    f"< {NEW_10K_LUA_MS:g} ms",
                    _verdict(new["lua_max_ms"] < NEW_10K_LUA_MS),
                    scale.strip(),
                )
            )
    # --- steady-state Lua ---
    steady = result.get("steady")
    if steady:
        every = steady["lua"].get("*")
        if every:
            slow = every.get("over_1ms", 0)
            note = (
                f"{slow:.0f} of {every['calls']:,.0f} calls ≥ 1 ms; p99.9 {every['p999_us']:.0f} µs"
                if slow
                else ""
            )
            other = steady.get("cores", {}).get("other", 0.0)
            if other > NOISY_CORES:
                note += ("; " if note else "") + f"other processes used {other:.2f} cores"
            targets.append(
                Target(
                    "longest Lua call, steady state (reads, heartbeats, unchanged)",
                    f"{every['max_us'] / 1000:.3f} ms ({every['longest_script']})",
                    f"< {STEADY_LUA_MS:g} ms",
                    _verdict(every["max_us"] / 1000 < STEADY_LUA_MS),
                    note,
                )
            )
    # --- liveness ---
    liveness = result.get("liveness", {})
    silent = liveness.get("silent")
    if silent:
        timeout = silent["timeout_ms"]
        missing = silent["brokers"] - silent["removed"]
        value = (
            "-"
            if silent["max_ms"] is None
            else f"timeout + {silent['max_ms']} ms (max of {silent['removed']})"
        )
        ok = None if silent["max_ms"] is None else silent["max_ms"] <= SILENT_LAG_MS and not missing
        targets.append(
            Target(
                f"silent broker removed (timeout {timeout} ms)",
                value,
                "≤ timeout + 1 s",
                _verdict(ok if silent["removed"] else False),
                f"{missing} not removed" if missing else "",
            )
        )
    crashed = liveness.get("crashed")
    if crashed:
        missing = crashed["brokers"] - crashed["removed"]
        value = "-" if crashed["max_ms"] is None else f"{crashed['max_ms']} ms (max of {crashed['removed']})"
        ok = None if crashed["max_ms"] is None else crashed["max_ms"] <= CRASH_LAG_MS and not missing
        targets.append(
            Target(
                "crashed broker removed after connection reset",
                value,
                "≤ 1 s",
                _verdict(ok if crashed["removed"] else False),
                f"{missing} not removed" if missing else "",
            )
        )
    return targets


# ---- rendering ----------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _num(value: float | None, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def _mib(n: float) -> str:
    return f"{n / 1048576:.1f} MiB"


def _servers(s: dict[str, Any]) -> str:
    if s["server"] == "fleet":
        return _workers(s["size"])
    if s["server"] == "ceiling":
        return f"{s['size']}× ceiling"
    return f"peer {s['server']}"


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


def render(result: dict[str, Any], targets: Sequence[Target]) -> str:
    meta, cfg = result["meta"], result["config"]
    out: list[str] = []
    head = f"namesrv-fleet bench · {meta['started']} · git {meta['git']}"
    if cfg.get("label"):
        head += f" · {cfg['label']}"
    out += [head, "=" * len(head)]
    bg = meta.get("background_cores")
    out.append(
        f"machine   {meta['cpu_count']} cores (os.cpu_count; {meta['cpus_usable']} usable) · "
        f"{meta['cpu_model']} · {meta['platform']}"
    )
    out.append(
        f"software  Python {meta['python']} · {meta['loop']} · aiohttp {meta['aiohttp']} · "
        f"orjson {meta['orjson']} · redis-py {meta['redis_py']} · Redis {meta.get('redis_server', '?')}"
    )
    env = ", ".join(f"{k}={v}" for k, v in meta["worker_env"].items())
    wc = meta.get("worker_config", {})
    out.append(
        f"fleet     up to {max(cfg['fleet_sizes'])} worker processes on one Redis · "
        f"scanNotActiveBrokerInterval={wc.get('scanNotActiveBrokerInterval', '?')} ms, "
        f"registerChunkTopics={wc.get('registerChunkTopics', '?')} · worker env: {env}"
    )
    sizes = meta.get("route_reply_bytes")
    if sizes:
        out.append(
            f"routes    {cfg['topics']:,} topics on {cfg['spread_brokers']} brokers ('spread'), "
            f"{cfg['hot_topics']} of them 'hot'; a route reply is {sizes['remoting']:,} B (remoting body) / "
            f"{sizes['http']:,} B (HTTP), and the ceiling answers with those very bytes"
        )
    out.append(
        f"load      {cfg['procs']} load generator processes · remoting {cfg['conns']} conns × "
        f"{cfg['depth']} in flight, HTTP {cfg['http_conns']} conns × {cfg['http_depth']} pipelined "
        "(per process, per server) · "
        f"warm-up {cfg['warmup']:g} s, window {cfg['duration']:g} s"
    )
    out.append(
        f"cores     everything shares the {meta['cpu_count']} cores: load generator, servers, Redis and "
        "whatever else runs; the cpu columns say who used them"
    )
    if bg is not None:
        warn = "  << the machine was not quiet: numbers are pessimistic" if bg > 0.25 else ""
        out.append(f"          before the run, other processes kept {bg:.2f} cores busy{warn}")
    if cfg.get("smoke"):
        out.append("SMOKE RUN: tiny sizes, checks that the harness works; the numbers mean nothing")
    out.append("")

    rows: list[dict[str, Any]] = result.get("lookups", [])
    if rows:
        out.append(
            "Route lookups: 'peak' = closed loop; 'N%' = open loop at N% of that peak; "
            "latency from write to reply"
        )
        table_rows = []
        for row in rows:
            s = row["scenario"]
            c = row["cores"]
            servers = _servers(s)
            ratio = ceiling_ratio(rows, row) if s["server"] == "fleet" and s["load"] == "peak" else None
            table_rows.append(
                [
                    s["protocol"],
                    servers,
                    s["pattern"],
                    s["load"],
                    _num(row["rps"], ",.0f"),
                    _num(row["p50_ms"], ".2f"),
                    _num(row["p99_ms"], ".2f"),
                    "-" if ratio is None else f"{ratio:.0%}",
                    str(row["errors"]),
                    f"{c.get('load', 0):.2f}",
                    f"{row['loadgen_core_max']:.2f}",
                    f"{c.get('server', 0):.2f}",
                    _num(row.get("server_us_per_request"), ".0f"),
                    f"{c.get('redis', 0):.2f}",
                    f"{c.get('other', 0):.2f}",
                    _num(row["redis_lua_calls_per_request"], ".2f") if s["server"] == "fleet" else "-",
                    _num(row["redis_us_per_request"], ".1f") if s["server"] == "fleet" else "-",
                ]
            )
        out += _table(
            [
                "proto",
                "servers",
                "topics",
                "load",
                "req/s",
                "p50 ms",
                "p99 ms",
                "÷ceil",
                "errors",
                "cpu:load",
                "busiest",
                "server",
                "µs/req",
                "redis",
                "other",
                "lua/req",
                "redis µs/req",
            ],
            table_rows,
            right=set(range(4, 17)),
        )
        out.append(
            "  cpu: cores used in the window (1.00 = one core) by the load processes (all; 'busiest' = the "
            "busiest one),"
        )
        out.append(
            "  the servers under test (µs/req: their CPU per successful lookup), Redis, and other processes; "
            "lua/req and redis µs/req from Redis INFO commandstats"
        )
        slow = [(r["scenario"], r["lua_over_1ms"]["*"]) for r in rows if r["lua_over_1ms"].get("*")]
        for s, lua in slow:
            servers = _workers(s["size"]) if s["server"] == "fleet" else f"{s['size']}× ceiling (background)"
            out.append(
                f"  ! {s['protocol']}, {servers}, {s['pattern']}, {s['load']}: "
                f"{lua['calls']:.0f} Lua calls ≥ 1 ms, longest {lua['max_us'] / 1000:.2f} ms "
                f"({lua['longest_script']})"
            )
        out.append("")

    regs: list[dict[str, Any]] = result.get("registration", [])
    if regs:
        other = regs[0].get("phase_cores", {}).get("other")
        out.append(
            "REGISTER_BROKER over remoting, one at a time (client latency; Lua per registration from SLOWLOG)"
            + ("" if other is None else f"; other processes used {other:.2f} cores meanwhile")
        )
        out += _table(
            [
                "target",
                "topics",
                "kind",
                "body",
                "median ms",
                "max ms",
                "Lua calls",
                "Lua ms total",
                "decode ms",
                "rest ms",
                "Redis floor ms",
                "longest Lua ms",
                "script",
            ],
            [
                [
                    r.get("target", "fleet"),
                    f"{r['topics']:,}",
                    r["kind"],
                    f"{r['body_bytes'] / 1024:,.0f} KiB",
                    f"{r['median_ms']:.1f}",
                    f"{r['max_ms']:.1f}",
                    f"{r['lua_calls']:.0f}",
                    f"{r['lua_total_ms']:.2f}",
                    f"{r.get('decode_ms', 0.0):.2f}",
                    f"{r.get('rest_ms', 0.0):.2f}",
                    f"{r['floor_ms']:.2f}" if "floor_ms" in r else "",
                    f"{r['lua_max_ms']:.2f}",
                    r["lua_max_script"],
                ]
                for r in regs
            ],
            right={1, 3, 4, 5, 6, 7, 8, 9, 10, 11},
        )
        out.append("")
    out += side_by_side(result)

    steady = result.get("steady")
    if steady:
        counts = steady["counts"]
        reads = steady["reads"]
        out.append(
            f"Steady-state Lua ({steady['seconds']:g} s: {reads['completed']:,} route reads at "
            f"{reads['target_rate']:,.0f}/s, {counts['heartbeats']:,} heartbeats, "
            f"{counts['unchanged_small'] + counts['unchanged_big']:,} unchanged re-registrations; "
            "every call logged)"
        )
        sc = steady.get("cores")
        if sc:
            noisy = sc.get("other", 0.0) > NOISY_CORES
            out.append(
                f"  cores used: workers {sc.get('workers', 0):.2f}, Redis {sc.get('redis', 0):.2f}, "
                f"load {sc.get('load', 0):.2f}, bench {sc.get('bench', 0):.2f}, "
                f"other processes {sc.get('other', 0):.2f}"
                + ("  << Redis may be descheduled mid-call: maxima are pessimistic" if noisy else "")
            )
        out += _table(
            ["script", "calls", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "≥ 1 ms"],
            [
                [
                    "(all)" if name == "*" else name,
                    f"{v['calls']:,.0f}",
                    f"{v['p50_us']:.0f}",
                    f"{v['p99_us']:.0f}",
                    f"{v['p999_us']:.0f}",
                    f"{v['max_us']:.0f}",
                    f"{v['over_1ms']:.0f}",
                ]
                for name, v in steady["lua"].items()
            ],
            right={1, 2, 3, 4, 5, 6},
        )
        big = steady.get("unchanged_big_ms") or []
        out.append(
            f"  route reads meanwhile: p50 {reads['p50_ms']:.2f} ms, p99 {reads['p99_ms']:.2f} ms, "
            f"max {reads['max_ms']:.1f} ms"
            + (
                f"; unchanged {result['config']['topics']:,}-topic re-registrations: "
                + ", ".join(f"{x:.0f}" for x in big)
                + " ms"
                if big
                else ""
            )
        )
        out.append("")

    liveness = result.get("liveness", {})
    if liveness:
        out.append(f"Liveness (removal seen in the change log; workers sweep every {cfg['sweep_ms']} ms)")
        silent = liveness.get("silent")
        if silent:
            out.append(
                f"  silent, timeout {silent['timeout_ms']} ms: {silent['removed']}/{silent['brokers']} "
                f"removed; after the deadline: median {_num(silent['median_ms'], '.0f')} ms, "
                f"max {_num(silent['max_ms'], '.0f')} ms ({silent['lags_ms']})"
            )
        crashed = liveness.get("crashed")
        if crashed:
            out.append(
                f"  crashed (TCP reset): {crashed['removed']}/{crashed['brokers']} removed; after the reset: "
                f"median {_num(crashed['median_ms'], '.0f')} ms, max {_num(crashed['max_ms'], '.0f')} ms "
                f"({crashed['lags_ms']})"
            )
        out.append("")

    mem = result.get("memory")
    rss = result.get("rss", {})
    if mem or rss:
        out.append("Memory")
        if mem:
            for i, step in enumerate(mem["per_10k_topics"]):
                who = "first broker (creates the topics)" if i == 0 else f"broker {i + 1} (same topics)"
                out.append(
                    f"  Redis per 10k topics, {who}: {_mib(step['dataset'])} dataset = "
                    f"{_mib(step['tables'])} tables + {_mib(step['events'])} change log "
                    f"(used_memory +{_mib(step['used_memory'])})"
                )
            last = mem["samples"][-1]
            out.append(
                f"  Redis after {len(mem['per_10k_topics'])} brokers × {mem['topics']:,} topics: used_memory "
                f"{_mib(last['used_memory'])}, change log {_mib(last['events_bytes'])}"
            )
        for when, workers in rss.items():
            text = ", ".join(
                f"{name} {_mib(v['VmRSS'] * 1024)} (peak {_mib(v['VmHWM'] * 1024)})"
                for name, v in workers.items()
            )
            out.append(f"  worker RSS {when}: {text}")
        out.append("")

    if result.get("failures"):
        out.append("FAILED PHASES")
        out += [f"  {name}: {err}" for name, err in result["failures"].items()]
        out.append("")

    out.append("Targets (issue: checked by reading this table)")
    out += _table(
        ["measurement", "value", "target", "result", "note"],
        [[t.name, t.value, t.target, t.result, t.note] for t in targets],
    )
    counts = {k: sum(1 for t in targets if t.result == k) for k in ("PASS", "MISS", "N/A")}
    out.append(f"{counts['PASS']} PASS, {counts['MISS']} MISS, {counts['N/A']} N/A")
    return "\n".join(out)


def targets_json(targets: Sequence[Target]) -> list[dict[str, str]]:
    return [asdict(t) for t in targets]
