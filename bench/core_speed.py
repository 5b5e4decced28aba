"""How fast each core of the machine ran, step by step through a window.

On the 2-core VM the same open-loop load keeps a worker's event loop busy 60-70 ms of a 100 ms
step one moment and 90-100 ms the next, with no wait for a CPU in between: each vCPU switches
between two speeds, about 2x apart, for a few hundred ms to whole seconds at a time (the host's
service, as :mod:`bench.cpu_speed` found between runs, but within a window). 80% of a peak measured while the
cores were fast is more than a worker can do while its core is slow, and no software keeps its
p99 through that. So the benches run this probe beside each measured window: a child process
that every ``interval`` pins itself to each core in turn and times a fixed piece of work in its
own CPU time (a wait for the core is not counted, only how fast the core ran it).

``python -m bench.core_speed --interval 0.05`` prints ``<monotonic s> <cpu> <µs>`` lines until it
is stopped; :class:`CoreSpeedProbe` runs it and sums a window up by step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from typing import Any

WORK_ITERATIONS = 10_000  # 0.25-0.5 ms of one core per step: short beside the 5 ms lookup target
INTERVAL_S = 0.1  # one timing of each core per 100 ms step
# A step whose work took this many times the fast time ran slow. Timings cluster at the fast time
# (to about 1.15x) and at 1.5-1.9x it, with steps between where a core changed speed within them.
SLOW_RATIO = 1.3
FAST_QUANTILE = 0.1  # a window's own fast time: this quantile of all its timings


def _work(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total += i
    return total


def sample_forever(interval: float, iterations: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    out = sys.stdout
    while True:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            started = time.thread_time_ns()
            _work(iterations)
            took = (time.thread_time_ns() - started) / 1000
            out.write(f"{time.monotonic():.4f} {cpu} {took:.0f}\n")
        out.flush()
        time.sleep(interval)


def by_step(
    samples: list[tuple[float, int, float]],
    start: float,
    step: float,
    steps: int,
    reference: float | None = None,
) -> dict[str, Any] | None:
    """Each core's median µs per step of the window from ``start`` (monotonic s), the fast time
    (the window's own, or ``reference``, the run's fastest so far, when that is faster: a window
    that ran on slow cores throughout has no fast time of its own), the median of the window's
    timings, and how many steps each core spent at the slow speed."""
    if not samples:
        return None
    cpus = sorted({cpu for _, cpu, _ in samples})
    cells: list[dict[int, list[float]]] = [{c: [] for c in cpus} for _ in range(steps)]
    for at, cpu, us in samples:
        i = int((at - start) // step)
        if 0 <= i < steps:
            cells[i][cpu].append(us)
    timings = sorted(us for _, _, us in samples)
    fast = timings[int(FAST_QUANTILE * (len(timings) - 1))]
    if reference is not None:
        fast = min(fast, reference)
    rows: list[list[float | None]] = [
        [round(statistics.median(c[cpu]), 0) if c[cpu] else None for cpu in cpus] for c in cells
    ]
    bound = SLOW_RATIO * fast
    slow = {
        str(cpu): len([r for r in rows if (took := r[k]) is not None and took >= bound])
        for k, cpu in enumerate(cpus)
    }
    return {
        "cpus": cpus,
        "fast_us": round(fast, 0),
        "median_us": round(statistics.median(timings), 0),
        "us_by_step": rows,
        "slow_steps": slow,
        "steps": steps,
    }


class CoreSpeedProbe:
    """The probe as a child process over one window: ``launch`` in the warm-up, ``start`` when
    the window opens, ``stop`` when it ends. A probe that cannot run leaves the window without
    it (it must not fail the bench). Windows judge their steps against the fastest time any
    window of this run has seen (``fastest``), not only their own."""

    fastest: float | None = None  # the run's: the benches measure one window after another

    def __init__(self, step: float = 0.1, interval: float = INTERVAL_S) -> None:
        self.step = step
        self.interval = interval
        self._proc: asyncio.subprocess.Process | None = None
        self._started = 0.0

    async def launch(self) -> None:
        """Start the child ahead of the window (in its warm-up): a Python process takes a few
        hundred ms to start on a busy machine, and a short window would get no timing at all,
        while its start-up took CPU from the window's first moments."""
        if self._proc is not None:
            return
        with contextlib.suppress(OSError):
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.core_speed",
                "--interval",
                str(self.interval),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )

    async def start(self) -> None:
        """The window opens: its steps count from now (the child launched now if not yet)."""
        await self.launch()
        self._started = time.monotonic()

    async def stop(self) -> dict[str, Any] | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        ended = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        out, _ = await proc.communicate()
        samples = []
        for line in out.decode(errors="replace").splitlines():
            parts = line.split()
            with contextlib.suppress(ValueError):
                if len(parts) == 3:
                    samples.append((float(parts[0]), int(parts[1]), float(parts[2])))
        steps = max(1, int((ended - self._started) / self.step))
        found = by_step(samples, self._started, self.step, steps, CoreSpeedProbe.fastest)
        if found is not None:
            CoreSpeedProbe.fastest = found["fast_us"]
        return found


def describe(speed: dict[str, Any] | None) -> str:
    """A missed target's words: ``the cores ran at the slow speed (...) in 12 / 3 of 49 steps``."""
    if not speed or not speed.get("slow_steps"):
        return ""
    counts = " / ".join(str(n) for n in speed["slow_steps"].values())
    return (
        f"the cores ran at the slow speed (the probe's work ≥ {SLOW_RATIO}x the fastest, "
        f"{speed['fast_us']:.0f} µs; median {speed.get('median_us', 0):.0f}) "
        f"in {counts} of {speed['steps']} steps"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=INTERVAL_S, help="seconds between samples")
    parser.add_argument(
        "--iterations", type=int, default=WORK_ITERATIONS, help="the fixed work's loop length"
    )
    args = parser.parse_args()
    if args.interval <= 0 or args.iterations <= 0:
        raise SystemExit("--interval and --iterations must be positive")
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        sample_forever(args.interval, args.iterations)


if __name__ == "__main__":
    main()
