"""A tiny stand-in for a RocketMQ broker, so a real producer can finish a send after it looked up
the route from our NameServer. It answers the few broker codes producers use and records them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import cast

from namesrv.protocol.remoting import FrameDecoder, FrameError, RemotingCommand, encode, response_to

SEND_MESSAGE, SEND_MESSAGE_V2, HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP = 10, 310, 34, 35, 38


@dataclass
class FakeBroker:
    received: list[RemotingCommand] = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    server: asyncio.Server | None = None

    @property
    def addr(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def start(self) -> None:
        self.server = await asyncio.get_running_loop().create_server(lambda: _Conn(self), "127.0.0.1", 0)

    async def stop(self) -> None:
        if self.server:
            self.server.close()
            await self.server.wait_closed()

    def answer(self, cmd: RemotingCommand) -> RemotingCommand:
        self.received.append(cmd)
        ext = cmd.ext_fields or {}
        if cmd.code in (SEND_MESSAGE, SEND_MESSAGE_V2):
            topic = ext.get("topic") or ext.get("b") or ""
            queue = ext.get("queueId") or ext.get("e") or "0"
            offset = self.offsets.get(topic, 0)
            self.offsets[topic] = offset + 1
            return response_to(
                cmd,
                0,
                ext_fields={
                    "msgId": f"7F00000100002A9F{offset:016X}",
                    "queueId": queue,
                    "queueOffset": str(offset),
                    "MSG_REGION": "DefaultRegion",
                    "TRACE_ON": "false",
                },
            )
        if cmd.code == GET_CONSUMER_LIST_BY_GROUP:
            return response_to(cmd, 0, body=b'{"consumerIdList":[]}')
        return response_to(cmd, 0)


class _Conn(asyncio.Protocol):
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        try:
            commands = self.decoder.feed(data)
        except FrameError:
            self.transport.close()
            return
        for cmd in commands:
            if cmd.is_response:
                continue
            reply = self.broker.answer(cmd)
            if not cmd.is_oneway:
                self.transport.write(encode(reply))
