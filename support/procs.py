"""Child processes with their output in a log file, tied to their parent (an interrupted bench or
test run leaves none behind): what the bench and the fault suite start their servers with."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from namesrv.procs import die_with_parent


@dataclass
class Proc:
    """A child process with its output in a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").splitlines()
            return "\n".join(text[-lines:])
        return ""

    async def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.popen.wait, timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                await asyncio.to_thread(self.popen.wait)
        self._log.close()


def spawn(name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> Proc:
    log_path = log_dir / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by Proc.stop
    popen = subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=os.getcwd(),
        preexec_fn=die_with_parent(),  # an interrupted bench leaves no process behind
    )
    return Proc(name, popen, log_path, log)
