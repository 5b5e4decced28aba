"""What the attacks send, built once before they start: bytes only, no I/O.

Valid requests come from the project's codec (:func:`namesrv.protocol.remoting.encode`); the
malformed ones are written here byte by byte, since the codec cannot produce them.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import orjson

from namesrv.domain.codes import RequestCode
from namesrv.protocol.register_body import crc32_masked
from namesrv.protocol.remoting import RemotingCommand, encode

MIB = 1 << 20
VERSION = 479  # a 5.3.3 client
ATTACK_CLUSTER = "AttackCluster"


def request(
    code: int, ext: dict[str, str] | None = None, body: bytes | None = None, *, opaque: int = 1
) -> bytes:
    """A well-formed request frame (the attacks reuse one opaque: one request in flight each)."""
    return encode(
        RemotingCommand(code=code, opaque=opaque, version=VERSION, ext_fields=ext, body=body, language="JAVA")
    )


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame around any header bytes, valid JSON or not."""
    total = 4 + len(header) + len(body)
    return struct.pack(">ii", total, (serialize_type << 24) | len(header)) + header + body


def register_ext(name: str, addr: str, body: bytes, *, compressed: bool = False) -> dict[str, str]:
    """REGISTER_BROKER's header for ``body``, with the CRC a real broker computes (a wrong CRC is
    refused before the body is looked at, and would test nothing)."""
    host, _, port = addr.rpartition(":")
    return {
        "brokerId": "0",
        "bodyCrc32": str(crc32_masked(body)),
        "clusterName": ATTACK_CLUSTER,
        "brokerAddr": addr,
        "haServerAddr": f"{host}:{int(port) + 1}",
        "compressed": "true" if compressed else "false",
        "brokerName": name,
        "enableActingMaster": "false",
    }


# ---- issue #25 row 1: the zlib bomb ---------------------------------------------------------


def zlib_bomb(inflated: int = 63 * MIB) -> bytes:
    """A compressed REGISTER_BROKER body of about 64 KB that inflates to ``inflated`` + 4 bytes:
    a length prefix announcing ``inflated`` bytes of dataVersion text, and that many '0's."""
    compressor = zlib.compressobj(9)
    zeros = b"0" * MIB
    parts = [compressor.compress(struct.pack(">i", inflated))]
    for start in range(0, inflated, MIB):
        parts.append(compressor.compress(zeros[: min(MIB, inflated - start)]))
    parts.append(compressor.flush())
    return b"".join(parts)


def zlib_bomb_request(index: int, body: bytes) -> bytes:
    name = f"bomb-{index}"
    return request(
        RequestCode.REGISTER_BROKER,
        register_ext(name, f"10.66.0.{index % 250 + 1}:10911", body, compressed=True),
        body,
    )


# ---- last round: oversized names ------------------------------------------------------------


def register_body(topics: dict[str, str]) -> bytes:
    """A REGISTER_BROKER JSON body holding ``topics`` (table key -> topicName)."""
    table = {
        key: {
            "topicName": name,
            "readQueueNums": 4,
            "writeQueueNums": 4,
            "perm": 6,
            "topicSysFlag": 0,
            "topicFilterType": "SINGLE_TAG",
            "order": False,
        }
        for key, name in topics.items()
    }
    body: dict[str, Any] = {
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 1700000000000},
            "topicConfigTable": table,
        },
        "filterServerList": [],
    }
    return orjson.dumps(body)


def oversized_requests(size: int) -> list[tuple[str, bytes]]:
    """Requests carrying a name of ``size`` characters: a route lookup, a registration whose
    topic has that name, and one whose broker has it."""
    huge = "T" * size
    topic_body = register_body({huge: huge})
    plain_body = register_body({"AttackTopic": "AttackTopic"})
    return [
        ("lookup", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": huge})),
        (
            "register: topic name",
            request(
                RequestCode.REGISTER_BROKER,
                register_ext("big-topic", "10.66.1.1:10911", topic_body),
                topic_body,
            ),
        ),
        (
            "register: broker name",
            request(
                RequestCode.REGISTER_BROKER, register_ext(huge, "10.66.1.2:10911", plain_body), plain_body
            ),
        ),
    ]


# ---- last round: malformed frames ----------------------------------------------------------


def _bomb(depth: int, open_: str = "[", close: str = "]") -> bytes:
    return (open_ * depth + close * depth).encode()


def malformed_frames() -> list[tuple[str, bytes]]:
    """Each sent on its own connection: bytes that are not a frame, frames whose lengths lie,
    headers that are not JSON or not an object, nesting bombs, and bodies that do not decode."""
    lookup = b'{"code":105,"flag":0,"language":"JAVA","opaque":1,"version":479,"extFields":{"topic":"T"}}'
    register_ext_fields = register_ext("junk-b", "10.66.2.1:10911", b"x")
    junk_body = b"\x00\x01not a register body"
    return [
        ("garbage", bytes(range(256)) * 2),
        ("negative length", struct.pack(">i", -5) + b"x" * 64),
        ("length past frameMaxLength", struct.pack(">i", 0x7FFFFFF0) + b"x" * 64),
        ("header longer than the frame", struct.pack(">ii", 12, 4000) + b"{}" + b"x" * 6),
        ("zero length", struct.pack(">i", 0)),
        ("header not JSON", frame(b"{not json at all")),
        ("header a JSON list", frame(b"[1, 2, 3]")),
        ("header nesting bomb", frame(_bomb(5000))),
        ("extFields nesting bomb", frame(b'{"code":105,"extFields":' + _bomb(3000, '{"a":', "}") + b"}")),
        ("header not UTF-8", frame(b'{"code":105,"extFields":{"topic":"\xff\xfe\xfd"}}')),
        ("unknown serialize type", frame(lookup, serialize_type=7)),
        ("binary header cut short", frame(b"\x00\x69\x00", serialize_type=1)),
        ("code not a number", frame(b'{"code":"GET_ROUTE","opaque":1}')),
        ("2,000 ext fields", request(105, {f"k{i}": "v" * 50 for i in range(2000)} | {"topic": "Nope"})),
        (
            "register body not JSON",
            request(
                RequestCode.REGISTER_BROKER,
                register_ext_fields | {"bodyCrc32": str(crc32_masked(junk_body))},
                junk_body,
            ),
        ),
        (
            "register body a nesting bomb",
            request(
                RequestCode.REGISTER_BROKER,
                register_ext("junk-b", "10.66.2.1:10911", b"") | {"bodyCrc32": "0"},
                b'{"topicConfigSerializeWrapper":' + _bomb(3000, '{"x":', "}") + b"}",
            ),
        ),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    ]


# ---- last round: partial frames -------------------------------------------------------------


def partial_frame_head(declared: int) -> bytes:
    """The start of a route lookup frame that declares ``declared`` bytes in all; the attack
    sends part of the rest and stops."""
    header = orjson.dumps({"code": 105, "flag": 0, "language": "JAVA", "opaque": 1, "version": VERSION})
    return struct.pack(">ii", declared, len(header)) + header
