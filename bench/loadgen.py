"""Load generator: a pool of OS processes, each an event loop with several connections and many
requests in flight per connection.

Remoting requests are pipelined by opaque (replies may come back in any order); HTTP requests are
pipelined HTTP/1.1 keep-alive (replies in order). Every request frame is pre-encoded per topic
with only the opaque spliced in, and replies are read with a few ``bytes.find`` calls, so the
generator spends as little CPU per request as Python allows. Each process reports the CPU time it
used during the measurement window (``getrusage``), so the report can say whether the generator,
rather than the server, was the limit.

Two modes:

- **closed loop** (``rate == 0``): each connection keeps ``depth`` requests in flight and sends a
  new one as each reply arrives: the peak throughput.
- **open loop** (``rate > 0``): requests are scheduled at a fixed total rate, whatever the replies
  do, from a 1 ms ticker; latency is measured from the moment a request was written (and, in
  ``intended_*``, from the moment it was scheduled, which adds the ticker's lag but is free of
  coordinated omission).

All processes share one absolute schedule (``start_at`` in ``time.time()``), so the measurement
window (after ``warmup``, for ``duration`` s) is the same for all of them and for the CPU and Redis
samples the orchestrator takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import os
import random
import resource
import struct
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import cast

import orjson

from bench import native_load
from bench.load_jobs import LoadJob, LoadResult, LoadSummary, summarize
from bench.loops import new_loop, quiet_gc
from bench.schedule import StepSchedule

_PREFIX = struct.Struct(">iI")
_OPAQUE_KEY = b'"opaque":'
_CODE_KEY = b'{"code":'
OPAQUE_BASE = 1_000_000_000  # 10 digits up to 2**31-1: every request frame of a topic has one length
ROUTE_CODE = 105
LATE_SEND = 0.002  # open loop: a send more than 2 ms behind its schedule means the generator lagged
OPEN_LOOP_CAP = 5000  # open loop: most requests in flight per connection before sends are skipped


# ---- requests ---------------------------------------------------------------------------------


def remoting_request_parts(topic: str, version: int) -> tuple[bytes, bytes]:
    """A GET_ROUTEINFO_BY_TOPIC frame as the project's codec encodes it, split around the opaque.

    With a 10-digit opaque the length prefix in the first part holds for every opaque."""
    from namesrv.protocol.remoting import RemotingCommand, encode

    frame = encode(
        RemotingCommand(
            code=ROUTE_CODE,
            opaque=OPAQUE_BASE,
            flag=0,
            language="JAVA",
            version=version,
            ext_fields={"topic": topic},
        )
    )
    marker = _OPAQUE_KEY + b"%d" % OPAQUE_BASE
    at = frame.index(marker) + len(_OPAQUE_KEY)
    return frame[:at], frame[at + len(b"%d" % OPAQUE_BASE) :]


def http_request(topic: str, host: str) -> bytes:
    return f"GET /v1/routes/{topic} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


class _Load:
    """One process's share of a job: topic choice, the window, and the tallies."""

    def __init__(self, job: LoadJob, window_start: float, window_end: float) -> None:
        self.job = job
        self.rng = random.Random(1_000_003 * job.index + 17)
        self.uniform = job.uniform
        self.topic_count = len(job.topics)
        self.next_index = job.index * 7
        self.window_start = window_start
        self.window_end = window_end
        self.closed_loop = job.rate <= 0
        self.sending = True
        self.result = LoadResult()
        self.outstanding = 0

    def topic_index(self) -> int:
        if self.uniform:
            return self.rng.randrange(self.topic_count)
        i = self.next_index
        self.next_index = i + 1
        return i % self.topic_count

    def record(self, sent_at: float, intended: float, now: float, ok: bool, code: int) -> None:
        self.outstanding -= 1
        if self.window_start <= now < self.window_end:
            result = self.result
            result.completed += 1
            result.latencies.append(now - sent_at)
            if not self.closed_loop:
                result.intended.append(now - intended)
                result.offsets.append(intended - self.window_start)
            if not ok:
                result.errors += 1
                result.error_codes[code] = result.error_codes.get(code, 0) + 1


