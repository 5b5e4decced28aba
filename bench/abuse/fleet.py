"""The fleet under attack: a private Redis and two ``python -m namesrv`` workers on loopback, with
the default settings (log level INFO: what a deployment logs is what the table counts), or the
same with the ACL on for the attack that needs it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from redis.asyncio import Redis

from bench import procs
from namesrv.domain.codes import RequestCode
from namesrv.sim.client import RemotingClient, RemotingClientError

WORKERS = 2
NAMESPACE = "abuse"
# The app account the ACL attack signs with; legitimate brokers and clients send unsigned requests
# from 127.0.0.1, a globalWhiteRemoteAddresses address, as 4.x brokers do from their subnet.
APP_ACCOUNT = ("abuse-app", "abuse-app-secret")
ACL_FILE = f"""globalWhiteRemoteAddresses:
  - 127.0.0.1
accounts:
  - accessKey: {APP_ACCOUNT[0]}
    secretKey: {APP_ACCOUNT[1]}
    whiteRemoteAddress:
    admin: false
  - accessKey: abuse-admin
    secretKey: abuse-admin-secret
    whiteRemoteAddress: 127.0.0.1
    admin: true
"""
_starts = itertools.count(1)


@dataclass
class Fleet:
    kind: str  # "plain" or "acl"
    log_dir: Path
    redis_proc: procs.Proc
    redis: Redis
    workers: list[procs.Worker] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.workers]

    @property
    def log_paths(self) -> list[Path]:
        return [w.proc.log_path for w in self.workers]

    async def health(self) -> list[str]:
        """Per worker: 'serving' (alive, /readyz 200, a route lookup answered), or what is wrong."""
        return list(await asyncio.gather(*(_health(w) for w in self.workers)))

    async def stop(self) -> None:
        for worker in self.workers:
            await worker.proc.stop()
        await self.redis.aclose()
        await self.redis_proc.stop()


async def start_fleet(kind: str, log_root: Path, worker_env: dict[str, str]) -> Fleet:
    log_dir = log_root / f"{kind}-fleet-{next(_starts)}"
    log_dir.mkdir(parents=True)
    redis_proc, url = await procs.start_redis(log_dir)
    env = {"NAMESRV_LOG_LEVEL": "INFO", **worker_env}
    if kind == "acl":
        acl = log_dir / "plain_acl.yml"
        acl.write_text(ACL_FILE)
        env |= {"NAMESRV_ACL_ENABLE": "true", "NAMESRV_ACL_FILE": str(acl)}
    fleet = Fleet(kind, log_dir, redis_proc, Redis.from_url(url))
    try:
        for i in range(WORKERS):
            fleet.workers.append(procs.start_worker(f"worker-{i}", url, NAMESPACE, log_dir, env))
        await asyncio.gather(*(procs.wait_http_ready(w.proc, f"{w.url}/readyz") for w in fleet.workers))
    except BaseException:
        await fleet.stop()
        raise
    return fleet


async def _health(worker: procs.Worker) -> str:
    code = worker.proc.popen.poll()
    if code is not None:
        return f"exited with status {code}"
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.get(f"{worker.url}/readyz") as resp,
        ):
            if resp.status != 200:
                return f"/readyz {resp.status}"
        client = await asyncio.wait_for(RemotingClient.connect(f"127.0.0.1:{worker.remoting_port}"), 5)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return f"not answering: {type(exc).__name__}"
    try:
        reply = await client.invoke(RequestCode.GET_BROKER_CLUSTER_INFO, timeout=5)
    except (RemotingClientError, TimeoutError) as exc:
        return f"remoting not answering: {type(exc).__name__}"
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()
    return "serving" if reply.code == 0 else f"cluster info code {reply.code}"
