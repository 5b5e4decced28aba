"""One shape against a peer (a Java NameServer already running): what it can run and, for the
rest, why not. A peer has no Redis: Redis memory, Redis time and the longest Redis command do not
apply; the heal does not either (the bench cannot empty a peer's state from outside, and a Java
NameServer keeps it only in its heap: a restart loses every route until each broker's next
registration, apache/rocketmq#5322). Its route lookups are one row (it has no route cache)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench import procs
from bench.loadgen import LoadPool
from bench.peers import Peer
from bench.scale.brokers import Registered
from bench.scale.config import ScaleConfig
from bench.scale.fleet_shape import WHOLE_LIMIT_S, lookup_job, rss_mib, warm
from bench.scale.probes import admin_calls, lookup_window, wait_whole, whole_by_lookup
from bench.scale.shapes import Shape

NOT_RUN = {
    "heal": "no shared store to empty: a Java NameServer's routes live in its heap; a restart "
    "loses them all until every broker registers again (up to 30 s, apache/rocketmq#5322)",
    "uncached": "no route cache: every lookup reads its in-memory tables (the 'lookups' row)",
    "redis": "no Redis",
}


async def run_peer_shape(
    cfg: ScaleConfig, shape: Shape, peer: Peer, pool: LoadPool, progress: Callable[[str], None]
) -> dict[str, Any]:
    out: dict[str, Any] = {"facts": shape.facts(), "not_run": NOT_RUN}
    registered = Registered(shape, [peer.addr], heartbeats=False)
    roles = {"server": [peer.pid] if peer.pid else [], "load": pool.pids}
    try:
        await registered.connect()
        registered.encode_all()
        progress(f"{shape.name} on {peer.name}: registration")
        meter = procs.CpuMeter({"server": roles["server"]})
        meter.start()
        started = time.perf_counter()
        requests = await registered.register_all(cfg.reg_concurrency)
        replied = time.perf_counter() - started
        whole_s, state = await wait_whole(lambda: whole_by_lookup(peer.addr, shape), WHOLE_LIMIT_S, every=0.5)
        wall = time.perf_counter() - started
        cores = meter.stop()
        out["registration"] = {
            "requests": requests,
            "all_replied_s": round(replied, 3),
            "whole_s": None if whole_s is None else round(replied + whole_s, 3),
            "whole": bool(state.get("whole")),
            "state": state,
            "cpu_seconds": {"server": round(cores["server"] * wall, 2)} if peer.pid else None,
        }
        out["admin"] = await admin_calls(peer.addr)
        topics = list(shape.groups_of)
        await warm([peer.addr], topics)
        progress(f"{shape.name} on {peer.name}: lookups")
        peak = await lookup_window(
            pool, lookup_job(cfg, "peer/peak", (peer.remoting,), topics, 0.0), roles, None
        )
        rate = peak["rps"] * cfg.load_fraction
        row = await lookup_window(
            pool, lookup_job(cfg, "peer/80%", (peer.remoting,), topics, rate), roles, None
        )
        row["peak_rps"] = peak["rps"]
        out["lookups"] = {"peer": row}
        progress(f"{shape.name} on {peer.name}: cycle")
        meter.start()
        started = time.perf_counter()
        cycle_requests, failed = await registered.cycle(cfg.cycle_seconds)
        wall = time.perf_counter() - started
        cores = meter.stop()
        out["cycle"] = {
            "seconds": round(wall, 2),
            "requests": cycle_requests,
            "failed": failed,
            "cpu_seconds": {"server": round(cores["server"] * wall, 3)} if peer.pid else None,
        }
        out["memory"] = {"peer_rss_mib": rss_mib(peer.pid) if peer.pid else None}
    except Exception as exc:
        out.setdefault("failures", {})["peer"] = f"{type(exc).__name__}: {exc}"
    finally:
        await registered.close()
    return out