class _Conn(asyncio.Protocol):
    """Shared plumbing of both protocols: batching writes, the transport, closing."""

    def __init__(self, load: _Load) -> None:
        self.load = load
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.out: list[bytes] = []
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.load.sending:  # the server closed it: what was in flight will never be answered
            self.load.result.disconnects += 1
            self.load.result.unanswered += self.in_flight()
        if not self.lost.done():
            self.lost.set_result(exc)

    def flush(self) -> None:
        if self.out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(self.out))
        self.out.clear()

    def in_flight(self) -> int:
        raise NotImplementedError

    def send(self, now: float, intended: float) -> None:
        raise NotImplementedError


class _RemotingConn(_Conn):
    def __init__(self, load: _Load, parts: list[tuple[bytes, bytes]]) -> None:
        super().__init__(load)
        self.parts = parts
        self.pending: dict[int, tuple[float, float]] = {}
        self.opaque = OPAQUE_BASE

    def in_flight(self) -> int:
        return len(self.pending)

    def send(self, now: float, intended: float) -> None:
        head, tail = self.parts[self.load.topic_index()]
        opaque = self.opaque
        self.opaque = opaque + 1
        self.out.append(head + b"%d" % opaque + tail)
        self.pending[opaque] = (now, intended)
        self.load.outstanding += 1

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self.buffer
        buffer += data
        pos, end = 0, len(buffer)
        load, pending = self.load, self.pending
        replies = 0
        while end - pos >= 8:
            total, type_and_length = _PREFIX.unpack_from(buffer, pos)
            if end - pos - 4 < total:
                break
            header_start = pos + 8
            header_end = header_start + (type_and_length & 0xFFFFFF)
            body_length = pos + 4 + total - header_end
            if buffer.startswith(_CODE_KEY, header_start):
                comma = buffer.find(b",", header_start + 8, header_end)
                code = int(buffer[header_start + 8 : comma])
                at = buffer.find(_OPAQUE_KEY, comma, header_end) + len(_OPAQUE_KEY)
                stop = buffer.find(b",", at, header_end)
                opaque = int(buffer[at : stop if stop > 0 else header_end - 1])
            else:  # not the layout our servers write: decode the header properly
                header = orjson.loads(bytes(buffer[header_start:header_end]))
                code, opaque = int(header.get("code", -1)), int(header.get("opaque", -1))
            pos += 4 + total
            entry = pending.pop(opaque, None)
            if entry is not None:
                load.record(entry[0], entry[1], now, code == 0 and body_length > 0, code)
                replies += 1
        del buffer[:pos]
        if load.closed_loop and load.sending and now < load.window_end:
            for _ in range(replies):
                self.send(now, now)
            self.flush()


class _HttpConn(_Conn):
    def __init__(self, load: _Load, requests: list[bytes]) -> None:
        super().__init__(load)
        self.requests = requests
        self.pending: deque[tuple[float, float]] = deque()

    def in_flight(self) -> int:
        return len(self.pending)

    def send(self, now: float, intended: float) -> None:
        self.out.append(self.requests[self.load.topic_index()])
        self.pending.append((now, intended))
        self.load.outstanding += 1

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buffer = self.buffer
        buffer += data
        pos, end = 0, len(buffer)
        load, pending = self.load, self.pending
        replies = 0
        while True:
            head_end = buffer.find(b"\r\n\r\n", pos)
            if head_end < 0:
                break
            at = buffer.find(b"\r\nContent-Length: ", pos, head_end)
            if at < 0:
                head = bytes(buffer[pos:head_end]).lower()
                at = head.find(b"\r\ncontent-length:")
                if at < 0:
                    raise RuntimeError(f"HTTP reply without Content-Length: {head[:200]!r}")
                at += pos
            value_start = at + len(b"\r\ncontent-length: ")
            line_end = buffer.find(b"\r\n", value_start, head_end + 2)
            length = int(buffer[value_start:line_end])
            if head_end + 4 + length > end:
                break
            status = int(buffer[pos + 9 : pos + 12])
            pos = head_end + 4 + length
            sent_at, intended = pending.popleft()
            load.record(sent_at, intended, now, status == 200 and length > 0, status)
            replies += 1
        del buffer[:pos]
        if load.closed_loop and load.sending and now < load.window_end:
            for _ in range(replies):
                self.send(now, now)
            self.flush()


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


