"""The remoting protocol's command and what every part of its codec shares (no I/O).

:class:`RemotingCommand` is Java's request or reply; the frame layer (:mod:`.remoting`) and the
two header layouts (:mod:`.json_header`, :mod:`.binary_header`) all build or read it, and raise
:class:`FrameError` where Java closes the connection.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from namesrv.domain.codes import LANGUAGES, Version
from namesrv.limits import MAX_REMARK_CHARS, bounded_remark

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
FLAG_RESPONSE = 1  # 1 << RemotingCommand.RPC_TYPE
FLAG_ONEWAY = 2  # 1 << RemotingCommand.RPC_ONEWAY

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
LANGUAGE_CODES = {name: code for code, name in enumerate(LANGUAGES)}
SERVER_VERSION = int(Version.V5_3_3)
INT32 = struct.Struct(">i")


@dataclass(slots=True)
class RemotingCommand:
    """Java's RemotingCommand: a request or a reply, header fields plus the body."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: str | None = "JAVA"  # LanguageCode name; None when unknown on input
    version: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None  # None: "extFields" omitted; {}: "extFields":{}
    body: bytes | None = None  # an empty body on the wire decodes to None, as in Java
    serialize_type: int = SERIALIZE_JSON  # of the frame it was decoded from

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)


class FrameError(Exception):
    """The connection must be closed (bad length, bad serialize type, frame over the max,
    undecodable header). Java logs these and closes the channel without replying.

    ``commands`` holds the complete commands that preceded the bad frame in the same
    :meth:`FrameDecoder.feed` call. Netty still hands those to the processors before the
    channel closes, so a server that wants Java's behaviour dispatches them (replies will
    usually not make it out)."""

    def __init__(self, message: str, commands: list[RemotingCommand] | None = None) -> None:
        super().__init__(message)
        self.commands: list[RemotingCommand] = commands if commands is not None else []


def response_to(
    request: RemotingCommand,
    code: int,
    *,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
    version: int = SERVER_VERSION,
) -> RemotingCommand:
    """A reply: same opaque, flag = FLAG_RESPONSE, language "JAVA", the given version.

    A oneway request gets no reply on the wire; the caller decides not to send this. The remark
    is cut to a bounded length: it often echoes what the client sent."""
    if remark is not None and len(remark) > MAX_REMARK_CHARS:
        remark = bounded_remark(remark)
    return RemotingCommand(
        code=code,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        language="JAVA",
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
    )


def present(ext: Mapping[str, str | None]) -> Iterator[tuple[str, str]]:
    """The entries fastjson (and the binary encoder) write: a null value is skipped."""
    return ((key, value) for key, value in ext.items() if value is not None)


def language_name(language: str) -> str:
    """``language`` if it is a LanguageCode name; ValueError otherwise (Java could not send it)."""
    if language not in LANGUAGE_CODES:
        raise ValueError(f"language {language!r} is not a LanguageCode name")
    return language
