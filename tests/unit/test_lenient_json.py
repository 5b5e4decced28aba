"""Parsing fastjson's DEFAULT dialect: bare integer keys, and nothing else bent."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from namesrv.protocol.fastjson import IntKeyDict, dumps
from namesrv.protocol.lenient_json import JSONParseError, java_string, loads, quote_bare_int_keys


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{0:"127.0.0.1:10911",1:"x"}', {"0": "127.0.0.1:10911", "1": "x"}),
        ('{"currIdMap":{0:0}}', {"currIdMap": {"0": 0}}),
        ("{-1:2,7:{8:[9,{10:11}]}}", {"-1": 2, "7": {"8": [9, {"10": 11}]}}),
        ('{ 0 : "a" ,\n 1\t:"b"}', {"0": "a", "1": "b"}),
        ("[1,2,{3:4}]", [1, 2, {"3": 4}]),
    ],
)
def test_bare_integer_keys(text: str, value: Any) -> None:
    assert loads(text) == value
    assert loads(text.encode()) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"s":"{0:1}"}', {"s": "{0:1}"}),
        ('{"s":"a,0:b",1:"c"}', {"s": "a,0:b", "1": "c"}),
        (
            '{"s":"back\\\\",0:"after an escaped backslash"}',
            {"s": "back\\", "0": "after an escaped backslash"},
        ),
        ('{"s":"quote\\",0:still inside"}', {"s": 'quote",0:still inside'}),
        ('{"s":"\\u0022,0:"}', {"s": '",0:'}),
    ],
)
def test_string_contents_are_never_rewritten(text: str, value: Any) -> None:
    assert loads(text) == value


def test_standard_json_takes_the_fast_path_untouched() -> None:
    text = b'{"a":[1,2.5,"x",null,true],"b":{"c":{}}}'
    assert loads(text) == orjson.loads(text)
    assert loads(memoryview(text)) == orjson.loads(text)
    assert loads(bytearray(text)) == orjson.loads(text)


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=5), inner, max_size=4)
            | st.dictionaries(st.integers(-1000, 1000), inner, max_size=4).map(IntKeyDict)
        ),
        max_leaves=20,
    )
)
def test_everything_fastjson_default_writes_parses_back(value: Any) -> None:
    def expected(v: Any) -> Any:  # null map values are omitted, int keys come back as strings
        if isinstance(v, dict):
            return {str(k): expected(x) for k, x in sorted(v.items()) if x is not None}
        if isinstance(v, list):
            return [expected(x) for x in v]
        return v

    assert loads(dumps(value)) == expected(value)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "{0:",
        "{a:1}",  # only integer keys may be bare
        "{'a':1}",
        '{"a":1,}',
        '{"a":NaN}',
        '"unterminated',
        '{"a":"\\',
        "[" * 5000,
        "{0:" * 5000,
        "1 2",
    ],
    ids=repr,
)
def test_garbage_is_a_json_parse_error(text: str) -> None:
    with pytest.raises(JSONParseError, match="invalid JSON"):
        loads(text)
    assert issubclass(JSONParseError, ValueError)


def test_invalid_utf8_is_a_json_parse_error() -> None:
    with pytest.raises(JSONParseError, match="UTF-8"):
        loads(b'{0:"\xff"}')


@pytest.mark.timeout(60)  # a hang guard: quadratic on these inputs would take hours, not a speed check
def test_hostile_inputs_stay_linear() -> None:
    for text in ('"\\"' * 500_000, '{0:1,"' + "a" * 1_000_000, '{"a":"' + '\\"' * 500_000 + ",0:1}"):
        with pytest.raises(JSONParseError):
            loads(text)


def test_quote_bare_int_keys_alone() -> None:
    assert quote_bare_int_keys('{0:"a",1:{2:3}}') == '{"0":"a","1":{"2":3}}'
    assert quote_bare_int_keys('{"x":[0,1],"y":"{0:1}"}') == '{"x":[0,1],"y":"{0:1}"}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("s", "s"),
        (True, "true"),
        (False, "false"),
        (-5, "-5"),
        (Decimal("1.50"), "1.50"),
        (Decimal("1E+3"), "1E+3"),
        (Decimal("-0.0"), "0.0"),
        (2.5, "2.5"),
        (1e-7, "1E-7"),
        ({"a": [1, None]}, '{"a":[1,null]}'),
    ],
)
def test_java_string(value: Any, text: str) -> None:
    assert java_string(value) == text


def test_java_string_of_an_absurdly_deep_value_is_a_parse_error() -> None:
    deep: list[Any] = []
    for _ in range(400):
        deep = [deep]
    with pytest.raises(JSONParseError):
        java_string(deep)
