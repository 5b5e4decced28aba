"""TLS on the remoting and HTTP ports, as RocketMQ's ``tls.server.mode``.

- ``disabled``: plain TCP (the listeners are plain ``loop.create_server``).
- ``permissive``: one port speaks both. The first byte a client sends decides, as the Java server
  decides in its ``HandshakeHandler``: 0x16 (a TLS handshake record, the ClientHello) starts TLS,
  anything else is served plain. The byte is peeked (``MSG_PEEK``), never consumed, so the TLS
  layer or the plain protocol reads the stream from its first byte.
- ``enforcing``: TLS only; a plain client fails the handshake and is disconnected.

With TLS on, a :class:`TlsListener` accepts connections itself and hands each accepted socket to
the event loop with the *current* :class:`ssl.SSLContext`: when ``tlsCertFile``, ``tlsKeyFile`` or
``tlsClientCaFile`` change on disk (a Kubernetes Secret update), :class:`ServerTls` builds a new
context and new connections get it; established ones keep theirs. ``tlsClientAuth`` asks for
client certificates (``optional``: verified when sent; ``require``: mTLS) that must chain to
``tlsClientCaFile``.

On the remoting port a connection takes its slot (``maxConnections``, ``maxConnectionsPerPeer``)
when it is accepted, before the handshake, and the handshake must be done within
``firstFrameDeadlineSeconds``: handshakes under way cannot crowd out established connections, and a
handshake that fails, times out or is cancelled gives the slot back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from namesrv.config import ConfigError, Settings
from namesrv.limits import RateLimitedLog
from namesrv.remoting.slots import ConnectionSlots, Slot, peer_host

log = logging.getLogger(__name__)
TLS_HANDSHAKE_RECORD = 0x16
# A client that connected but sends nothing is not worth a slot for longer than this (clients
# of both ports speak first); the handshake itself has its own timeout.
FIRST_BYTE_TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 10.0
RELOAD_CHECK_S = 2.0
_VERIFY = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class _Stamp:
    mtime_ns: int
    size: int
    inode: int


def _stamp(path: str) -> _Stamp | None:
    try:
        st = os.stat(path)  # follows symlinks: a Secret update swaps the ..data link
    except OSError:
        return None
    return _Stamp(st.st_mtime_ns, st.st_size, st.st_ino)


class ServerTls:
    """The server's TLS settings and its current context, rebuilt when the files change."""

    def __init__(self, settings: Settings) -> None:
        self.mode = settings.tlsMode
        self.cert_file = settings.tlsCertFile
        self.key_file = settings.tlsKeyFile
        self.ca_file = settings.tlsClientCaFile
        self.client_auth = settings.tlsClientAuth
        if not self.cert_file or not self.key_file:
            raise ConfigError(f"tlsMode={self.mode} needs tlsCertFile and tlsKeyFile")
        if self.client_auth != "none" and not self.ca_file:
            raise ConfigError(f"tlsClientAuth={self.client_auth} needs tlsClientCaFile")
        self._stamps = self._current_stamps()
        try:
            self.context = self._build()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the TLS certificate or key: {exc}") from None
        self.reloads = 0

    @property
    def sniff(self) -> bool:
        return self.mode == "permissive"

    def _files(self) -> list[str]:
        return [f for f in (self.cert_file, self.key_file, self.ca_file) if f]

    def _current_stamps(self) -> list[_Stamp | None]:
        return [_stamp(f) for f in self._files()]

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        if self.client_auth != "none":
            ctx.load_verify_locations(cafile=self.ca_file)
        ctx.verify_mode = _VERIFY[self.client_auth]
        return ctx

    def reload_if_changed(self) -> bool:
        """Rebuild the context if a file changed; a broken new file keeps the old context."""
        stamps = self._current_stamps()
        if stamps == self._stamps:
            return False
        try:
            context = self._build()
        except (OSError, ssl.SSLError) as exc:
            # A Secret being rewritten can be caught half-way: keep serving, try again next time.
            log.warning("TLS files changed but cannot be loaded (%s); keeping the previous certificate", exc)
            return False
        self._stamps = stamps
        self.context = context
        self.reloads += 1
        log.info("TLS certificate reloaded from %s", self.cert_file)
        return True

    async def watch(self, interval: float = RELOAD_CHECK_S) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()


TLS = web.AppKey("tls", ServerTls)


@runtime_checkable
class SlotHolder(Protocol):
    """A protocol that keeps the slot its listener took for it at accept."""

    def adopt_slot(self, slot: Slot) -> None: ...


