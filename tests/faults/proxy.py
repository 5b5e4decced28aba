"""A TCP proxy that injects faults between workers and Redis: latency, stalls, blackholes, resets.

One :class:`FaultProxy` listens on a loopback port and forwards every connection to one upstream
(a redis-server). Faults apply to both directions of every connection, current and future:

- ``latency(s)``: every chunk is delivered ``s`` seconds after it arrived (order kept);
- ``pause()`` / ``resume()``: a stall: bytes are held (nothing lost) until ``resume``, as when the
  server is SIGSTOPped or a link hangs;
- ``blackhole(True)``: bytes are silently dropped and new connections are accepted but never
  reach upstream, as behind a firewall that drops packets; the connections stay open;
- ``reset()``: every open connection is aborted (RST) on both sides.

:class:`ProxyThread` runs a proxy on its own event loop in a thread, so a test's load driver and
the proxy do not share one loop (the proxy's delays must not show up as the driver's latency).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
_CHUNK = 65536


@dataclass(eq=False)  # identity hash: pipes live in a set
class _Pipe:
    """One proxied connection: the client side and the upstream side."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *, listen_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listen_host = listen_host
        self.port = 0
        self.delay = 0.0
        self.dropping = False
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._pipes: set[_Pipe] = set()
        self._server: asyncio.Server | None = None
        self.connections_total = 0
        self.resets_total = 0
        self.dropped_bytes = 0

    # ---- control ----
    def latency(self, seconds: float) -> None:
        self.delay = max(0.0, seconds)

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def blackhole(self, on: bool) -> None:
        self.dropping = on

    def heal(self) -> None:
        """Back to a transparent proxy (connections are kept)."""
        self.delay = 0.0
        self.dropping = False
        self._flowing.set()

    def reset(self) -> int:
        """Abort every open connection (both sides get a RST); returns how many were open."""
        pipes = list(self._pipes)
        for pipe in pipes:
            self._abort(pipe)
        self.resets_total += len(pipes)
        return len(pipes)

    @property
    def open_connections(self) -> int:
        return len(self._pipes)

    # ---- life cycle ----
    async def start(self, port: int = 0) -> int:
        self._server = await asyncio.start_server(self._accept, self.listen_host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    # ---- forwarding ----
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_total += 1
        pipe = _Pipe(writer)
        self._pipes.add(pipe)
        try:
            if self.dropping:  # a blackholed SYN/ACK path: accept and swallow, never connect upstream
                await self._swallow(reader)
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                return  # upstream down: the client sees its connection closed
            pipe.upstream = up_writer
            to_upstream = asyncio.ensure_future(self._pump(reader, up_writer))
            to_client = asyncio.ensure_future(self._pump(up_reader, writer))
            pipe.tasks = [to_upstream, to_client]
            await asyncio.wait(pipe.tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._close(pipe)

    async def _swallow(self, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(_CHUNK):
            self.dropped_bytes += len(data)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            # A separate deliverer keeps reading while chunks wait out their delay, so latency
            # adds to every chunk once instead of accumulating along a pipelined stream.
            while True:
                due, data = await queue.get()
                if not data:
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                if self.dropping:
                    self.dropped_bytes += len(data)
                    continue
                writer.write(data)
                await writer.drain()

        deliverer = asyncio.ensure_future(deliver())
        try:
            while True:
                data = await reader.read(_CHUNK)
                queue.put_nowait((loop.time() + self.delay, data))
                if not data:
                    break
            await deliverer
        except (ConnectionError, OSError):
            pass
        finally:
            deliverer.cancel()

    def _abort(self, pipe: _Pipe) -> None:
        for task in pipe.tasks:
            task.cancel()
        for w in (pipe.client, pipe.upstream):
            if w is not None:
                w.transport.abort()
        self._pipes.discard(pipe)

    def _close(self, pipe: _Pipe) -> None:
        for task in pipe.tasks:
            task.cancel()
        for w in (pipe.client, pipe.upstream):
            if w is not None and not w.is_closing():
                w.close()
        self._pipes.discard(pipe)


class ProxyThread:
    """A :class:`FaultProxy` on its own event loop in a daemon thread; control calls are
    thread-safe and return once the proxy applied them."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._loop = asyncio.new_event_loop()
        self.proxy = FaultProxy(upstream_host, upstream_port)
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self.port = self._call(self.proxy.start)

    def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            return await fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def _do(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def latency(self, seconds: float) -> None:
        self._do(lambda: self.proxy.latency(seconds))

    def pause(self) -> None:
        self._do(self.proxy.pause)

    def resume(self) -> None:
        self._do(self.proxy.resume)

    def blackhole(self, on: bool) -> None:
        self._do(lambda: self.proxy.blackhole(on))

    def heal(self) -> None:
        self._do(self.proxy.heal)

    def reset(self) -> int:
        return self._do(self.proxy.reset)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._call(self.proxy.stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
