"""The native remoting load generator (``bench/native/rmqload.c``): built once per source version
with the machine's C compiler, run by each load process in place of its Python event loop for
remoting jobs, its result read back into a :class:`LoadResult`.

Why: the Python generator spends about as much CPU per lookup as the worker answering it, and on
a 2-core machine that CPU is taken from the worker under test (bench/README.md). The frames are
still encoded here, by the project's codec; the C side only splices in the opaque, times replies
and tallies them the way :mod:`bench.loadgen` does."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import time
from array import array
from pathlib import Path

from bench.load_jobs import LoadJob, LoadResult

SOURCE = Path(__file__).resolve().parent / "native" / "rmqload.c"
BUILD_DIR = Path(__file__).resolve().parents[1] / ".cache" / "bench"
_MAGIC = b"RMQLOAD1"
_COUNTERS = struct.Struct("=12q2d")
_LENGTH = struct.Struct("=I")


def build() -> tuple[Path | None, str]:
    """The binary for the current source, compiled if it is not there yet; (None, why) where no C
    compiler is found or the build fails, so the caller can fall back to the Python generator."""
    source = SOURCE.read_bytes()
    binary = BUILD_DIR / f"rmqload-{hashlib.sha256(source).hexdigest()[:12]}"
    if binary.exists():
        return binary, "built"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc or gcc) on PATH"
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    # one partial file per process: test workers may build at once, and the rename is atomic
    partial = binary.with_name(f"{binary.name}.{os.getpid()}.partial")
    try:
        done = subprocess.run(
            [compiler, "-O2", "-Wall", "-o", str(partial), str(SOURCE), "-lm"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        return None, f"cannot run {compiler}: {exc.strerror}"
    if done.returncode != 0:
        return None, f"{compiler} failed: {done.stderr.strip()[-500:]}"
    partial.replace(binary)
    return binary, "built"


def _frames(job: LoadJob) -> bytes:
    from bench.loadgen import remoting_request_parts

    out = bytearray()
    for topic in job.topics:
        head, tail = remoting_request_parts(topic, job.version)
        out += _LENGTH.pack(len(head)) + head + _LENGTH.pack(len(tail)) + tail
    return bytes(out)


def _arguments(binary: Path, job: LoadJob, frames: Path, out: Path) -> list[str]:
    return [
        str(binary),
        "--frames", str(frames),
        "--out", str(out),
        "--targets", ",".join(f"{host}:{port}" for host, port in job.targets),
        "--conns", str(job.conns),
        "--depth", str(job.depth),
        "--rate", repr(job.rate),
        "--procs", str(job.procs),
        "--index", str(job.index),
        "--warmup", repr(job.warmup),
        "--duration", repr(job.duration),
        "--start-at", repr(job.start_at),
        "--uniform", "1" if job.uniform else "0",
        "--steps", ",".join(f"{seconds!r}:{factor!r}" for seconds, factor in job.steps),
    ]  # fmt: skip


def run(binary: Path, job: LoadJob) -> LoadResult:
    """This process's share of ``job`` (remoting), by the native generator."""
    with tempfile.TemporaryDirectory(prefix="rmqload-") as tmp:
        frames, out = Path(tmp) / "frames", Path(tmp) / "result"
        frames.write_bytes(_frames(job))
        timeout = max(0.0, job.start_at - time.time()) + job.warmup + job.duration + 30
        done = subprocess.run(
            _arguments(binary, job, frames, out), capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            return LoadResult(failure=f"rmqload exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return parse(out.read_bytes())


def parse(data: bytes) -> LoadResult:
    """A result file written by ``rmqload``."""
    if not data.startswith(_MAGIC):
        raise ValueError("not an rmqload result")
    at = len(_MAGIC)
    (completed, errors, sent, late, skipped, disconnects, unanswered, connections,
     n_latencies, n_intended, n_offsets, n_codes, cpu, window) = _COUNTERS.unpack_from(data, at)  # fmt: skip
    at += _COUNTERS.size
    codes = {}
    for _ in range(n_codes):
        code, count = struct.unpack_from("=2q", data, at)
        codes[code] = count
        at += 16

    def doubles(count: int) -> array[float]:
        nonlocal at
        values = array("d")
        values.frombytes(data[at : at + 8 * count])
        at += 8 * count
        return values

    return LoadResult(
        completed=completed,
        errors=errors,
        error_codes=codes,
        latencies=doubles(n_latencies),
        intended=doubles(n_intended),
        offsets=doubles(n_offsets),
        sent=sent,
        late=late,
        skipped=skipped,
        cpu=cpu,
        window=window,
        connections=connections,
        disconnects=disconnects,
        unanswered=unanswered,
    )