def server_tls(settings: Settings) -> ServerTls | None:
    return None if settings.tlsMode == "disabled" else ServerTls(settings)


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class TlsListener(asyncio.AbstractServer):
    """A listening socket whose connections get TLS (or, when permissive, TLS or plain by their
    first byte). Quacks like the :class:`asyncio.Server` it replaces for its callers."""

    def __init__(
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        sock: socket.socket,
        tls: ServerTls,
        max_pending: int,
        slots: ConnectionSlots | None = None,
        setup_timeout: float | None = None,
    ) -> None:
        self._factory = protocol_factory
        self._sock = sock
        self._tls = tls
        self._max_pending = max_pending
        self._slots = slots
        self._setup_timeout = setup_timeout
        self._pending: set[asyncio.Task[None]] = set()
        self._loop = asyncio.get_running_loop()
        self._accepting: asyncio.Task[None] | None = self._loop.create_task(self._accept(), name="tls-accept")
        self._failures = RateLimitedLog(log)
        self.sockets = [sock]

    async def _accept(self) -> None:
        loop = self._loop
        while True:
            try:
                conn, address = await loop.sock_accept(self._sock)
            except OSError as exc:  # EMFILE and friends: wait a little instead of spinning
                self._failures.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            slot: Slot | None = None
            if self._slots is not None:
                slot = self._slots.take(peer_host(address))
                if slot is None:
                    conn.close()
                    continue
            elif len(self._pending) >= self._max_pending:
                conn.close()  # too many connections still before their first byte or handshake
                continue
            conn.setblocking(False)
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._serve(conn, slot))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    def _protocol(self, slot: Slot | None) -> asyncio.BaseProtocol:
        protocol = self._factory()
        if slot is not None and isinstance(protocol, SlotHolder):
            protocol.adopt_slot(slot)
        return protocol

    async def _serve(self, conn: socket.socket, slot: Slot | None) -> None:
        context: ssl.SSLContext | None = self._tls.context
        loop = self._loop
        first_byte_s, handshake_s = FIRST_BYTE_TIMEOUT_S, HANDSHAKE_TIMEOUT_S
        if self._setup_timeout is not None:
            first_byte_s = handshake_s = self._setup_timeout
        started = loop.time()
        try:
            if self._tls.sniff:
                await asyncio.wait_for(_readable(loop, conn), first_byte_s)
                first = conn.recv(1, socket.MSG_PEEK)
                if not first:
                    conn.close()
                    if slot is not None:
                        slot.release()
                    return
                if first[0] != TLS_HANDSHAKE_RECORD:
                    context = None
                if self._setup_timeout is not None:  # one deadline for the first byte and handshake
                    handshake_s = max(0.01, self._setup_timeout - (loop.time() - started))
            await loop.connect_accepted_socket(
                lambda: self._protocol(slot),
                conn,
                ssl=context,
                ssl_handshake_timeout=handshake_s if context else None,
            )
        except asyncio.CancelledError:
            conn.close()
            if slot is not None:
                slot.release()
            raise
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            self._failures.warning("TLS connection not established: %s: %s", type(exc).__name__, exc)
            conn.close()
            if slot is not None:
                slot.release()

    # ---- asyncio.AbstractServer ----
    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
            for task in list(self._pending):
                task.cancel()
            self._sock.close()

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_serving(self) -> bool:
        return self._accepting is not None

    async def start_serving(self) -> None:
        return None

    async def serve_forever(self) -> None:
        raise NotImplementedError

    async def wait_closed(self) -> None:
        tasks = [*self._pending]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def _listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    info = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(info[0], socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def create_server(
    protocol_factory: Callable[[], Any],
    host: str,
    port: int,
    *,
    tls: ServerTls | None,
    backlog: int,
    max_pending: int,
    slots: ConnectionSlots | None = None,
    setup_timeout: float | None = None,
) -> asyncio.AbstractServer:
    """``loop.create_server`` when TLS is off, else a :class:`TlsListener`. ``slots``: the TLS
    listener takes each connection's slot at accept (a plain connection's protocol takes its own);
    ``setup_timeout``: one bound on the first byte and the handshake together."""
    loop = asyncio.get_running_loop()
    if tls is None:
        return await loop.create_server(protocol_factory, host, port, reuse_address=True, backlog=backlog)
    listener = _listening_socket(host, port, backlog)
    return TlsListener(protocol_factory, listener, tls, max_pending, slots, setup_timeout)


class TlsSite(web.BaseSite):
    """The HTTP listener: aiohttp's TCPSite with the same TLS modes as the remoting port."""

    __slots__ = ("_host", "_port", "_tls", "_max_pending")

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, *, tls: ServerTls | None, max_pending: int
    ) -> None:
        super().__init__(runner, backlog=1024)
        self._host, self._port, self._tls, self._max_pending = host, port, tls, max_pending

    @property
    def name(self) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        if self._server is not None and getattr(self._server, "sockets", None):
            port: int = self._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
            return port
        return self._port

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await create_server(
            server,
            self._host,
            self._port,
            tls=self._tls,
            backlog=self._backlog,
            max_pending=self._max_pending,
        )


async def tls_watch_ctx(app: web.Application) -> AsyncIterator[None]:
    """aiohttp cleanup context: reload the certificate files while the worker runs."""
    tls = app.get(TLS)
    if tls is None:
        yield
        return
    task = asyncio.create_task(tls.watch(), name="tls-reload")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
