"""The bench asks the workers under test for their counters (a /metrics scrape, rendered on the
worker's event loop) in the warm-up before a window, not at its first moment: asked there, the
scrape's few milliseconds put a tail into the first 100 ms of every window."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator

import pytest

from bench.load_jobs import LoadJob
from bench.loadgen import BEFORE_WINDOW_S, LoadPool, ahead_of_window


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """Accepts connections and reads what they send, answering nothing."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                for c in conns:
                    with contextlib.suppress(OSError):
                        c.recv(65536)
                continue
            conn.setblocking(False)
            conns.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        stop.set()
        thread.join(5)
        for c in conns:
            c.close()
        listener.close()


def test_the_counters_are_read_ahead_of_the_window_by_half_a_second_or_half_the_warm_up() -> None:
    assert BEFORE_WINDOW_S == 0.5
    assert ahead_of_window(2.0) == 0.5
    assert ahead_of_window(0.6) == 0.3
    assert ahead_of_window(0.0) == 0.0


def test_the_hooks_run_in_order_before_within_and_after_the_window(silent_server: tuple[str, int]) -> None:
    host, port = silent_server
    job = LoadJob(
        name="hooks",
        protocol="remoting",
        targets=((host, port),),
        topics=("t",),
        uniform=False,
        conns=1,
        depth=1,
        rate=50.0,
        warmup=1.0,
        duration=0.3,
    )
    ran: list[str] = []

    def hook(name: str) -> Callable[[], Awaitable[None]]:
        async def record() -> None:
            ran.append(name)

        return record

    async def run() -> None:
        pool = LoadPool(1)
        pool.start()
        try:
            await pool.run(
                job,
                before_window=hook("before"),
                on_window_start=hook("start"),
                on_window_end=hook("end"),
            )
        finally:
            pool.close()

    asyncio.run(run())
    assert ran == ["before", "start", "end"]
