"""The processes under test and the facts about them: Redis, fleet workers, the bare ceiling
server, and what ``/proc`` says about their CPU time and memory.

Everything runs on loopback, each in its own OS process, so the scheduler shares the machine's
cores between them exactly as it would in production on a small node.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from support.ports import free_port
from support.procs import Proc, spawn
from support.redis_launcher import spawn_redis, wait_for_ping

__all__ = ["Proc", "spawn"]  # re-exported: the bench reaches them as procs.Proc, procs.spawn

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ---- /proc ------------------------------------------------------------------------------------


def cpu_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """User + system CPU time of one process so far (its threads included, children not; with
    ``reaped_children``, those of its children that ended and it waited for)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        stat = f.read()
    # The command name may contain spaces; the fields after it start after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / CLOCK_TICKS


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (of any of its threads)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with (
                contextlib.suppress(OSError),
                open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f,
            ):
                found.extend(int(c) for c in f.read().split())
    return found


def family_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and of all its descendants, live or ended: a load process whose native
    generator (a child it runs per job, and waits for) does the sending."""
    total = 0.0
    with contextlib.suppress(OSError):
        total += cpu_seconds(pid, reaped_children=True)
    return total + sum(family_cpu_seconds(child) for child in children(pid))


def cpu_wait_seconds(pid: int, *, main_thread_only: bool = False) -> float | None:
    """How long the threads of ``pid`` have been runnable but not running, waiting for a CPU, so
    far (the kernel's ``schedstat``); None where the kernel keeps no schedstat or the process is
    gone. A thread that ended takes its share with it: a window's difference can only undercount.
    ``main_thread_only``: the process's first thread alone (a worker's event loop)."""
    waits = cpu_waits(pid)
    if waits is None:
        return None
    every, main, _, _ = waits
    return main if main_thread_only else every


def cpu_waits(pid: int) -> tuple[float, float | None, float, float | None] | None:
    """:func:`cpu_wait_seconds` of all of ``pid``'s threads and of its main thread, how long its
    other threads ran (on a CPU), and how long its main thread ran, in one pass over its threads
    (the main thread's None if it ended first); None as there."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    waited_ns, main_ns, main_ran_ns, others_ran_ns, seen = 0, None, None, 0, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                ran, waited = (int(v) for v in f.read().split()[:2])  # on-CPU ns, runqueue-wait ns
        except (OSError, ValueError):
            continue  # the thread ended between the listing and the read
        waited_ns += waited
        if tid == str(pid):
            main_ns, main_ran_ns = waited, ran
        else:
            others_ran_ns += ran
        seen = True
    if not seen:
        return None
    return (
        waited_ns / 1e9,
        None if main_ns is None else main_ns / 1e9,
        others_ran_ns / 1e9,
        None if main_ran_ns is None else main_ran_ns / 1e9,
    )


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (peak resident) of a process, in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores summed."""
    with open("/proc/stat", encoding="ascii") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


def cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


class CpuMeter:
    """CPU time of a set of processes (and of the whole machine) over a window; for the roles in
    ``with_children``, their child processes' too (the load processes' native generators)."""

    def __init__(self, pids: dict[str, list[int]], with_children: tuple[str, ...] = ("load",)) -> None:
        self.pids = pids
        self.with_children = with_children
        self._start: dict[str, float] = {}
        self._machine: tuple[float, float] = (0.0, 0.0)
        self._t0 = 0.0

    def _sample(self) -> dict[str, float]:
        return {
            role: sum((family_cpu_seconds if role in self.with_children else cpu_seconds)(p) for p in pids)
            for role, pids in self.pids.items()
        }

    def start(self) -> None:
        self._start = self._sample()
        self._machine = machine_cpu()
        self._t0 = time.perf_counter()

    def stop(self) -> dict[str, float]:
        """Cores used by each role over the window (1.0 = one core fully busy), plus 'machine'."""
        end = self._sample()
        busy, total = machine_cpu()
        wall = max(time.perf_counter() - self._t0, 1e-9)
        cores = {role: (end[role] - self._start.get(role, end[role])) / wall for role in end}
        cores["machine"] = (busy - self._machine[0]) / wall
        cores["machine_idle"] = ((total - self._machine[1]) - (busy - self._machine[0])) / wall
        return cores


class CpuWaitMeter:
    """How long a set of processes waited for a CPU over a window: in all, and in each ``step``
    (100 ms, beside the load generator's 100 ms latency buckets) the wait of the one that waited
    most. Many short waits are what sharing a core costs every process (a 2-core machine with two
    workers and two load generators keeps each worker off a CPU a fifth of the time, tails or
    none); a tail comes from a wait concentrated in one step while the process had little
    headroom: it builds a backlog that the process then drains slowly. Hence per step, per process.
    Each step also keeps the main threads' own largest wait: a worker's event loop waiting for a
    core, or (the rest of the process's wait) another of its threads, such as the change feed's,
    which the loop may then wait on for the GIL. And how long those other threads ran in each step:
    a loop thread that waits for the GIL while they hold it sleeps, and no CPU wait shows it. And
    how long the busiest main thread ran: a loop that falls behind with no wait at all, on a CPU
    the whole step, needed more CPU for the same open-loop load (each request dearer, or the
    machine's cores slower that moment), which no wait shows either."""

    def __init__(self, pids: list[int], step: float = 0.1) -> None:
        self.pids = pids
        self.step = step
        self._first: list[float] | None = None
        self._steps: list[float] = []
        self._main_steps: list[float] = []
        self._others_ran: list[float] = []
        self._main_ran: list[float] = []
        self._lengths: list[float] = []  # how long each step really lasted (ms)
        self._task: asyncio.Task[None] | None = None

    def _sample(self) -> list[float] | None:
        """Each process's wait in all, then each one's main thread's, then how long each one's
        other threads ran, then how long each one's main thread ran, in ``pids`` order."""
        read = [cpu_waits(p) for p in self.pids]
        if not read or None in read:
            return None
        found = [w for w in read if w is not None]
        mains = [main for _, main, _, _ in found]
        main_ran = [ran for _, _, _, ran in found]
        if None in mains or None in main_ran:
            return None
        return (
            [every for every, _, _, _ in found]
            + [m for m in mains if m is not None]
            + [others for _, _, others, _ in found]
            + [r for r in main_ran if r is not None]
        )

    def start(self) -> None:
        self._first = self._sample()
        self._steps = []
        self._main_steps = []
        self._others_ran = []
        self._main_ran = []
        self._lengths = []
        if self._first is not None:
            self._task = asyncio.get_running_loop().create_task(self._follow(self._first))

    async def _follow(self, last: list[float]) -> None:
        at = time.perf_counter()
        while True:
            await asyncio.sleep(self.step)
            now = self._sample()
            if now is None:
                return
            grew = [max(0.0, n - b) * 1000 for n, b in zip(now, last, strict=True)]
            count = len(self.pids)
            self._steps.append(max(grew[:count]))
            self._main_steps.append(max(grew[count : 2 * count]))
            self._others_ran.append(max(grew[2 * count : 3 * count]))
            self._main_ran.append(max(grew[3 * count :]))
            self._lengths.append((time.perf_counter() - at) * 1000)
            last, at = now, time.perf_counter()

    def stop(self) -> dict[str, Any] | None:
        """{'ms': all the processes' waits summed, 'by_step_ms': each step's largest wait of one
        process, 'max_step_ms': the largest of those, 'main_by_step_ms': the same of the main
        threads alone, 'others_ran_by_step_ms' and 'main_ran_by_step_ms': the most that one
        process's other threads, and its main thread, ran}, or None where schedstat was not there
        to read."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        end = self._sample()
        if self._first is None or end is None:
            return None
        count = len(self.pids)
        waited = sum(max(0.0, e - b) for e, b in zip(end[:count], self._first[:count], strict=True))
        return {
            "ms": round(waited * 1000, 1),
            "max_step_ms": round(max(self._steps, default=0.0), 1),
            "by_step_ms": [round(v, 1) for v in self._steps],
            "main_by_step_ms": [round(v, 1) for v in self._main_steps],
            # the most that one process's threads other than its main one ran in each step
            "others_ran_by_step_ms": [round(v, 1) for v in self._others_ran],
            # the most that one process's main thread ran in each step (near the step's length:
            # that loop had no idle moment)
            "main_ran_by_step_ms": [round(v, 1) for v in self._main_ran],
            # each step's real length: the bench's own loop can run a step late
            "step_ms": [round(v, 1) for v in self._lengths],
        }


# An idle worker is not at 0 cores: its change feed polls Redis every few tens of ms to keep the
# 100 ms freshness bound (~0.09 cores measured on the 2-core VM). A server still draining a
# backlog runs near a whole core. So "settled" is every process under this, not their sum under
# a floor that two idle workers never reach (that waited out the whole limit before every window).
IDLE_CORES_PER_PROCESS = 0.2


async def settle(
    pids: list[int], *, idle_cores: float = IDLE_CORES_PER_PROCESS, limit: float = 30.0
) -> float:
    """Wait until each of ``pids`` uses less than ``idle_cores`` (a server still draining the
    backlog of an overloaded phase must not eat into the next one). Returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        before = [cpu_seconds(p) for p in pids]
        await asyncio.sleep(0.2)
        used = [(cpu_seconds(p) - b) / 0.2 for p, b in zip(pids, before, strict=True)]
        if max(used, default=0.0) < idle_cores:
            break
    return time.perf_counter() - started


def with_other(cores: dict[str, float]) -> dict[str, float]:
    """Add 'other': the machine's busy cores that none of the measured roles used."""
    ours = sum(v for k, v in cores.items() if k not in ("machine", "machine_idle", "other"))
    return {**cores, "other": max(0.0, cores.get("machine", 0.0) - ours)}


# ---- processes --------------------------------------------------------------------------------


def spawn_redis_proc(log_dir: Path) -> tuple[Proc, str]:
    """Start a private redis-server (free port, no persistence, output in redis.log); no wait."""
    data = log_dir / "redis-data"
    data.mkdir(exist_ok=True)
    log_path = log_dir / "redis.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed by Proc.stop
    popen, url = spawn_redis(data, output=log)
    return Proc("redis", popen, log_path, log), url


async def start_redis(log_dir: Path) -> tuple[Proc, str]:
    """A private redis-server on a free port, no persistence, answering PING. Returns (process, URL)."""
    proc, url = spawn_redis_proc(log_dir)
    try:
        await asyncio.to_thread(wait_for_ping, url, proc.popen, log_tail=proc.log_tail)
    except BaseException:
        await proc.stop()
        raise
    return proc, url


@dataclass
class Server:
    """A process serving remoting and HTTP on loopback."""

    proc: Proc
    http_port: int
    remoting_port: int

    @property
    def remoting(self) -> tuple[str, int]:
        return ("127.0.0.1", self.remoting_port)

    @property
    def http(self) -> tuple[str, int]:
        return ("127.0.0.1", self.http_port)


class Worker(Server):
    """One fleet worker process (``python -m namesrv``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def worker_config(extra_env: dict[str, str]) -> dict[str, str]:
    """The workers' effective configuration (``namesrv -p`` with the bench's environment)."""
    env = {**os.environ, "NAMESRV_REDIS_URL": "redis://127.0.0.1:1/0", **extra_env}
    out = subprocess.run(
        [sys.executable, "-m", "namesrv", "-p"], env=env, capture_output=True, text=True, check=False
    ).stdout
    pairs = (line.partition("=") for line in out.splitlines() if line and not line.startswith("#"))
    return {key: value for key, sep, value in pairs if sep and key != "redisUrl"}


def start_worker(
    name: str, redis_url: str, namespace: str, log_dir: Path, extra_env: dict[str, str]
) -> Worker:
    http_port, remoting_port = free_port(), free_port()
    env = {
        **os.environ,
        "NAMESRV_REDIS_URL": redis_url,
        "NAMESRV_NAMESPACE": namespace,
        "NAMESRV_HTTP_PORT": str(http_port),
        "NAMESRV_REMOTING_PORT": str(remoting_port),
        "NAMESRV_LISTEN_HOST": "127.0.0.1",
        "NAMESRV_LOG_LEVEL": "WARNING",
        **extra_env,
    }
    proc = spawn(name, [sys.executable, "-m", "namesrv"], log_dir, env)
    return Worker(proc, http_port, remoting_port)


async def wait_http_ready(proc: Proc, url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited at start:\n{proc.log_tail()}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{proc.name} did not become ready:\n{proc.log_tail()}")


async def wait_tcp(proc: Proc, port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited at start:\n{proc.log_tail()}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return
    raise RuntimeError(f"{proc.name} did not listen on {port}:\n{proc.log_tail()}")


class Ceiling(Server):
    """One bare ceiling server process (:mod:`bench.ceiling`)."""


async def start_ceiling(name: str, remoting_body: Path, http_body: Path, log_dir: Path) -> Ceiling:
    http_port, remoting_port = free_port(), free_port()
    proc = spawn(
        name,
        [
            sys.executable,
            "-m",
            "bench.ceiling",
            "--remoting-port",
            str(remoting_port),
            "--http-port",
            str(http_port),
            "--remoting-body",
            str(remoting_body),
            "--http-body",
            str(http_body),
        ],
        log_dir,
    )
    await wait_tcp(proc, remoting_port)
    await wait_tcp(proc, http_port)
    return Ceiling(proc, http_port, remoting_port)
