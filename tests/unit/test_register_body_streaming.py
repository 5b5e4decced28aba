"""The compressed REGISTER_BROKER layout read as it inflates: zip bombs refused after a few
bytes, the per-part and per-body caps, what a decode charges, the fast path for plain topic
texts, and the 5.3.3 body that says compressed=false."""

from __future__ import annotations

import struct
import zlib

import pytest

from namesrv.config import Settings
from namesrv.domain.model import DataVersion, TopicConfig
from namesrv.protocol.body_delta import DEFAULT_CACHE_BYTES
from namesrv.protocol.register_body import (
    DEFAULT_MAX_INFLATED,
    JSON_OBJECT_BYTES,
    BodyDecodeError,
    BodyLimits,
    BodyTooLarge,
    compressed_decode_estimate,
    decode_register_body,
    inflates,
    json_decode_cost,
)
from namesrv.protocol.register_body_compressed import (
    CHARGE_STEP,
    COST_PER_COMPRESSED_BYTE,
    MAX_PART_BYTES,
    TOPIC_BYTES,
    _plain_topic_config,
    _topic_config_from_text,
)
from namesrv.sim.bodies import register_body_compressed, register_body_json

MIB = 1 << 20
VERSION = DataVersion(3, 0, 1700000000000)


def block(data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return struct.pack(">i", len(raw)) + raw


def issue_bomb() -> bytes:
    """Issue #25's body: 64 KB of zlib that inflates to 63 MiB, a length and then zeros."""
    return zlib.compress(struct.pack(">i", 63 << 20) + b"0" * (63 << 20), 9)


class Charges:
    """A BodyLimits.charge that records what it was asked for."""

    def __init__(self, refuse_after: int | None = None) -> None:
        self.total = 0
        self.calls = 0
        self.refuse_after = refuse_after

    def __call__(self, nbytes: int) -> None:
        if self.refuse_after is not None and self.total + nbytes > self.refuse_after:
            raise RuntimeError("budget full")
        self.total += nbytes
        self.calls += 1


def topics(n: int, name: str = "business-domain-service-events-{:06d}") -> dict[str, TopicConfig]:
    return {
        name.format(i): TopicConfig(name.format(i), 16, 16, 6, attributes={"+message.type": "NORMAL"})
        for i in range(n)
    }


def decode(body: bytes, *, compressed: bool = True, limits: BodyLimits | None = None) -> object:
    return decode_register_body(body, version=479, compressed=compressed, now_ms=0, limits=limits)


# ---- bombs and caps ---------------------------------------------------------------------------


def test_the_issue_bomb_is_refused_at_its_first_length_having_charged_almost_nothing() -> None:
    bomb = issue_bomb()
    assert 60_000 < len(bomb) < 70_000
    charges = Charges()
    with pytest.raises(BodyTooLarge) as refused:
        decode(bomb, limits=BodyLimits(DEFAULT_MAX_INFLATED, charges))
    assert str(refused.value) == (
        "compressed body gives dataVersion a length of 66060288 bytes: it would inflate to more "
        "than 33554432 bytes (registerBodyMaxInflatedBytes)"
    )
    assert refused.value.limit == "registerBodyMaxInflatedBytes"
    assert charges.total == CHARGE_STEP  # the 4 bytes of the length, charged ahead in one step


def test_a_part_longer_than_any_real_one_is_refused_before_it_is_read() -> None:
    body = zlib.compress(block(b"x" * (MAX_PART_BYTES + 1)))
    with pytest.raises(BodyDecodeError) as refused:
        decode(body)
    assert not isinstance(refused.value, BodyTooLarge)
    assert str(refused.value) == (
        f"compressed body gives dataVersion a length of {MAX_PART_BYTES + 1} bytes; no real part is "
        f"longer than {MAX_PART_BYTES}"
    )


def test_parts_adding_up_past_the_cap_stop_at_the_part_that_passes_it() -> None:
    body = register_body_compressed(topics(2000), VERSION)
    inflated = len(zlib.decompress(body))
    decode(body, limits=BodyLimits(inflated))  # exactly at the cap: fine
    with pytest.raises(BodyTooLarge) as refused:
        decode(body, limits=BodyLimits(inflated - 1))
    assert str(refused.value) == (
        f"compressed body inflates to more than {inflated - 1} bytes at mapping count "
        "(registerBodyMaxInflatedBytes)"
    )
    with pytest.raises(BodyTooLarge, match=r"gives topic config #\d+ a length of \d+ bytes: it would"):
        decode(body, limits=BodyLimits(inflated // 2))


def test_a_stream_of_zeros_is_read_as_the_empty_parts_it_says() -> None:
    """Zeros say 'a part of 0 bytes': the dataVersion is then empty text, which is no JSON."""
    packer = zlib.compressobj(9)
    bomb = b"".join(packer.compress(bytes(MIB)) for _ in range(64)) + packer.flush()
    with pytest.raises(BodyDecodeError, match="^dataVersion: invalid JSON"):
        decode(bomb)


def test_bytes_after_the_last_part_are_never_inflated() -> None:
    """Java stops reading after the layout; a bomb appended to a real body is not read either."""
    real = zlib.decompress(register_body_compressed(topics(3), VERSION))
    packer = zlib.compressobj(9)
    body = packer.compress(real) + b"".join(packer.compress(bytes(MIB)) for _ in range(256)) + packer.flush()
    charges = Charges()
    wrapper, _ = decode_register_body(
        body, version=479, compressed=True, now_ms=0, limits=BodyLimits(len(real), charges)
    )
    assert len(wrapper.topicConfigTable) == 3
    assert charges.total == CHARGE_STEP


# ---- what a decode charges --------------------------------------------------------------------


def test_a_decode_charges_its_text_and_an_allowance_per_topic_ahead_in_steps() -> None:
    body = register_body_compressed(topics(10_000), VERSION)
    inflated = len(zlib.decompress(body))
    charges = Charges()
    wrapper, _ = decode(body, limits=BodyLimits(DEFAULT_MAX_INFLATED, charges))
    assert len(wrapper.topicConfigTable) == 10_000
    built = inflated + 10_000 * TOPIC_BYTES
    assert built <= charges.total < built + CHARGE_STEP
    assert charges.calls == -(-built // CHARGE_STEP)  # one call per step, not per topic


def test_a_real_body_charges_less_than_its_estimate() -> None:
    """The reservation made up front (COST_PER_COMPRESSED_BYTE) covers a broker's body, so it
    never has to ask the budget for more while it decodes."""
    body = register_body_compressed(topics(20_000), VERSION)
    charges = Charges()
    decode(body, limits=BodyLimits(DEFAULT_MAX_INFLATED, charges))
    assert charges.total <= compressed_decode_estimate(body) == len(body) * COST_PER_COMPRESSED_BYTE


def test_a_refused_charge_stops_the_decode_with_its_own_error() -> None:
    body = register_body_compressed(topics(10_000), VERSION)
    with pytest.raises(RuntimeError, match="budget full"):
        decode(body, limits=BodyLimits(DEFAULT_MAX_INFLATED, Charges(refuse_after=2 * MIB)))


def test_json_decode_cost_counts_the_body_and_its_objects() -> None:
    assert json_decode_cost(b'{"a":{},"b":{"c":{}}}') == 21 + 4 * JSON_OBJECT_BYTES
    assert json_decode_cost(b"") == 0


def test_defaults_match_the_settings() -> None:
    assert Settings().registerBodyMaxInflatedBytes == DEFAULT_MAX_INFLATED
    assert Settings().registerBodyCacheBytes == DEFAULT_CACHE_BYTES


# ---- the plain-topic fast path ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "T 16 16 6 SINGLE_TAG {}",
        "T 16 16 6 MULTI_TAG",
        'T 8 4 7 SINGLE_TAG {"+message.type":"NORMAL","+queue.type":"BCQ"}',
        "T 016 16 6 SINGLE_TAG {}",
        "T 65535 0 15 SINGLE_TAG {}",
        "T 65536 1 6 SINGLE_TAG {}",
        "T 1 1 16 SINGLE_TAG {}",
        "T -1 1 6 SINGLE_TAG {}",
        "T +1 1 6 SINGLE_TAG {}",
        "T 1 1 6 SINGLE_TAG ",
        "T 1 1 6 SINGLE_TAG {oops",
        'T 1 1 6 SINGLE_TAG {"k":1}',
        'T 1 1 6 SINGLE_TAG {"k":null}',
        "T 1 1 6 SINGLE_TAG {0:1}",
        "T 1 1 6 SINGLE_TAG []",
        'T 1 1 6 SINGLE_TAG {"k":"v"} extra',
        " 1 1 6 SINGLE_TAG {}",
        "T\x01 1 1 6 SINGLE_TAG {}",
        "T 1 1 6 NO_TAG {}",
        "T 99999999999999 1 6 SINGLE_TAG {}",
        "Tópico 1 1 6 SINGLE_TAG {}",
        "T 1 1 6 SINGLE_TAG {}".replace("T", "T" * 256, 1),
    ],
)
def test_the_fast_path_agrees_with_the_general_one(text: str) -> None:
    fast = _plain_topic_config(text)
    try:
        general = _topic_config_from_text(text)
    except BodyDecodeError:
        assert fast is None
        return
    assert fast is None or fast == general


def test_the_fast_path_reads_what_brokers_write() -> None:
    assert _plain_topic_config('T 8 4 7 MULTI_TAG {"+message.type":"FIFO"}') == TopicConfig(
        "T", 8, 4, 7, "MULTI_TAG", attributes={"+message.type": "FIFO"}
    )
    assert _plain_topic_config("T 8 4 7 SINGLE_TAG") == TopicConfig("T", 8, 4, 7, "SINGLE_TAG")


# ---- 5.3.3: a zlib body sent with compressed=false --------------------------------------------


@pytest.mark.parametrize("level", range(10))
def test_a_zlib_stream_is_recognised_at_every_level(level: int) -> None:
    assert inflates(zlib.compress(b"x", level), version=479, compressed=False)


def test_json_and_old_bodies_are_not_taken_for_zlib() -> None:
    body = register_body_json(topics(2), VERSION)
    assert not inflates(body, version=479, compressed=False)
    assert not inflates(b" \r\n\t" + body, version=479, compressed=False)
    assert not inflates(b"\xef\xbb\xbf" + body, version=479, compressed=False)
    assert not inflates(b"", version=479, compressed=True)
    assert not inflates(zlib.compress(body), version=36, compressed=True)  # no compressed layout then
    assert inflates(b"anything", version=479, compressed=True)


def test_a_5_3_3_body_sent_with_compressed_false_decodes_as_compressed() -> None:
    """BrokerOuterAPI in 5.3.3 sets compressed=false on the header, then writes
    requestBody.encode(compressedRegister): Deflater.BEST_COMPRESSION, header 78 DA."""
    configs = topics(500)
    body = register_body_compressed(configs, VERSION)
    assert body[:2] == b"\x78\xda"
    as_flagged = decode_register_body(body, version=479, compressed=True, now_ms=0)
    as_sent = decode_register_body(body, version=479, compressed=False, now_ms=0)
    assert as_sent == as_flagged
    assert sorted(as_sent[0].topicConfigTable) == sorted(configs)


def test_a_body_that_only_looks_like_zlib_says_how_it_was_read() -> None:
    with pytest.raises(BodyDecodeError) as refused:
        decode(b"\x78\xda not really zlib", compressed=False)
    assert str(refused.value) == (
        "body sent with compressed=false starts with a zlib header (a 5.3.3 broker's "
        "compressedRegister), read as compressed: compressed body is not a valid zlib stream: "
        "Error -3 while decompressing data: invalid stored block lengths"
    )


def test_a_zip_bomb_sent_with_compressed_false_is_refused_as_one() -> None:
    with pytest.raises(BodyTooLarge, match=r"read as compressed: compressed body gives dataVersion a length"):
        decode(issue_bomb(), compressed=False)


def test_other_bodies_that_are_not_json_keep_their_error() -> None:
    with pytest.raises(BodyDecodeError) as refused:
        decode(b"\xff\xfe binary", compressed=False)
    assert str(refused.value) == (
        "RegisterBrokerBody: invalid JSON: not UTF-8 (invalid start byte at byte 0)"
    )
