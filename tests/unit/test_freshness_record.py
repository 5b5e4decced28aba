"""The freshness probe's shared record: what one process writes, the other reads whole or not at all."""

from __future__ import annotations

import zlib

from namesrv.registry.freshness_probe import FIELD_BYTES, RECORD_SIZE, ProbeReading, decode, encode


def test_a_record_reads_back_as_written() -> None:
    reading = ProbeReading(12345.678901, "9f2c" * 8, "1764220000000-17", 7)
    record = encode(reading)
    assert record is not None and len(record) == RECORD_SIZE
    assert decode(record) == reading


def test_an_empty_record_is_no_reading() -> None:
    assert decode(bytes(RECORD_SIZE)) is None


def test_a_torn_record_is_no_reading() -> None:
    old = encode(ProbeReading(10.0, "a" * 32, "1-1"))
    new = encode(ProbeReading(11.0, "a" * 32, "2-1"))
    assert old is not None and new is not None
    half = RECORD_SIZE // 2
    assert decode(new[:half] + old[half:]) is None  # a write the reader caught halfway
    assert decode(old[:half] + new[half:]) is None


def test_a_record_of_the_wrong_size_is_no_reading() -> None:
    record = encode(ProbeReading(10.0, "a", "0-0"))
    assert record is not None
    assert decode(record[:-1]) is None
    assert decode(record + b"\0") is None


def test_fields_that_do_not_fit_are_not_written() -> None:
    assert encode(ProbeReading(10.0, "a" * (FIELD_BYTES + 1), "1-1")) is None
    assert encode(ProbeReading(10.0, "a", "1" * (FIELD_BYTES + 1))) is None
    assert encode(ProbeReading(10.0, "", "1-1")) is None
    assert encode(ProbeReading(10.0, "a", "")) is None


def test_the_crc_covers_the_time() -> None:
    record = bytearray(encode(ProbeReading(10.0, "a", "1-1")) or b"")
    record[0] ^= 1
    assert decode(bytes(record)) is None
    assert zlib.crc32(bytes(record[:-4])) != int.from_bytes(record[-4:], "little")
