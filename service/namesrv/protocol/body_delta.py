"""Decode a REGISTER_BROKER body in proportion to what changed since the broker's previous one.

A broker re-sends its whole topic table (10,000 topics: 1.7 MB of JSON) whenever any one topic
changes. Parsing all of it costs far more than the registration's Redis work, so the decoder
remembers, per broker address, the last uncompressed JSON body it decoded: its bytes, its topic
configs and where each topic's entry sits in the bytes. A new body is compared with it as bytes:
the common prefix and suffix of the two topic tables are skipped in C (``bytes ==``), and only
the entries between them, plus the small envelope around the table (dataVersion, filter
servers, static-topic mappings), are parsed. The result says which topics are new or changed
and which disappeared, against the earlier body's hash (see ``registerBrokerTopics``' delta).

Why this is safe: JSON is context free. The unchanged prefix ends right after a ``,`` (or the
table's ``{``) and the unchanged suffix starts at a ``,`` (or the ``}``) of the earlier body,
which was fully decoded; the bytes between parse on their own as members of an object; and a
probe shows that the table's slot in the new envelope is the value of ``topicConfigTable``. The
new body is then valid and means exactly the composed table. Anything unusual (compressed or
pre-3.0.11 bodies, escapes or nesting the entry pattern does not cover, a key repeated) takes
the full decode, which stays the reference.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from namesrv.domain.codes import Version
from namesrv.domain.model import RawBody, TopicConfig, TopicConfigWrapper
from namesrv.protocol.register_body import (
    BodyLimits,
    FilterServers,
    decode_register_body,
    decode_topic_config_table,
    inflates,
)

__all__ = ["BodyDelta", "DecodedBody", "RegisterBodyDecoder", "names_digest"]

TABLE_KEY = b'"topicConfigTable":{'
# One topic entry as fastjson writes it: a plain key, an object whose values are scalars, plain
# strings or one level of nested object (attributes). Possessive, so a mismatch fails fast.
_STR = rb'"(?:[^"\\]++|\\.)*+"'
_FLAT = rb'(?:[^{}"\\]++|' + _STR + rb")*+"
_ENTRY = re.compile(
    rb'"([^"\\\x00-\x1f]{1,255}+)":\{' + _FLAT + rb"(?:\{" + _FLAT + rb"\}" + _FLAT + rb")*+\}"
)
_PROBE_KEY = "~layout-probe~"
_PROBE = b'"' + _PROBE_KEY.encode() + b'":0'
# remember bodies this big or bigger only (small ones decode fast anyway)
MIN_REMEMBERED = 16 * 1024
_BLOCKS = (65536, 4096, 256, 16)


def names_digest(table: Mapping[str, TopicConfig]) -> str:
    """SHA-1 of the sorted topic names (each config's ``topicName``): what ``{ns}:bdigest``
    compares."""
    return hashlib.sha1("\n".join(sorted(tc.topicName for tc in table.values())).encode()).hexdigest()


@dataclass(frozen=True)
class BodyDelta:
    """What a body changed against an earlier body of the same broker address."""

    base_hash: str  # the earlier body's hash (what ``{ns}:bsync`` must still name)
    changed: tuple[TopicConfig, ...]  # new topics and topics whose config differs
    dropped: tuple[str, ...]  # topics the earlier body had and this one has not
    base_had_mappings: bool  # the earlier body carried static-topic mappings


@dataclass(frozen=True)
class DecodedBody:
    wrapper: TopicConfigWrapper
    filters: FilterServers
    names_digest: str
    delta: BodyDelta | None = None  # None: no earlier body to compare with (write every topic)


@dataclass
class _Layout:
    t0: int  # offset just after the table's '{'
    t1: int  # offset of the table's closing '}'
    starts: list[int]  # entry i is body[t0 + starts[i] : t0 + ends[i]]
    ends: list[int]
    keys: list[str]


@dataclass
class _Known:
    hash: str
    data: bytes
    decoded: DecodedBody
    layout: _Layout | None = None
    no_layout: bool = False  # the entry pattern does not tile this body: never compare with it


# What remembering a body costs: its bytes, plus its decoded topic configs and entry offsets
# (measured: 5.7 MB more for a 1.7 MB body of 10,000 topics).
MEMORY_PER_BODY_BYTE = 4.5


# The default of ``registerBodyCacheBytes``: 8 brokers of 10,000 topics (1.7 MB bodies), 80 of 1,000.
DEFAULT_CACHE_BYTES = 64 * 1024 * 1024


class RegisterBodyDecoder:
    """Thread-safe (decodes of big bodies run in worker threads); remembers bodies up to about
    ``max_bytes`` of memory (``registerBodyCacheBytes``), least recently decoded first out."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.deltas = 0  # bodies decoded as a delta (diagnostics, tests)

    def decode(self, raw: RawBody, member: str, now_ms: int, limits: BodyLimits | None = None) -> DecodedBody:
        """Raises BodyDecodeError as :func:`decode_register_body` does (``limits`` too)."""
        cacheable = raw.version >= Version.V3_0_11 and raw.data is not None and not _inflates(raw)
        if not cacheable:
            wrapper, filters = decode_register_body(
                raw.data, version=raw.version, compressed=raw.compressed, now_ms=now_ms, limits=limits
            )
            return DecodedBody(wrapper, filters, names_digest(wrapper.topicConfigTable))
        data = raw.data or b""
        with self._lock:
            known = self._known.get(member)
        decoded: DecodedBody | None = None
        layout: _Layout | None = None
        if known is not None and not known.no_layout:
            found = _delta(known, data, raw.version, now_ms)
            if found is not None:
                decoded, layout = found
                self.deltas += 1
        if decoded is None:
            wrapper, filters = decode_register_body(
                data, version=raw.version, compressed=False, now_ms=now_ms
            )
            decoded = DecodedBody(wrapper, filters, names_digest(wrapper.topicConfigTable))
        if len(data) >= MIN_REMEMBERED:
            self._remember(member, _Known(raw.hash, data, decoded, layout))
        return decoded

    def remembers_another(self, member: str, body_hash: str) -> bool:
        """The last body decoded for ``member`` is remembered and is not this one."""
        with self._lock:
            known = self._known.get(member)
        return known is not None and known.hash != body_hash

    def decode_delta(self, raw: RawBody, member: str, now_ms: int) -> DecodedBody | None:
        """The body as a delta against the member's previous one, if that one is laid out already:
        a few ms even for 10,000 topics, fit for the event loop. None: use :meth:`decode`."""
        if raw.data is None or raw.version < Version.V3_0_11 or _inflates(raw):
            return None
        with self._lock:
            known = self._known.get(member)
        if known is None or known.layout is None:
            return None
        found = _delta(known, raw.data, raw.version, now_ms)
        if found is None:
            return None
        decoded, layout = found
        self.deltas += 1
        self._remember(member, _Known(raw.hash, raw.data, decoded, layout))
        return decoded

    def prepare(self, member: str) -> bool:
        """Lay out the remembered body of ``member`` now (a full pass over its entries, tens of ms
        for 10,000 topics), so that its next body is compared at once; True when it can be."""
        with self._lock:
            known = self._known.get(member)
        return known is not None and _layout(known) is not None

    def needs_layout(self, member: str) -> bool:
        with self._lock:
            known = self._known.get(member)
        return known is not None and known.layout is None and not known.no_layout

    def _remember(self, member: str, known: _Known) -> None:
        with self._lock:
            old = self._known.pop(member, None)
            if old is not None:
                self._bytes -= _cost(old)
            self._known[member] = known
            self._bytes += _cost(known)
            while self._bytes > self.max_bytes and self._known:
                _, dropped = self._known.popitem(last=False)
                self._bytes -= _cost(dropped)


def _inflates(raw: RawBody) -> bool:
    return inflates(raw.data, version=raw.version, compressed=raw.compressed)


def _cost(known: _Known) -> int:
    return int(len(known.data) * MEMORY_PER_BODY_BYTE)


def _layout(known: _Known) -> _Layout | None:
    """Where each entry of the table sits; None when the body is not in the plain shape."""
    if known.layout is not None or known.no_layout:
        return known.layout
    data, table = known.data, known.decoded.wrapper.topicConfigTable
    at = data.find(TABLE_KEY)
    layout = None
    if at >= 0 and data.find(TABLE_KEY, at + 1) < 0:
        t0 = at + len(TABLE_KEY)
        tiled = _tile(data, t0)
        if tiled is not None:
            starts, ends, keys, t1 = tiled
            if keys == list(table):  # also rules out a key written twice
                layout = _Layout(t0, t1, [s - t0 for s in starts], [e - t0 for e in ends], keys)
    known.layout = layout
    known.no_layout = layout is None
    return layout


def _tile(
    data: bytes, pos: int, end: int | None = None
) -> tuple[list[int], list[int], list[str], int] | None:
    """Entries back to back from ``pos``, separated by ',' up to a '}' (at ``end`` when given)."""
    starts: list[int] = []
    ends: list[int] = []
    keys: list[str] = []
    limit = len(data) if end is None else end
    if end is not None and pos == end:
        return starts, ends, keys, end
    if end is None and data[pos : pos + 1] == b"}":
        return starts, ends, keys, pos
    match = _ENTRY.match
    while True:
        m = match(data, pos, limit)
        if m is None:
            return None
        starts.append(pos)
        pos = m.end()
        ends.append(pos)
        keys.append(m.group(1).decode("utf-8", "surrogateescape"))
        sep = data[pos : pos + 1]
        if end is not None and pos == end:
            return starts, ends, keys, pos
        if sep == b"}" and end is None:
            return starts, ends, keys, pos
        if sep != b",":
            return None
        pos += 1


def _common_prefix(a: bytes, b: bytes, a_at: int, b_at: int, limit: int) -> int:
    """Length of the common prefix of a[a_at:] and b[b_at:], at most ``limit``: compared in
    blocks (C speed), each level narrowing the first block that differs."""
    n = 0
    for block in _BLOCKS:
        while n + block <= limit and a[a_at + n : a_at + n + block] == b[b_at + n : b_at + n + block]:
            n += block
    while n < limit and a[a_at + n] == b[b_at + n]:
        n += 1
    return n


def _common_suffix(a: bytes, b: bytes, a_end: int, b_end: int, limit: int) -> int:
    """Length of the common suffix of a[:a_end] and b[:b_end], at most ``limit``."""
    n = 0
    for block in _BLOCKS:
        while n + block <= limit and a[a_end - n - block : a_end - n] == b[b_end - n - block : b_end - n]:
            n += block
    while n < limit and a[a_end - n - 1] == b[b_end - n - 1]:
        n += 1
    return n


def _probe_ok(head: bytes, tail: bytes) -> bool:
    """The slot between ``head`` and ``tail`` is the value of wrapper.topicConfigTable."""
    try:
        obj: Any = orjson.loads(head + _PROBE + tail)
    except orjson.JSONDecodeError:
        return False
    wrapper = obj.get("topicConfigSerializeWrapper") if type(obj) is dict else None
    return type(wrapper) is dict and wrapper.get("topicConfigTable") == {_PROBE_KEY: 0}


def _delta(known: _Known, new: bytes, version: int, now_ms: int) -> tuple[DecodedBody, _Layout | None] | None:  # noqa: C901 - one pass over the body's layout; each early return is a case where a full decode must run
    layout = _layout(known)
    if layout is None:
        return None
    old = known.data
    # the first occurrence: the envelope's key comes before any entry (the probe below checks it)
    at = new.find(TABLE_KEY, 0, layout.t0 + 1024)
    if at < 0:
        return None
    n0 = at + len(TABLE_KEY)
    t0, t1 = layout.t0, layout.t1
    tail_len = len(old) - t1  # from the table's '}' to the end
    n1 = len(new) - tail_len
    if n1 < n0 or new[n1:] != old[t1:]:
        return None
    head, tail = new[:n0], new[n1:]
    if not _probe_ok(head, tail):
        return None
    # the envelope: dataVersion, filter servers, mappings (raises BodyDecodeError like a full decode)
    envelope, filters = decode_register_body(head + tail, version=version, compressed=False, now_ms=now_ms)
    old_len, new_len = t1 - t0, n1 - n0
    shortest = min(old_len, new_len)
    p = _common_prefix(old, new, t0, n0, shortest)
    q = _common_suffix(old, new, t1, n1, shortest - p)
    old_table = known.decoded.wrapper.topicConfigTable
    count = len(layout.starts)
    if p == old_len == new_len:
        region_cfgs: dict[str, TopicConfig] = {}
        a, b, lo, hi, shift = 0, -1, 0, 0, 0
        new_layout = _Layout(n0, n1, layout.starts, layout.ends, layout.keys)
        replaced: list[str] = []
    else:
        if count == 0:
            a, b = 0, -1
        else:
            a = max(0, bisect.bisect_right(layout.starts, p) - 1)
            b = min(count - 1, max(a, bisect.bisect_left(layout.ends, old_len - q)))
            a, b = max(0, a - 1), min(count - 1, b + 1)  # a neighbour on each side keeps separators right
        lo = layout.starts[a] if count else 0
        hi = layout.ends[b] if count else 0
        if count and a == 0:
            lo = 0
        if count and b == count - 1:
            hi = old_len
        shift = new_len - old_len
        if hi + shift < lo:
            return None
        region = new[n0 + lo : n0 + hi + shift]
        if not region.strip() and not (lo == 0 and hi == old_len):
            return None
        try:
            region_cfgs = decode_topic_config_table(b"{" + region + b"}")
        except ValueError:
            return None
        replaced = layout.keys[a : b + 1]
        if any(cfg.topicName != key for key, cfg in region_cfgs.items()) or any(
            old_table[key].topicName != key for key in replaced
        ):
            return None  # a config named apart from its key: the full decode handles it
        replaced_set = set(replaced)
        for key in region_cfgs:
            if key in old_table and key not in replaced_set:
                return None  # a key written twice: the full decode says which one wins
        tiled = _tile(new, n0 + lo, n0 + hi + shift) if region else ([], [], [], n0 + lo)
        new_layout = None
        if tiled is not None and len(tiled[2]) == len(region_cfgs):
            r_starts, r_ends, r_keys, _ = tiled
            new_layout = _Layout(
                n0,
                n1,
                layout.starts[:a] + [s - n0 for s in r_starts] + [s + shift for s in layout.starts[b + 1 :]],
                layout.ends[:a] + [e - n0 for e in r_ends] + [e + shift for e in layout.ends[b + 1 :]],
                layout.keys[:a] + r_keys + layout.keys[b + 1 :],
            )
    table = dict(old_table)
    for key in replaced:
        del table[key]
    table.update(region_cfgs)
    changed = tuple(cfg for key, cfg in region_cfgs.items() if old_table.get(key) != cfg)
    dropped = tuple(key for key in replaced if key not in region_cfgs)
    digest = known.decoded.names_digest
    if dropped or any(key not in old_table for key in region_cfgs):
        digest = names_digest(table)
    wrapper = TopicConfigWrapper(table, envelope.dataVersion, envelope.topicQueueMappingInfoMap)
    delta = BodyDelta(known.hash, changed, dropped, bool(known.decoded.wrapper.topicQueueMappingInfoMap))
    return DecodedBody(wrapper, filters, digest, delta), new_layout
