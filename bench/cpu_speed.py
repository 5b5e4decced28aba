"""How fast one core of this machine runs Python right now: the yardstick for comparing runs.

The same code on the same 2-core VM has shown lookup peaks and heal times that differ by 1.5-2x
from one hour to the next, with nothing else running: the host gives the VM faster or slower
cores. A run's figures mean little without the speed they were taken at, so both benches time a
fixed pure-Python loop before and after they run and print it beside their tables.
"""

from __future__ import annotations

import statistics
import time

LOOP_ITERATIONS = 3_000_000
ROUNDS = 5


def loop_seconds(iterations: int = LOOP_ITERATIONS, rounds: int = ROUNDS) -> float:
    """The median of ``rounds`` timings of an empty ``for`` loop of ``iterations``. The median, not
    the fastest: this VM's cores change speed within seconds (rounds of 0.05 and 0.14 s a second
    apart), and a run lasts minutes."""
    if iterations <= 0 or rounds <= 0:
        raise ValueError("iterations and rounds must be positive")
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(iterations):
            pass
        timings.append(time.perf_counter() - started)
    return round(statistics.median(timings), 3)


def for_run(smoke: bool) -> float:
    """A bench's timing: one round for a smoke run (its figures mean nothing anyway)."""
    return loop_seconds(rounds=1 if smoke else ROUNDS)


def describe(start: float | None, end: float | None) -> str:
    """The header's words: ``3M-iteration Python loop 0.062 s at start, 0.071 s at end``."""
    if start is None:
        return "Python loop speed not measured"
    text = f"{LOOP_ITERATIONS // 1_000_000}M-iteration Python loop {start:.3f} s at start"
    if end is not None:
        text += f", {end:.3f} s at end"
    return text
