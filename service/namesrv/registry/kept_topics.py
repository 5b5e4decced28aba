"""The topic writes a registration made, kept compactly so that a heal replays them undecoded.

A heal's replay of a 10,000-topic master used to decode its kept body again (JSON to topic
configs, sorted) and render every queue write: about two thirds of the worker's CPU for that
replay (``python -m bench.replay_cost``), spent by every worker at once while Redis is empty.
The writes depend on the body and the broker name alone, so the registration that rendered them
keeps them, and a replay only unpacks them. The body itself stays kept too: it is what a replay
falls back on when no writes were kept (a broker whose unchanged body this worker never decoded).

Layout (before zlib): a 12-byte header of three lengths (head JSON, names, index item size);
the head JSON (the broker name, each distinct queue write with its topicSysFlag, and the
static-topic mappings);
the topic names joined by newlines (a topic name is printable, so holds none); one index per topic
into the distinct writes, as a machine array. A broker's topics share a handful of queue writes,
so the names are most of it. No I/O.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from namesrv.store.registration_args import TopicWrites

_HEADER = struct.Struct(">III")


@dataclass(frozen=True)
class WrittenTopics:
    """Every topic write of one body, in the order they were sent (sorted by topic), and the
    static-topic mappings its final call carried (topic -> TopicQueueMappingInfo JSON). The
    queue writes name the broker: they hold for the broker name they were written for only."""

    broker_name: str
    writes: TopicWrites
    mappings: Mapping[str, str]


def pack_written(written: WrittenTopics) -> bytes | None:
    """``written`` compressed; None when a name would not survive the layout (a newline: only a
    body no decoder accepts could carry one)."""
    writes = written.writes
    names = "\n".join(writes.topics)
    if writes.topics and names.count("\n") != len(writes) - 1:
        return None
    shapes: dict[tuple[str, int], int] = {}
    index = [shapes.setdefault(shape, len(shapes)) for shape in zip(writes.queues, writes.flags, strict=True)]
    head = orjson.dumps(
        {"brokerName": written.broker_name, "queues": list(shapes), "mappings": dict(written.mappings)}
    )
    column = array("H" if len(shapes) <= 0xFFFF else "I", index)
    encoded = names.encode()
    raw = b"".join((_HEADER.pack(len(head), len(encoded), column.itemsize), head, encoded, column.tobytes()))
    return zlib.compress(raw, 1)


def unpack_written(packed: bytes) -> WrittenTopics:
    raw = zlib.decompress(packed)
    head_len, names_len, item_size = _HEADER.unpack_from(raw)
    at = _HEADER.size
    head = orjson.loads(raw[at : at + head_len])
    at += head_len
    names = raw[at : at + names_len].decode()
    at += names_len
    column = array("H" if item_size == 2 else "I")
    column.frombytes(raw[at:])
    queues = [str(queue) for queue, _ in head["queues"]]
    flags = [int(flag) for _, flag in head["queues"]]
    topics = names.split("\n") if column else []
    if len(topics) != len(column):
        raise ValueError(f"{len(topics)} topic names for {len(column)} queue writes")
    if len(queues) == 1:  # the usual case: every topic of the broker alike
        writes = TopicWrites(topics, queues * len(topics), flags * len(topics))
    else:
        writes = TopicWrites(topics, [queues[i] for i in column], [flags[i] for i in column])
    return WrittenTopics(
        str(head["brokerName"]), writes, {str(k): str(v) for k, v in head["mappings"].items()}
    )
