"""How fast this machine runs right now: the yardstick for comparing runs.

The same code on the same 2-core VM has shown lookup peaks, registration and heal times 1.5-2x
apart from one hour to the next, with nothing else running, and a Java NameServer beside it
slowed down alike: the host gives the VM faster or slower service. A run's figures mean little
without the speed they were taken at, so both benches time two probes before and after they run
and print them beside their tables:

* ``loop_s``: an empty 3-million-iteration Python loop (one core's raw speed);
* ``round_trip_us``: one byte sent back and forth between two processes over a socket pair
  (two system calls and two wake-ups each way: what every request on loopback pays). It tells
  machines apart where the loop does not (a run with the loop at 0.050 s still registered at
  half the speed of the fast state), but it falls when the machine is busier: with a CPU hog
  running, both ends share one core and no idle vCPU has to be woken.

``python -m bench.cpu_speed`` prints both as JSON; the benches run it as a child process (it
forks, which a process with threads and an event loop must not).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

LOOP_ITERATIONS = 3_000_000
ROUNDS = 5
ROUND_TRIPS = 20_000


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


def round_trip_us(trips: int = ROUND_TRIPS) -> float:
    """Mean µs of one round trip of a byte to a forked child and back over a socket pair."""
    if trips <= 0:
        raise ValueError("trips must be positive")
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child echoes each byte, then leaves without running any cleanup
        ours.close()
        try:
            for _ in range(trips):
                theirs.sendall(theirs.recv(1))
        finally:
            os._exit(0)
    theirs.close()
    try:
        started = time.perf_counter()
        for _ in range(trips):
            ours.sendall(b"x")
            ours.recv(1)
        elapsed = time.perf_counter() - started
    finally:
        ours.close()
        os.waitpid(pid, 0)
    return round(elapsed / trips * 1e6, 1)


def probe(rounds: int = ROUNDS) -> dict[str, float]:
    return {"loop_s": loop_seconds(rounds=rounds), "round_trip_us": round_trip_us()}


def for_run(smoke: bool) -> dict[str, Any]:
    """Both probes, from a child process (it blocks: the benches call it in a thread); one round
    for a smoke run (its figures mean nothing). A probe that fails is reported as such: it must
    not fail the bench."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.cpu_speed", "--rounds", "1" if smoke else str(ROUNDS)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        speed: dict[str, Any] = json.loads(done.stdout)
        return speed
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def describe(start: dict[str, Any] | None, end: dict[str, Any] | None) -> str:
    """The header's words: ``speed (3M-iteration Python loop, socket round trip): 0.062 s, 14.1 µs
    at start; 0.071 s, 15.0 µs at end``."""

    def one(speed: dict[str, Any]) -> str:
        if "loop_s" not in speed:
            return "not measured"
        return f"{speed['loop_s']:.3f} s, {speed['round_trip_us']:.1f} µs"

    if not start:
        return "speed not measured"
    text = f"speed (3M-iteration Python loop, socket round trip): {one(start)} at start"
    if end:
        text += f"; {one(end)} at end"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="loop timings to take the median of")
    print(json.dumps(probe(parser.parse_args().rounds)))


if __name__ == "__main__":
    main()
