"""The native remoting load generator (``bench/native/rmqload.c`` via :mod:`bench.native_load`):
it sends the frames the project's codec encodes, keeps the Python generator's open-loop schedule,
tallies replies and error codes as :mod:`bench.loadgen` does, its CPU is counted as the load's,
and the bench falls back to the Python generator where it cannot be built. Nothing here asserts
a speed."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import native_load
from bench.ceiling import CeilingProtocol, ReplyTemplate
from bench.config import parse_config
from bench.load_jobs import LoadJob, LoadResult, summarize
from bench.loadgen import LoadPool
from bench.procs import cpu_seconds, family_cpu_seconds
from bench.scale.config import parse_config as parse_scale_config
from namesrv.protocol.remoting import RemotingCommand, decode_frame, encode, response_to

TOPICS = ("TopicA", "TopicB", "TopicC")


@pytest.fixture(scope="module")
def binary() -> Path:
    built, why = native_load.build()
    if built is None:
        pytest.skip(f"no native generator here: {why}")
    return built


def _job(port: int, *, rate: float = 0.0, uniform: bool = False, duration: float = 0.4) -> LoadJob:
    return LoadJob(
        name="t",
        protocol="remoting",
        targets=(("127.0.0.1", port),),
        topics=TOPICS,
        uniform=uniform,
        conns=2,
        depth=4,
        rate=rate,
        warmup=0.1,
        duration=duration,
        start_at=time.time() + 0.3,
    )


class _Recorder(asyncio.Protocol):
    """Answers every request with ``code`` and keeps the decoded requests."""

    def __init__(self, code: int, seen: list[RemotingCommand]) -> None:
        self.code, self.seen, self.buffer = code, seen, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            total = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < 4 + total:
                return
            request = decode_frame(self.buffer[: 4 + total])
            self.buffer = self.buffer[4 + total :]
            self.seen.append(request)
            body = b'{"brokerDatas":[]}' if self.code == 0 else None
            assert self.transport is not None
            self.transport.write(encode(response_to(request, self.code, remark="no route", body=body)))


async def _run(binary: Path, job: LoadJob) -> LoadResult:
    return await asyncio.get_running_loop().run_in_executor(None, native_load.run, binary, job)


async def test_closed_and_open_loop_against_the_ceiling(binary: Path) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: CeilingProtocol(ReplyTemplate(b'{"brokerDatas":[]}')), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    try:
        for rate in (0.0, 500.0):
            job = _job(port, rate=rate)
            result = await _run(binary, job)
            summary = summarize(job, [result])
            assert summary.failures == []
            assert result.connections == 2 and result.disconnects == 0
            assert summary.completed > 0 and summary.errors == 0
            assert len(result.latencies) == result.completed
            assert result.window == pytest.approx(job.duration, abs=0.2)
            if rate:
                # open loop: every reply says when its request was meant to go, on the schedule's
                # grid of 1/rate from the first. A reply counts when it arrives inside the window
                # (as the Python generator's), so on a busy machine a request meant for the last
                # moments of the warm-up can count: never one meant before the warm-up or after
                # the window.
                assert len(result.intended) == len(result.offsets) == result.completed
                steps = [(o - result.offsets[0]) * rate for o in result.offsets]
                assert all(abs(s - round(s)) < 1e-6 for s in steps)
                assert all(-job.warmup <= o < job.duration for o in result.offsets)
                assert sum(o >= 0 for o in result.offsets) > len(result.offsets) // 2
                assert result.sent <= round(rate * job.duration) + 1
            else:
                assert len(result.intended) == 0
    finally:
        server.close()
        await server.wait_closed()


async def test_it_sends_the_codecs_frames_and_counts_error_replies_by_code(binary: Path) -> None:
    seen: list[RemotingCommand] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Recorder(17, seen), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        result = await _run(binary, _job(port))
    finally:
        server.close()
        await server.wait_closed()
    assert result.failure is None
    assert result.completed > 0
    assert result.errors == result.completed
    assert result.error_codes == {17: result.completed}
    # round robin over the topics, each frame what the codec encodes for it, opaques counting up
    # from OPAQUE_BASE on each connection
    assert {r.ext_fields["topic"] for r in seen} == set(TOPICS)
    assert all(r.code == 105 and r.version == 479 and r.language == "JAVA" for r in seen)
    assert min(r.opaque for r in seen) == 1_000_000_000


def test_a_job_it_cannot_run_is_a_failure_not_an_exception(binary: Path, tmp_path: Path) -> None:
    # nothing listens on the port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = native_load.run(binary, _job(port))
    assert result.failure is not None
    assert "rmqload exited 2" in result.failure and "cannot connect" in result.failure


def test_a_result_file_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not an rmqload result"):
        native_load.parse(b"garbage")


def test_without_a_compiler_the_pool_falls_back_to_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_load, "BUILD_DIR", tmp_path)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    pool = LoadPool.of_kind(1, 0, "native")
    assert pool.native is None
    assert pool.generator.startswith("python (no native generator:")
    assert "no-such-cc" in pool.generator
    assert list(tmp_path.iterdir()) == []  # nothing half-built left behind
    assert LoadPool.of_kind(1, 0, "python").generator == "python (asked for)"


def test_both_benches_default_to_native_and_take_python() -> None:
    assert parse_config([]).loadgen == "native"
    assert parse_config(["--loadgen", "python"]).loadgen == "python"
    assert parse_scale_config([]).loadgen == "native"
    assert parse_scale_config(["--loadgen", "python"]).loadgen == "python"
    with pytest.raises(SystemExit):
        parse_config(["--loadgen", "java"])


def test_a_childs_cpu_counts_for_its_parent_while_it_runs_and_after() -> None:
    # the parent waits while its child spins for 0.3 s of CPU (CPU time, not wall time: the same on
    # a busy machine), then sleeps so that it can be measured after the child ended. The kernel
    # counts the child's user and system time in whole 10 ms ticks, each rounded down (a fresh
    # clone beside a CPU hog read 0.29 s), so the child spins two ticks past the bound.
    spin = "import time\nwhile time.process_time() < 0.32: pass"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time; subprocess.run([sys.executable, '-c', {spin!r}]); "
            "print('done', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "done"
        assert family_cpu_seconds(parent.pid) >= 0.3
        assert cpu_seconds(parent.pid) < 0.3  # the parent's own time alone does not hold it
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
