"""The delta decoder gives exactly what a full decode gives, and says what changed."""

from __future__ import annotations

import pytest

from namesrv.domain.model import DataVersion, RawBody, TopicConfig
from namesrv.protocol.body_delta import RegisterBodyDecoder, names_digest
from namesrv.protocol.register_body import BodyDecodeError, decode_register_body
from namesrv.sim.bodies import register_body_json

MEMBER = "c/127.0.0.1:10911"


def table(n: int = 300) -> dict[str, TopicConfig]:
    return {f"T{i:04d}": TopicConfig(f"T{i:04d}", 8, 8, 6, attributes={"+k": f"v{i}"}) for i in range(n)}


def raw(configs: dict[str, TopicConfig], counter: int) -> RawBody:
    return RawBody(
        register_body_json(configs, DataVersion(counter, 0, 1700000000000), ("10.0.0.1:1",)), 399, False
    )


def check(decoder: RegisterBodyDecoder, body: RawBody) -> tuple[list[str], list[str]]:
    got = decoder.decode(body, MEMBER, 0)
    full, filters = decode_register_body(body.data, version=399, compressed=False, now_ms=0)
    assert dict(got.wrapper.topicConfigTable) == dict(full.topicConfigTable)
    assert (got.wrapper.dataVersion, got.filters) == (full.dataVersion, filters)
    assert got.names_digest == names_digest(full.topicConfigTable)
    assert got.delta is not None
    return sorted(c.topicName for c in got.delta.changed), sorted(got.delta.dropped)


@pytest.mark.parametrize("at", [0, 1, 150, 298, 299])
def test_one_changed_topic_anywhere(at: int) -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    decoder.decode(raw(configs, 1), MEMBER, 0)
    name = f"T{at:04d}"
    configs[name] = TopicConfig(name, 4, 4, 6)
    assert check(decoder, raw(configs, 2)) == ([name], [])


def test_added_removed_and_unchanged_topics() -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    decoder.decode(raw(configs, 1), MEMBER, 0)
    assert check(decoder, raw(configs, 2)) == ([], [])
    del configs["T0100"]
    assert check(decoder, raw(configs, 3)) == ([], ["T0100"])
    configs["Zed"] = TopicConfig("Zed", 1, 1, 6)
    assert check(decoder, raw(configs, 4)) == (["Zed"], [])
    assert decoder.deltas == 3


def test_a_broken_changed_entry_is_an_error_as_in_a_full_decode() -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    first = raw(configs, 1)
    decoder.decode(first, MEMBER, 0)
    assert first.data is not None
    broken = first.data.replace(b'"topicName":"T0042"', b'"topicName":42')
    with pytest.raises(BodyDecodeError):
        decoder.decode(RawBody(broken, 399, False), MEMBER, 0)


def test_decode_delta_only_once_the_previous_body_is_laid_out() -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    decoder.decode(raw(configs, 1), MEMBER, 0)
    configs["T0005"] = TopicConfig("T0005", 2, 2, 6)
    assert decoder.decode_delta(raw(configs, 2), MEMBER, 0) is None  # not laid out yet: no work done
    assert decoder.prepare(MEMBER)
    got = decoder.decode_delta(raw(configs, 2), MEMBER, 0)
    assert got is not None and got.delta is not None
    assert [c.topicName for c in got.delta.changed] == ["T0005"]
    configs["T0006"] = TopicConfig("T0006", 2, 2, 6)
    again = decoder.decode_delta(raw(configs, 3), MEMBER, 0)  # the delta laid out the new body
    assert again is not None and again.delta is not None
    assert [c.topicName for c in again.delta.changed] == ["T0006"]
    assert decoder.decode_delta(raw(configs, 4), "other/1.2.3.4:1", 0) is None


def test_bodies_beyond_the_memory_budget_are_forgotten_oldest_first() -> None:
    body = raw(table(), 1)
    assert body.data is not None
    decoder = RegisterBodyDecoder(max_bytes=int(len(body.data) * 4.5 * 2) + 10)
    for member in ("a/1.1.1.1:1", "b/1.1.1.1:1", "c/1.1.1.1:1"):
        decoder.decode(body, member, 0)
    assert not decoder.remembers_another("a/1.1.1.1:1", "x")  # forgotten
    assert decoder.remembers_another("b/1.1.1.1:1", "x") and decoder.remembers_another("c/1.1.1.1:1", "x")


def test_an_envelope_that_grows_or_changes_shifts_the_table() -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    decoder.decode(raw(configs, 9), MEMBER, 0)
    configs["T0299"] = TopicConfig("T0299", 1, 1, 6)
    assert check(decoder, raw(configs, 10)) == (["T0299"], [])  # counter 9 -> 10: one byte longer
    wider = RawBody(
        register_body_json(configs, DataVersion(11, 3, 1800000000000), ("10.0.0.1:1", "10.0.0.2:2")),
        399,
        False,
    )
    assert check(decoder, wider) == ([], [])
    assert decoder.deltas == 2


@pytest.mark.parametrize(
    "odd",
    [
        TopicConfig("topicConfigTable", 8, 8, 6),  # the table's own key, as a topic name
        TopicConfig("Quoted", 8, 8, 6, attributes={"+k": 'a "quoted" {brace} \\ value'}),
    ],
    ids=["table-key-as-topic", "escapes-and-braces"],
)
def test_unusual_bodies_decode_exactly_as_a_full_decode(odd: TopicConfig) -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    configs[odd.topicName] = odd
    decoder.decode(raw(configs, 1), MEMBER, 0)
    configs["T0100"] = TopicConfig("T0100", 3, 3, 6)
    body = raw(configs, 2)
    got = decoder.decode(body, MEMBER, 0)
    full, _ = decode_register_body(body.data, version=399, compressed=False, now_ms=0)
    assert dict(got.wrapper.topicConfigTable) == dict(full.topicConfigTable)
    if got.delta is not None:
        assert [c.topicName for c in got.delta.changed] == ["T0100"]


def test_a_config_named_apart_from_its_key_is_decoded_in_full() -> None:
    decoder = RegisterBodyDecoder()
    configs = table()
    configs["KeyOnly"] = TopicConfig("NamedOtherwise", 8, 8, 6)
    decoder.decode(raw(configs, 1), MEMBER, 0)
    configs["KeyOnly"] = TopicConfig("NamedOtherwise", 2, 2, 6)
    body = raw(configs, 2)
    got = decoder.decode(body, MEMBER, 0)
    full, _ = decode_register_body(body.data, version=399, compressed=False, now_ms=0)
    assert dict(got.wrapper.topicConfigTable) == dict(full.topicConfigTable)
    assert got.delta is None  # the full decode, which writes every topic
    assert got.names_digest == names_digest(full.topicConfigTable)


def test_body_hash_tells_bodies_and_their_decoding_apart() -> None:
    body = register_body_json(table(3), DataVersion(1, 0, 1700000000000))
    same = RawBody(body, 399, False).hash
    assert same == RawBody(bytes(body), 399, False).hash
    assert same.startswith("x3") and len(same) == 34  # never equal to an earlier release's SHA-1 (40 hex)
    others = {
        RawBody(body[:-1] + b" ", 399, False).hash,  # one byte differs
        RawBody(body, 400, False).hash,  # another request version decodes it otherwise
        RawBody(body, 399, True).hash,
        RawBody(None, 399, False).hash,
    }
    assert same not in others and len(others) == 4
