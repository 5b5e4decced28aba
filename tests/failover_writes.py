"""Write through a Sentinel failover and count what the fleet acknowledged but lost.

Used by tests/integration/test_replicated_writes.py, and by hand to measure both settings
(docs/operations.md, "When Redis is in trouble")::

    .venv/bin/python -m tests.failover_writes --runs 8 --replicas 0
    .venv/bin/python -m tests.failover_writes --runs 5 --replicas 1 --redis-replicas 2 --kill
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
from dataclasses import dataclass, field

import redis

from namesrv.config import Settings
from namesrv.keys import REMOTING, STORE
from namesrv.sim.client import RemotingClient
from tests.conftest import close_client, start_client
from tests.redis_topologies import sentinel_setup, topology_settings

NAMESPACE = "FAILOVER"


ACKED_AFTER_PATIENCE_S = 60.0


@dataclass
class FailoverWrites:
    acked: int = 0
    refused: int = 0
    lost: list[str] = field(default_factory=list)
    error_window_s: float = 0.0  # first to last refused write
    switch_s: float = 0.0  # SENTINEL FAILOVER until Sentinel names the new master
    acked_after_switch: int = 0  # writes acknowledged once Sentinel named the new master


def replicated_settings(url: str, replicas: int = 1, timeout_ms: int = 300) -> Settings:
    return dataclasses.replace(
        topology_settings(url), redisWriteReplicas=replicas, redisWriteReplicaTimeoutMillis=timeout_ms
    )


def _master(sentinel: redis.Redis) -> int:
    return int(sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")[1])


async def fail_over(sentinel: redis.Redis) -> None:
    for _ in range(300):  # right after another failover Sentinel may not take a new one yet
        try:
            sentinel.execute_command("SENTINEL", "FAILOVER", "mymaster")
            return
        except redis.ResponseError as exc:
            if not str(exc).startswith(("NOGOODSLAVE", "INPROG")):
                raise
            await asyncio.sleep(0.1)
    raise RuntimeError("Sentinel did not start a failover")


async def _settled(sentinel: redis.Redis, replicas: int, timeout: float = 60.0) -> None:
    """Until all ``replicas`` replicate from the master and Sentinel knows them: right after an
    earlier failover the old master may not have joined yet, and writes waiting for it would fail."""
    for _ in range(int(timeout / 0.1)):
        known = len(sentinel.sentinel_slaves("mymaster"))
        r = redis.Redis(port=_master(sentinel), decode_responses=True)
        try:
            info = r.info("replication")
        except redis.RedisError:
            info = {}
        finally:
            r.close()
        online = [
            k
            for k, v in info.items()
            if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
        ]
        if info.get("role") == "master" and known == replicas and len(online) == replicas:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the Sentinel set did not settle")


def signal_server(port: int, sig: signal.Signals) -> int:
    """Send ``sig`` to the redis-server on ``port`` (kill -9, SIGSTOP, SIGCONT); returns its pid."""
    r = redis.Redis(port=port)
    try:
        pid = int(r.info("server")["process_id"])
    finally:
        r.close()
    os.kill(pid, sig)
    return pid


def master_port(sentinel_port: int) -> int:
    """The master's port as the Sentinel on ``sentinel_port`` names it now."""
    s = redis.Redis(port=sentinel_port)
    try:
        return _master(s)
    finally:
        s.close()


