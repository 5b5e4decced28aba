"""One way to start a private ``redis-server`` for the bench and the tests.

A server on a free loopback port with no persistence, tied to its parent (it dies with it), and a
wait until it answers PING. The bench (``bench.procs.start_redis``, ``bench.key_schema``) and the
tests (:func:`local_redis`, through ``tests.redis_server``) both start theirs here; neither this
module nor the bench depends on pytest.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import redis

from namesrv.procs import die_with_parent
from namesrv.store.embedded import redis_server_command
from support.ports import free_port


def spawn_redis(
    data_dir: Path,
    *,
    output: IO[bytes] | None = None,
    logfile: Path | None = None,
    extra_args: Sequence[str] = (),
) -> tuple[subprocess.Popen[bytes], str]:
    """Start redis-server without waiting for it. Returns (process, URL).

    ``output`` receives its stdout and stderr (discarded when None); ``logfile`` is redis' own
    ``logfile`` setting (stdout when None)."""
    port = free_port()
    command = redis_server_command(port, data_dir, append_only=False, logfile=logfile)
    popen = subprocess.Popen(
        [*command, *extra_args],
        stdout=output if output is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT if output is not None else subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),  # no stray server when a bench or test run is killed
    )
    return popen, f"redis://127.0.0.1:{port}/0"


def wait_for_ping(
    url: str,
    popen: subprocess.Popen[bytes],
    *,
    tries: int = 400,
    interval: float = 0.025,
    log_tail: Callable[[], str] = str,
) -> None:
    """Block until the server at ``url`` answers PING, or any answer at all (at most ``tries`` x
    ``interval`` seconds).

    RuntimeError when the process exits first (with ``log_tail()`` when it says anything) or never
    answers."""
    client = redis.Redis.from_url(url)
    try:
        for _ in range(tries):
            try:
                client.ping()
                return
            except (redis.AuthenticationError, redis.ResponseError):
                return  # it answered, refusing a client without the password (--requirepass): it is up
            except redis.ConnectionError:
                if popen.poll() is not None:
                    tail = log_tail()
                    raise RuntimeError(
                        "redis-server exited at start" + (f":\n{tail}" if tail else "")
                    ) from None
                time.sleep(interval)
    finally:
        client.close()
    raise RuntimeError("redis-server did not answer PING")


def stop_redis(popen: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL when it has not exited within ``timeout`` seconds."""
    if popen.poll() is None:
        popen.terminate()
    try:
        popen.wait(timeout)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


@contextlib.contextmanager
def local_redis(extra_args: tuple[str, ...] = ()) -> Iterator[str]:
    """A private server for the length of a ``with`` block, its data and log in a temporary
    folder; yields its URL once it answers PING."""
    with tempfile.TemporaryDirectory(prefix="namesrv-test-redis-") as tmp:
        popen, url = spawn_redis(Path(tmp), logfile=Path(tmp) / "redis.log", extra_args=extra_args)
        try:
            wait_for_ping(url, popen, tries=200)
            yield url
        finally:
            stop_redis(popen)
