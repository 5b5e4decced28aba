"""An asyncio RocketMQ remoting client: what a broker or a producer uses to talk to a NameServer.

Used by the broker simulator, the tests and the benchmarks. Many requests may be in flight on one
connection; replies are matched by ``opaque``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from types import TracebackType
from typing import cast

from namesrv.domain.codes import Version
from namesrv.protocol.remoting import (
    FLAG_ONEWAY,
    SERIALIZE_JSON,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    encode,
)
from namesrv.security.signature import signed_fields


class RemotingClientError(Exception):
    """The connection failed or closed before a reply arrived."""


class RemotingClient(asyncio.Protocol):
    def __init__(
        self,
        *,
        version: int = Version.V5_3_3,
        language: str = "JAVA",
        serialize_type: int = SERIALIZE_JSON,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.version = version
        self.credentials = credentials  # (accessKey, secretKey): sign every request, as ACL clients do
        self.language = language
        self.serialize_type = serialize_type
        self._opaques = itertools.count(1)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._decoder = FrameDecoder(1 << 30)
        self._transport: asyncio.Transport | None = None
        self.closed = asyncio.Event()
        self.unmatched: list[RemotingCommand] = []  # replies to no pending request (oneway must add none)

    @classmethod
    async def connect(cls, address: str, **kwargs: object) -> RemotingClient:
        host, _, port = address.rpartition(":")
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(lambda: cls(**kwargs), host or "127.0.0.1", int(port))  # type: ignore[arg-type]
        return client

    async def reopen(self, address: str) -> RemotingClient:
        """A new connection to ``address`` that speaks and signs as this one did: a broker that
        reconnects keeps its version, language, serialization and ACL account."""
        return await RemotingClient.connect(
            address,
            version=self.version,
            language=self.language,
            serialize_type=self.serialize_type,
            credentials=self.credentials,
        )

    # ---- asyncio.Protocol ----
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            self._fail(RemotingClientError(f"bad frame from server: {exc}"))
            self.close()
            return
        for cmd in commands:
            future = self._pending.pop(cmd.opaque, None)
            if future is not None and not future.done():
                future.set_result(cmd)
            else:
                self.unmatched.append(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RemotingClientError(f"connection closed: {exc or 'by peer'}"))
        self.closed.set()

    def _fail(self, error: Exception) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    # ---- requests ----
    def request(
        self,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        version: int | None = None,
        oneway: bool = False,
    ) -> RemotingCommand:
        if self.credentials is not None:
            ext_fields = signed_fields(*self.credentials, ext_fields, body)
        return RemotingCommand(
            code=code,
            opaque=next(self._opaques),
            flag=FLAG_ONEWAY if oneway else 0,
            language=self.language,
            version=self.version if version is None else version,
            ext_fields=ext_fields,
            body=body,
        )

    async def send(self, cmd: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
        if self._transport is None or self._transport.is_closing():
            raise RemotingClientError("not connected")
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = future
        self._transport.write(encode(cmd, serialize_type=self.serialize_type))
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(cmd.opaque, None)

    async def invoke(
        self,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        version: int | None = None,
        timeout: float = 10.0,
    ) -> RemotingCommand:
        return await self.send(self.request(code, ext_fields, body, version=version), timeout)

    def oneway(self, code: int, ext_fields: dict[str, str] | None = None, body: bytes | None = None) -> None:
        if self._transport is None or self._transport.is_closing():
            raise RemotingClientError("not connected")
        self._transport.write(
            encode(self.request(code, ext_fields, body, oneway=True), serialize_type=self.serialize_type)
        )

    def write_raw(self, data: bytes) -> None:
        assert self._transport is not None
        self._transport.write(data)

    def close(self) -> None:
        if self._transport and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        """Reset the connection (RST), as a crashed process would."""
        if self._transport:
            self._transport.abort()

    async def aclose(self) -> None:
        self.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.closed.wait(), 5)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
