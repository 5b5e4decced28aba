"""The worker process: start-up, readiness, SIGTERM, embedded Redis (run as a real subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from redis.asyncio import Redis

from namesrv.app import begin_drain
from namesrv.procs import die_with_parent
from namesrv.sim.broker import SimBroker, topic_configs
from namesrv.sim.client import RemotingClient, RemotingClientError
from namesrv.store.keyspace import Keyspace
from support.ports import free_port
from tests.builders import register_json
from tests.integration.test_redis_trouble import RedisProcess


class Worker:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.http, self.remoting = free_port(), free_port()
        self.env = {
            **os.environ,
            **env,
            "NAMESRV_HTTP_PORT": str(self.http),
            "NAMESRV_REMOTING_PORT": str(self.remoting),
            "NAMESRV_LISTEN_HOST": "127.0.0.1",
        }
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    async def start(self, *, wait_ready: bool = True) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "namesrv",
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_parent(),  # no stray worker when a test run is killed
        )
        if wait_ready:
            await self.wait_ready()

    async def wait_ready(self) -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(150):
                assert self.proc is not None
                if self.proc.returncode is not None:
                    raise AssertionError(f"worker exited: {await self.output()}")
                try:
                    async with session.get(f"{self.url}/readyz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError("worker did not become ready")

    async def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        code = await asyncio.wait_for(self.proc.wait(), 30)
        return code, await self.output()

    async def output(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None and self.proc.stderr is not None
        out = await self.proc.stdout.read()
        err = await self.proc.stderr.read()
        return (out + err).decode(errors="replace")


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def test_sigterm_drains_and_never_removes_brokers(
    redis_url: str, namespace: str, tmp_path: Path, redis: Redis
) -> None:
    worker = Worker({"NAMESRV_REDIS_URL": redis_url, "NAMESRV_NAMESPACE": namespace}, tmp_path)
    await worker.start()
    conn = await RemotingClient.connect(f"127.0.0.1:{worker.remoting}")
    await SimBroker(
        conn, "DefaultCluster", "broker-a", "127.0.0.1:10911", topics=topic_configs(["TopicTest", "TBW102"])
    ).register()
    code, output = await worker.stop()
    assert code == 0, output
    assert "The Name Server boot success. serializeType=JSON, address 127.0.0.1:" in output
    assert "shutdown requested: draining (readiness is now false)" in output
    with pytest.raises(RemotingClientError):
        await conn.invoke(106)  # the worker closed our connection ...
    k = Keyspace(namespace)
    assert await redis.hexists(k.live, "DefaultCluster/127.0.0.1:10911")  # ... and kept the broker
    kinds = [f["kind"] for _, f in await redis.xrange(k.events)]
    assert "close" not in kinds and "unregister" not in kinds


async def test_embedded_redis_persists_across_restarts(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    env = {"NAMESRV_REDIS_URL": "", "REDIS_URL": "", "NAMESRV_DATA_DIR": str(tmp_path / "data")}
    worker = Worker(env, tmp_path)
    await worker.start()
    async with session.get(f"{worker.url}/readyz") as resp:
        body = await resp.json()
    assert body["embeddedRedis"] is True and "embedded Redis" in body["warning"]
    async with session.post(f"{worker.url}/v1/brokers/register", json=register_json()) as resp:
        assert resp.status == 200

    second = Worker(env, tmp_path)  # same data directory: must refuse, not open a second registry
    await second.start(wait_ready=False)
    assert second.proc is not None
    code = await asyncio.wait_for(second.proc.wait(), 30)
    output = await second.output()
    assert code == 1
    assert "namesrv: cannot start:" in output and "is used by another namesrv" in output

    code, output = await worker.stop()
    assert code == 0, output
    restarted = Worker(env, tmp_path)
    await restarted.start()
    try:
        async with session.get(f"{restarted.url}/v1/routes/TopicTest") as resp:
            assert resp.status == 200  # the append-only file kept the registry
    finally:
        await restarted.stop()


async def test_readiness_turns_false_when_draining(client: Any) -> None:
    ready = await client.get("/readyz")
    assert ready.status == 200
    body = await ready.json()
    assert body["status"] == "ready" and body["embeddedRedis"] is False and len(body["scriptsBundle"]) == 12
    begin_drain(client.app)
    draining = await client.get("/readyz")
    assert draining.status == 503
    assert (await draining.json())["problems"] == ["draining: shutting down"]
    assert (await client.get("/livez")).status == 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
async def test_a_killed_worker_takes_its_embedded_redis_with_it(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    env = {"NAMESRV_REDIS_URL": "", "REDIS_URL": "", "NAMESRV_DATA_DIR": str(tmp_path / "data")}
    worker = Worker(env, tmp_path)
    await worker.start()
    assert worker.proc is not None
    try:
        children = {_command(pid): pid for pid in _children(worker.proc.pid)}
        # the embedded redis-server and the freshness probe (freshnessProbeEnabled)
        assert sorted(children) == ["namesrv.registry.freshness_probe", "redis-server"]
    finally:
        worker.proc.kill()  # SIGKILL: no cleanup runs in the worker
        await asyncio.wait_for(worker.proc.wait(), 30)
    for name, pid in children.items():
        for _ in range(100):
            state = _process_state(pid)
            if state in (None, "Z"):  # gone, or exited and waiting to be reaped
                break
            await asyncio.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"the {name} child outlived its killed worker")
    # The children held the worker's stdout and stderr too: read both to their end, so their pipe
    # transports close now, not while this test's event loop closes (an end of file arriving
    # then made the loop's close fail, "Device or resource busy", beside a CPU hog).
    await asyncio.wait_for(worker.output(), 30)


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _command(pid: int) -> str:
    """The program a child runs: its executable, or the module for ``python -m``."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    return argv[argv.index("-m") + 1] if "-m" in argv else Path(argv[0].split()[0]).name  # redis retitles


