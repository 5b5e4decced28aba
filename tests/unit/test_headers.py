"""Custom-header getters: Java's lenient decodeCommandCustomHeader, value by value."""

from __future__ import annotations

import pytest

from namesrv.protocol.headers import ext_fields, get_bool, get_int, get_long, get_str, parse_java_int


def test_appendix_a_lenient_register_broker_header() -> None:
    # extFields {brokerName:"b", brokerId:"notanumber", compressed:"TRUE"} decoded as
    # RegisterBrokerRequestHeader -> brokerName=b brokerAddr=null brokerId=null compressed=true
    # bodyCrc32=0 enableActingMaster=null, without an exception.
    ext = {"brokerName": "b", "brokerId": "notanumber", "compressed": "TRUE"}
    assert get_str(ext, "brokerName") == "b"
    assert get_str(ext, "brokerAddr") is None
    assert get_long(ext, "brokerId") is None
    assert get_bool(ext, "compressed", False) is True
    assert get_int(ext, "bodyCrc32", 0) == 0
    assert get_bool(ext, "enableActingMaster") is None


def test_no_ext_fields_at_all() -> None:
    assert get_str(None, "topic") is None
    assert get_int(None, "x") is None
    assert get_int(None, "x", 7) == 7
    assert get_long(None, "x", 0) == 0
    assert get_bool(None, "x") is None
    assert get_bool(None, "x", True) is True


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("-254075693", -254075693),
        ("+5", 5),
        ("0007", 7),
        ("2147483647", 2147483647),
        ("-2147483648", -2147483648),
        ("2147483648", None),
        ("-2147483649", None),
        ("٣", 3),  # Character.digit accepts any Unicode decimal digit
        ("0" * 5000 + "1", 1),
        ("", None),
        ("-", None),
        (" 5", None),
        ("5 ", None),
        ("1_000", None),
        ("1.0", None),
        ("0x10", None),
        ("9" * 5000, None),
        ("٠" * 5000, None),  # int()'s digit limit, reached only through non-ASCII zero padding
    ],
)
def test_parse_int_like_java(text: str, value: int | None) -> None:
    assert parse_java_int(text) == value


def test_parse_long_range() -> None:
    assert parse_java_int("9223372036854775807", 64) == 2**63 - 1
    assert parse_java_int("-9223372036854775808", 64) == -(2**63)
    assert parse_java_int("9223372036854775808", 64) is None
    assert parse_java_int("99999999999999999999", 64) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("tRuE", True),
        ("false", False),
        ("1", False),
        ("yes", False),
        ("", False),
    ],
)
def test_get_bool_is_parse_boolean(text: str, value: bool) -> None:
    assert get_bool({"b": text}, "b") is value


def test_get_int_keeps_the_default_on_garbage() -> None:
    assert get_int({"n": "abc"}, "n") is None
    assert get_int({"n": "abc"}, "n", 0) == 0
    assert get_int({"n": "12"}, "n", 0) == 12
    assert get_long({"id": "3000000000"}, "id") == 3000000000
    assert get_int({"id": "3000000000"}, "id") is None


def test_ext_fields_renders_like_string_value_of() -> None:
    fields = ext_fields({"changed": False, "wipeTopicCount": 5, "masterAddr": "a:1", "haServerAddr": None})
    assert fields == {"changed": "false", "wipeTopicCount": "5", "masterAddr": "a:1"}
    with pytest.raises(TypeError):
        ext_fields({"x": 1.5})  # type: ignore[dict-item]
