"""The Python ceiling: a bare asyncio + uvloop server that does the least a route server can do.

Remoting: for every frame it reads the opaque out of the header (nothing else is decoded) and
answers with a pre-encoded GET_ROUTEINFO_BY_TOPIC reply, with the same header layout and the very
body bytes a fleet worker returned for a benchmark topic, so replies have the same size. Like the
real worker answering from its cache, it writes the replies to the frames of one read together,
in one ``transport.write``. HTTP: an aiohttp app whose only handler
returns the pre-encoded route JSON the worker served. No Redis, no lookup, no encoding: what is
left is the per-request cost of Python, the event loop and the kernel, which is the ceiling our
workers are measured against (``route lookups/s ÷ ceiling``).

Run: ``python -m bench.ceiling --remoting-port P --http-port Q --remoting-body F --http-body G``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import struct
from pathlib import Path
from typing import cast

from aiohttp import web

from bench.loops import quiet_gc, run_fast

_PREFIX = struct.Struct(">iI")
_OPAQUE_KEY = b'"opaque":'
_BINARY_OPAQUE = struct.Struct(">i")
SERVER_VERSION = 479  # what the worker puts in replies by default (emulatedVersion)


class ReplyTemplate:
    """The worker's route reply with the opaque left open: header head + opaque + tail, body."""

    def __init__(self, body: bytes, version: int = SERVER_VERSION) -> None:
        self.head = b'{"code":0,"flag":1,"language":"JAVA","opaque":'
        self.tail = b',"serializeTypeCurrentRPC":"JSON","version":%d}' % version
        self.body = body
        self._fixed = len(self.head) + len(self.tail)

    def frame(self, opaque: int) -> bytes:
        digits = b"%d" % opaque
        header_length = self._fixed + len(digits)
        prefix = _PREFIX.pack(4 + header_length + len(self.body), header_length)
        return b"".join((prefix, self.head, digits, self.tail, self.body))


class CeilingProtocol(asyncio.Protocol):
    def __init__(self, template: ReplyTemplate) -> None:
        self.template = template
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        pos, end = 0, len(buffer)
        transport, template = self.transport, self.template
        assert transport is not None
        replies: list[bytes] = []
        with memoryview(buffer) as view:
            while end - pos >= 8:
                total, type_and_length = _PREFIX.unpack_from(view, pos)
                if end - pos - 4 < total:
                    break
                header_start = pos + 8
                if type_and_length >> 24 == 0:  # JSON header: find "opaque":N
                    at = buffer.find(_OPAQUE_KEY, header_start, header_start + (type_and_length & 0xFFFFFF))
                    at += len(_OPAQUE_KEY)
                    stop = at
                    while 48 <= buffer[stop] <= 57 or buffer[stop] == 45:  # digits and '-'
                        stop += 1
                    opaque = int(buffer[at:stop])
                else:  # ROCKETMQ binary header: code(2) language(1) version(2) opaque(4)
                    (opaque,) = _BINARY_OPAQUE.unpack_from(view, header_start + 5)
                replies.append(template.frame(opaque))
                pos += 4 + total
        del buffer[:pos]
        if replies:
            transport.write(b"".join(replies))


async def serve(remoting_port: int, http_port: int, remoting_body: bytes, http_body: bytes) -> None:
    loop = asyncio.get_running_loop()
    template = ReplyTemplate(remoting_body)
    server = await loop.create_server(
        lambda: CeilingProtocol(template), "127.0.0.1", remoting_port, reuse_address=True, backlog=1024
    )

    async def route(request: web.Request) -> web.Response:
        return web.Response(body=http_body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/routes/{topic}", route)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", http_port, reuse_address=True, backlog=1024)
    await site.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__)
    parser.add_argument("--remoting-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--remoting-body", type=Path, required=True, help="route reply body (bytes)")
    parser.add_argument("--http-body", type=Path, required=True, help="HTTP route JSON (bytes)")
    args = parser.parse_args()
    quiet_gc()
    coro = serve(
        args.remoting_port, args.http_port, args.remoting_body.read_bytes(), args.http_body.read_bytes()
    )
    run_fast(coro)


if __name__ == "__main__":
    main()
