"""A redis-server process of a test's own, which the test restarts on the same port (empty: no
persistence) or stops with SIGSTOP; ``tests/integration/conftest.py`` makes one per test."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import tempfile

from namesrv.procs import die_with_parent
from support.ports import free_port


class RedisProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.TemporaryDirectory(prefix="namesrv-trouble-")
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            "redis-server",
            *("--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            *("--dir", self.dir.name),
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            await self.proc.wait()

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