def _process_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


async def redis_server(port: int, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "redis-server",
        *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *args),
        stdout=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),
    )


async def test_a_worker_without_redis_listens_at_once_and_becomes_ready_when_redis_comes(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """Listeners first: a liveness probe must not kill a pod that only waits for Redis."""
    port = free_port()
    worker = Worker({"NAMESRV_REDIS_URL": f"redis://127.0.0.1:{port}/0"}, tmp_path)
    await worker.start(wait_ready=False)
    redis_proc: asyncio.subprocess.Process | None = None
    try:
        for _ in range(100):
            try:
                async with session.get(f"{worker.url}/livez") as resp:
                    if resp.status == 200:
                        break
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)
        async with session.get(f"{worker.url}/livez") as resp:
            assert resp.status == 200
        async with session.get(f"{worker.url}/readyz") as resp:
            body = await resp.json()
            assert resp.status == 503
            assert body["problems"][0].startswith("redis unreachable for ")
        async with await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as client:
            reply = await client.invoke(105, {"topic": "TopicTest"})
            assert reply.code == 1 and (reply.remark or "").startswith("route unavailable: Redis unreachable")
        redis_proc = await redis_server(port)
        await worker.wait_ready()
        resp = await session.post(f"{worker.url}/v1/brokers/register", json=register_json())
        assert resp.status == 200
    finally:
        code, output = await worker.stop()
        if redis_proc is not None:
            redis_proc.terminate()
            await redis_proc.wait()
    assert code == 0, output
    # One line per state change while waiting, not one per retry.
    assert output.count("waiting for Redis at") == 1, output
    assert "Traceback" not in output


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://:wrong-password@127.0.0.1:{port}/0", "AuthenticationError"),
        ("mongodb://127.0.0.1:{port}/0", "ValueError"),
    ],
)
async def test_a_redis_that_can_never_work_stops_the_worker_with_one_line(
    tmp_path: Path, url: str, expected: str
) -> None:
    port = free_port()
    redis_proc = await redis_server(port, "--requirepass", "s3cret")
    try:
        worker = Worker({"NAMESRV_REDIS_URL": url.format(port=port)}, tmp_path)
        await worker.start(wait_ready=False)
        assert worker.proc is not None
        code = await asyncio.wait_for(worker.proc.wait(), 20)
        output = await worker.output()
    finally:
        redis_proc.terminate()
        await redis_proc.wait()
    assert code != 0
    errors = [line for line in output.splitlines() if line.startswith("namesrv: cannot start")]
    assert len(errors) == 1 and expected in errors[0], output
    assert "wrong-password" not in output and "Traceback" not in output


async def readyz_status(session: aiohttp.ClientSession, worker: Worker) -> int:
    async with session.get(f"{worker.url}/readyz") as resp:
        return resp.status


async def test_ready_is_logged_only_once_readyz_says_so(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """Issue 25 row 7: a worker started while Redis is unreachable logs "listening" at once and
    "ready" only once /readyz answers 200, and "ready again" when Redis is back after an outage."""
    redis_server = RedisProcess()  # its port; nothing listens there yet
    worker = Worker({"NAMESRV_REDIS_URL": redis_server.url, "NAMESRV_NAMESPACE": "ready-log"}, tmp_path)
    await worker.start(wait_ready=False)
    try:
        for _ in range(300):  # the HTTP port answers, not ready
            with contextlib.suppress(aiohttp.ClientError):
                if await readyz_status(session, worker) == 503:
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the worker's HTTP port never answered")
        await redis_server.start()
        await worker.wait_ready()
        await redis_server.stop()
        for _ in range(300):
            if await readyz_status(session, worker) == 503:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("/readyz did not turn 503 with Redis stopped")
        await redis_server.start()
        await worker.wait_ready()
    finally:
        code, output = await worker.stop()
        await redis_server.stop()
        redis_server.dir.cleanup()
    assert code == 0, output
    lines = output.splitlines()  # the log (stderr); the boot line is on stdout

    def first(text: str, *, end: bool = False) -> int:
        return next(i for i, line in enumerate(lines) if (line.endswith(text) if end else text in line))

    listening, waiting = first(" listening: remoting on 127.0.0.1:"), first("waiting for Redis at")
    ready = first(" ready", end=True)
    assert "namesrv.runner: namesrv-fleet worker " in lines[ready]
    assert listening < ready
    assert waiting < first("connected to Redis at") < ready  # not ready while Redis was away
    assert first("Redis unreachable (") < first("ready again: Redis answers")
    assert "The Name Server boot success. serializeType=JSON, address 127.0.0.1:" in output
