"""What an attack cost the fleet, read from outside: worker memory from ``/proc``, the lines the
workers logged, Redis' ``used_memory``."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from redis.asyncio import Redis

from bench.procs import memory_kib

SAMPLE_EVERY = 0.1  # s between RSS samples
SAMPLE_LINES = 5  # log lines kept per worker and attack, to say what was logged


def rss_kib(pid: int) -> int:
    return memory_kib(pid).get("VmRSS", 0)


def reset_peak(pid: int) -> bool:
    """Reset the process' VmHWM to its RSS now (``/proc/<pid>/clear_refs``, Linux 4.0+), so the
    next reading is the peak of this attack alone. False where the kernel does not allow it."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class MemoryWatch:
    """The peak RSS of some processes from now on: VmHWM after a reset, and samples every 100 ms
    (the only source when the reset is not allowed)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak = {pid: rss_kib(pid) for pid in pids}
        self.hwm_reset = all([reset_peak(pid) for pid in pids])
        self._task = asyncio.ensure_future(self._sample())

    async def _sample(self) -> None:
        while True:
            for pid in self.pids:
                with contextlib.suppress(OSError):
                    self.peak[pid] = max(self.peak[pid], rss_kib(pid))
            await asyncio.sleep(SAMPLE_EVERY)

    async def stop(self) -> dict[int, int]:
        """Peak RSS (KiB) of each process since the watch started."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        for pid in self.pids:
            with contextlib.suppress(OSError):
                if self.hwm_reset:
                    self.peak[pid] = max(self.peak[pid], memory_kib(pid).get("VmHWM", 0))
        return self.peak


class LogMark:
    """Where each log file ended when the mark was made: the lines written after it."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.offsets = [_size(p) for p in paths]

    def lines(self) -> tuple[list[int], list[str]]:
        """Lines written to each file since the mark, and the first few of them."""
        counts: list[int] = []
        samples: list[str] = []
        for path, offset in zip(self.paths, self.offsets, strict=True):
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                text = ""
            counts.append(text.count("\n"))
            samples.extend(f"{path.stem}: {line[:300]}" for line in text.splitlines()[:SAMPLE_LINES])
        return counts, samples


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


async def used_memory(redis: Redis) -> int:
    return int((await redis.info("memory"))["used_memory"])