async def write_through_failover(
    settings: Settings,
    sentinel_port: int,
    writers: int = 4,
    after_s: float = 2.0,
    kill: bool = False,
    replicas: int = 1,
    acked_after: int = 0,
) -> FailoverWrites:
    """Once the set's ``replicas`` all follow the master, ``writers`` connections put distinct KV
    entries without pause; 0.5 s in, a failover starts
    (SENTINEL FAILOVER, or with ``kill`` a kill -9 of the master, which Sentinel notices after its
    down-after time), and writing goes on ``after_s`` past Sentinel's switch, and until
    ``acked_after`` writes were acknowledged since the switch (a count, not a time: a busy machine
    writes fewer per second; at most ``ACKED_AFTER_PATIENCE_S`` more)."""
    app = await start_client(settings)
    addr = f"127.0.0.1:{app.app[REMOTING].port}"
    acked: list[str] = []
    refused_at: list[float] = []
    stop = asyncio.Event()
    enough = asyncio.Event()  # ``acked_after`` writes acknowledged since the switch
    at_switch = -1  # writes acknowledged when Sentinel named the new master (-1: not yet)
    loop = asyncio.get_running_loop()

    async def writer(n: int) -> None:
        async with await RemotingClient.connect(addr) as conn:
            i = 0
            while not stop.is_set():
                key = f"w{n}-{i}"
                i += 1
                reply = await conn.invoke(100, {"namespace": NAMESPACE, "key": key, "value": key}, timeout=5)
                if reply.code == 0:
                    acked.append(key)
                    if at_switch >= 0 and len(acked) - at_switch >= acked_after:
                        enough.set()
                else:
                    refused_at.append(loop.time())

    sentinel = redis.Redis(port=sentinel_port)
    result = FailoverWrites()
    try:
        await _settled(sentinel, replicas)
        old = _master(sentinel)
        tasks = [asyncio.create_task(writer(n)) for n in range(writers)]
        await asyncio.sleep(0.5)
        started = loop.time()
        if kill:
            signal_server(old, signal.SIGKILL)
        else:
            await fail_over(sentinel)
        for _ in range(1500):
            if _master(sentinel) != old:
                break
            await asyncio.sleep(0.02)
        result.switch_s = loop.time() - started
        new = _master(sentinel)
        at_switch = len(acked)
        await asyncio.sleep(after_s)
        if acked_after:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(enough.wait(), ACKED_AFTER_PATIENCE_S)
        stop.set()
        await asyncio.gather(*tasks)
        # What the new master holds is the outcome: the old one, demoted, resyncs from it.
        stored = redis.Redis(port=new, decode_responses=True)
        table = stored.hgetall(app.app[STORE].k.kv(NAMESPACE))
        stored.close()
        result.acked = len(acked)
        result.acked_after_switch = len(acked) - at_switch
        result.refused = len(refused_at)
        result.lost = [k for k in acked if table.get(k) != k]
        if refused_at:
            result.error_window_s = max(refused_at) - min(refused_at)
    finally:
        sentinel.close()
        await close_client(app)
    return result


async def _main(runs: int, replicas: int, redis_replicas: int, kill: bool, after_s: float) -> None:
    for run in range(runs):
        # a kill leaves one server fewer: every run gets a set-up of its own
        with sentinel_setup(redis_replicas) as (url, _, _, sentinel_port):
            settings = replicated_settings(url, replicas, timeout_ms=500)
            r = await write_through_failover(
                settings, sentinel_port, after_s=after_s, kill=kill, replicas=redis_replicas
            )
            print(
                f"run {run + 1}: {'kill -9' if kill else 'SENTINEL FAILOVER'}, {redis_replicas} replica(s), "
                f"redisWriteReplicas={replicas} acked {r.acked} refused {r.refused} "
                f"lost {len(r.lost)} error window {r.error_window_s * 1000:.0f} ms "
                f"switch {r.switch_s * 1000:.0f} ms",
                flush=True,
            )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--replicas", type=int, default=1, help="redisWriteReplicas")
    p.add_argument("--redis-replicas", type=int, default=1, help="replicas of the Redis master")
    p.add_argument("--kill", action="store_true", help="kill -9 the master instead of SENTINEL FAILOVER")
    p.add_argument("--after", type=float, default=2.0, help="seconds of writing past Sentinel's switch")
    a = p.parse_args()
    asyncio.run(_main(a.runs, a.replicas, a.redis_replicas, a.kill, a.after))