def _cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_job(job: LoadJob) -> LoadResult:
    """One process's part of ``job``, on the running loop."""
    loop = asyncio.get_running_loop()
    start = job.start_at + (time.perf_counter() - time.time())
    window_start = start + job.warmup
    window_end = window_start + job.duration
    load = _Load(job, window_start, window_end)
    conns: list[_Conn] = []
    factory: Callable[[], _Conn]
    try:
        for host, port in job.targets:
            if job.protocol == "remoting":
                factory = functools.partial(
                    _RemotingConn, load, [remoting_request_parts(t, job.version) for t in job.topics]
                )
            else:
                factory = functools.partial(
                    _HttpConn, load, [http_request(t, f"{host}:{port}") for t in job.topics]
                )
            for _ in range(job.conns):
                _, conn = await loop.create_connection(factory, host, port)
                conns.append(conn)
        # interleave targets so round-robin sends alternate between them
        conns = [c for group in zip(*_by_target(conns, len(job.targets)), strict=True) for c in group]
        load.result.connections = len(conns)
        await _sleep_until(start)
        cpu_task = asyncio.create_task(_measure_cpu(load))
        if load.closed_loop:
            now = time.perf_counter()
            for conn in conns:
                for _ in range(job.depth):
                    conn.send(now, now)
                conn.flush()
            await _sleep_until(window_end)
        else:
            await _open_loop(load, conns, start)
        load.sending = False
        await cpu_task
        # let the requests still in flight finish (not counted), so no server sees a reset
        for _ in range(200):
            if load.outstanding <= 0:
                break
            await asyncio.sleep(0.01)
    finally:
        for conn in conns:
            if conn.transport is not None:
                conn.transport.close()
        for conn in conns:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(conn.lost), 2)
    return load.result


def _by_target(conns: list[_Conn], targets: int) -> list[list[_Conn]]:
    per = len(conns) // targets
    return [conns[i * per : (i + 1) * per] for i in range(targets)]


async def _measure_cpu(load: _Load) -> None:
    await _sleep_until(load.window_start)
    cpu0, t0 = _cpu_now(), time.perf_counter()
    await _sleep_until(load.window_end)
    load.result.cpu = _cpu_now() - cpu0
    load.result.window = time.perf_counter() - t0


def _schedule(load: _Load, start: float) -> StepSchedule:
    """This process's share of the job's schedule; processes interleave their sends."""
    job = load.job
    rate = job.rate / job.procs
    first = start + job.index / (job.procs * rate * (job.steps[0][1] if job.steps else 1.0))
    if not job.steps:
        return StepSchedule(first, [(job.warmup + job.duration, rate)])
    warmup = [(job.warmup, rate * job.steps[0][1])] if job.warmup > 0 else []
    return StepSchedule(first, warmup + [(seconds, rate * factor) for seconds, factor in job.steps])


async def _open_loop(load: _Load, conns: list[_Conn], start: float) -> None:
    schedule = _schedule(load, start)
    result, n = load.result, len(conns)
    sent = 0
    while True:
        now = time.perf_counter()
        if now >= load.window_end:
            return
        due = schedule.due(now)
        if due > sent:
            touched = set()
            for k in range(sent, due):
                intended = schedule.intended(k)
                conn = conns[k % n]
                in_window = load.window_start <= now < load.window_end
                if conn.in_flight() >= OPEN_LOOP_CAP:
                    result.skipped += in_window
                    continue
                conn.send(now, intended)
                touched.add(k % n)
                if in_window:
                    result.sent += 1
                    result.late += now - intended > LATE_SEND
            for i in touched:
                conns[i].flush()
            sent = due
        await asyncio.sleep(0.001)


def _process_main(pipe: Connection, nice: int, native: Path | None) -> None:
    if nice > 0:
        os.nice(nice)
    loop = new_loop()
    asyncio.set_event_loop(loop)
    while True:
        job = pipe.recv()
        if job is None:
            break
        quiet_gc()
        try:
            if native is not None and job.protocol == "remoting":
                result = native_load.run(native, job)
            else:
                result = loop.run_until_complete(run_job(job))
        except Exception:
            result = LoadResult(failure=traceback.format_exc(limit=5))
        pipe.send(result)
    loop.close()


