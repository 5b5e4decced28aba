"""Secrets never leave the process: a worker on a password-protected Redis shows the password
nowhere — not in GET_NAMESRV_CONFIG (319), GET /v1/config, /metrics, ``namesrv -p``, nor its logs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from namesrv.domain.codes import RequestCode
from namesrv.sim.client import RemotingClient
from tests.integration.test_lifecycle import Worker
from tests.redis_server import local_redis

PASSWORD = "s3cret-Pw-4711"


@pytest.fixture(scope="module")
def protected_redis_url() -> Iterator[str]:
    with local_redis(("--requirepass", PASSWORD)) as url:
        yield url.replace("redis://", f"redis://default:{PASSWORD}@", 1)


def test_print_config_masks_the_password(protected_redis_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "namesrv", "-p"],
        env={"NAMESRV_REDIS_URL": protected_redis_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert PASSWORD not in out.stdout + out.stderr
    masked = protected_redis_url.replace(PASSWORD, "***")
    assert f"redisUrl={masked}\n" in out.stdout


async def test_a_running_worker_shows_the_password_nowhere(protected_redis_url: str, tmp_path: Path) -> None:
    worker = Worker({"NAMESRV_REDIS_URL": protected_redis_url, "NAMESRV_LOG_LEVEL": "DEBUG"}, tmp_path)
    await worker.start()
    masked = protected_redis_url.replace(PASSWORD, "***")
    try:
        async with await RemotingClient.connect(f"127.0.0.1:{worker.remoting}") as c:
            reply = await c.invoke(RequestCode.GET_NAMESRV_CONFIG)
            assert reply.code == 0 and reply.body is not None
            text = reply.body.decode()
            assert f"redisUrl={masked}\n" in text
            assert PASSWORD not in text
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{worker.url}/v1/config") as resp:
                config = await resp.json()
            assert config["redisUrl"] == masked
            async with session.get(f"{worker.url}/metrics") as resp:
                assert PASSWORD not in await resp.text()
    finally:
        code, output = await worker.stop()
    assert code == 0
    assert "namesrv-fleet worker" in output  # the logs were captured
    assert f"registry in Redis at {masked}\n" in output
    assert PASSWORD not in output


async def test_a_wrong_password_is_not_printed_either(protected_redis_url: str, tmp_path: Path) -> None:
    wrong = "Wr0ng-pw-0815"
    worker = Worker({"NAMESRV_REDIS_URL": protected_redis_url.replace(PASSWORD, wrong)}, tmp_path)
    await worker.start(wait_ready=False)
    assert worker.proc is not None and worker.proc.stderr is not None
    # Start-up keeps retrying Redis; reading up to its first complaint is enough.
    lines: list[str] = []
    while not lines or "AuthenticationError" not in lines[-1]:
        line = await asyncio.wait_for(worker.proc.stderr.readline(), 30)
        if not line:
            break  # the worker exited: its output is checked all the same
        lines.append(line.decode())
    _, rest = await worker.stop()
    output = "".join(lines) + rest
    assert "AuthenticationError" in output
    assert wrong not in output and PASSWORD not in output
