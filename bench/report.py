"""The one table ``make bench`` prints (the same text is stored in the JSON as ``table``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench import cpu_speed
from bench.overload import section as overload_section
from bench.side_by_side import side_by_side
from bench.tables import mib as _mib
from bench.tables import num as _num
from bench.tables import table as _table
from bench.targets import NOISY_CORES, Target, ceiling_ratio, workers_label


def _servers(s: dict[str, Any]) -> str:
    if s["server"] == "fleet":
        return workers_label(s["size"])
    if s["server"] == "ceiling":
        return f"{s['size']}× ceiling"
    return f"peer {s['server']}"


def render(result: dict[str, Any], targets: Sequence[Target]) -> str:
    out = _header(result) + _lookups_section(result) + _registration_section(result)
    out += side_by_side(result) + overload_section(result)
    out += _steady_section(result) + _liveness_section(result) + _memory_section(result)
    out += _closing_section(result, targets)
    return "\n".join(out)


def _header(result: dict[str, Any]) -> list[str]:
    """What ran where: the machine, the software, the fleet, the load."""
    out: list[str] = []
    meta, cfg = result["meta"], result["config"]
    head = f"namesrv-fleet bench · {meta['started']} · git {meta['git']}"
    if cfg.get("label"):
        head += f" · {cfg['label']}"
    out += [head, "=" * len(head)]
    bg = meta.get("background_cores")
    out.append(
        f"machine   {meta['cpu_count']} cores (os.cpu_count; {meta['cpus_usable']} usable) · "
        f"{meta['cpu_model']} · {meta['platform']} · "
        + cpu_speed.describe(meta.get("speed"), meta.get("speed_at_end"))
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
        f"load      {cfg['procs']} load generator processes at nice {cfg.get('loadgen_nice', 0)}, remoting "
        f"by {meta.get('loadgen_remoting', 'python')} · "
        f"remoting {cfg['conns']} conns × "
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
    return out


def _lookups_section(result: dict[str, Any]) -> list[str]:
    """Route lookups, one row per scenario, with who used the cores."""
    out: list[str] = []
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
            servers = (
                workers_label(s["size"]) if s["server"] == "fleet" else f"{s['size']}× ceiling (background)"
            )
            out.append(
                f"  ! {s['protocol']}, {servers}, {s['pattern']}, {s['load']}: "
                f"{lua['calls']:.0f} Lua calls ≥ 1 ms, longest {lua['max_us'] / 1000:.2f} ms "
                f"({lua['longest_script']})"
            )
        out.append("")
    return out


def _registration_section(result: dict[str, Any]) -> list[str]:
    """REGISTER_BROKER timings, one row per target, size and kind."""
    out: list[str] = []
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
                "in Redis ms",
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
                    f"{r['floor_server_ms']:.2f}" if "floor_server_ms" in r else "",
                    f"{r['lua_max_ms']:.2f}",
                    r["lua_max_script"],
                ]
                for r in regs
            ],
            right={1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
        )
        out.append("")
    return out


def _steady_section(result: dict[str, Any]) -> list[str]:
    """Lua call times while the fleet idles along as in production."""
    out: list[str] = []
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
    return out


def _liveness_section(result: dict[str, Any]) -> list[str]:
    """How long after its deadline a silent or crashed broker was gone."""
    out: list[str] = []
    cfg = result["config"]
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
    return out


def _memory_section(result: dict[str, Any]) -> list[str]:
    """Redis bytes per 10k topics and the workers' RSS."""
    out: list[str] = []
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
    return out


def _closing_section(result: dict[str, Any], targets: Sequence[Target]) -> list[str]:
    """Failed phases, then the targets with their verdicts."""
    out: list[str] = []
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
    return out