# How long before a window the servers under test are asked for their counters (``before_window``):
# a worker renders /metrics on its event loop (about 2 ms), and asked at the window's first moment
# it put a tail into the first 100 ms of every window (that bucket's p99 a median 2.5 times the
# others' over 290 windows at 80% of peak; 0.99 times for the bare ceiling, which is never asked).
# Long enough for that backlog to drain before the window opens; at most half the warm-up.
BEFORE_WINDOW_S = 0.5


def ahead_of_window(warmup: float) -> float:
    """How long before the window ``before_window`` runs."""
    return min(BEFORE_WINDOW_S, warmup / 2)


class LoadPool:
    """``procs`` load processes (spawned, so nothing of the orchestrator leaks into them) that
    stay up for the whole run and take one job at a time.

    ``nice``: how much lower the processes' CPU priority is than the servers'. On a machine the
    servers share with their own load, at equal priority the kernel's fair share holds a worker
    that wants 80% of a core off it for tens of ms at a time while the generators run: a wait a
    worker whose clients are on other machines never has (docs/performance.md).

    ``native``: the C generator's binary (:mod:`bench.native_load`), which then sends every
    remoting job for a fraction of the CPU; HTTP jobs stay on the Python event loop."""

    def __init__(
        self, procs: int, nice: int = 0, native: Path | None = None, generator: str = "python"
    ) -> None:
        self.procs = procs
        self.nice = nice
        self.native = native
        self.generator = generator  # what sends the remoting load, for the report
        self._pipes: list[Connection] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for i in range(self.procs):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_process_main,
                args=(child, self.nice, self.native),
                name=f"bench-load-{i}",
                daemon=True,
            )
            process.start()
            child.close()
            self._pipes.append(parent)
            self._processes.append(process)

    @classmethod
    def of_kind(cls, procs: int, nice: int, kind: str) -> LoadPool:
        """A pool whose remoting load comes from ``kind`` ("native" or "python"); native falls back
        to Python, and says why, where the C generator cannot be built."""
        if kind != "native":
            return cls(procs, nice, generator="python (asked for)")
        binary, why = native_load.build()
        if binary is None:
            return cls(procs, nice, generator=f"python (no native generator: {why})")
        return cls(procs, nice, binary, generator=f"native ({binary.name})")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.pid is not None]

    async def run(
        self,
        job: LoadJob,
        *,
        lead: float = 0.5,
        before_window: Callable[[], Awaitable[None]] | None = None,
        on_window_start: Callable[[], Awaitable[None]] | None = None,
        on_window_end: Callable[[], Awaitable[None]] | None = None,
        raw: list[LoadResult] | None = None,
    ) -> LoadSummary:
        """Run ``job`` on every process; the hooks run at the start and end of the window, and
        ``before_window`` :func:`ahead_of_window` before its start, in the warm-up: what the
        servers under test are asked there (their counters) does not disturb the window.
        ``raw`` receives each process's own result (its samples, for a timeline)."""
        loop = asyncio.get_running_loop()
        start_at = time.time() + lead
        for i, pipe in enumerate(self._pipes):
            pipe.send(replace(job, start_at=start_at, procs=self.procs, index=i))
        receivers = [loop.run_in_executor(None, pipe.recv) for pipe in self._pipes]
        offset = time.perf_counter() - time.time()
        window_start = start_at + job.warmup + offset
        if before_window is not None:
            await _sleep_until(window_start - ahead_of_window(job.warmup))
            await before_window()
        if on_window_start is not None:
            await _sleep_until(window_start)
            await on_window_start()
        if on_window_end is not None:
            await _sleep_until(window_start + job.duration)
            await on_window_end()
        timeout = lead + job.warmup + job.duration + 30
        results: list[LoadResult] = await asyncio.wait_for(asyncio.gather(*receivers), timeout)
        if raw is not None:
            raw.extend(results)
        return summarize(job, results)

    def close(self) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for process in self._processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)
        for pipe in self._pipes:
            pipe.close()
