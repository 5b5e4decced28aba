"""Parse JSON as a Java peer's fastjson 1.2.83 writes it (the DEFAULT dialect), without I/O.

That dialect is standard JSON except that maps keyed by Integer/Long have **bare integer keys**:
``{"brokerAddrs":{0:"127.0.0.1:10911"}}``, ``"currIdMap":{0:0}`` (static topics in a 5.x
broker's REGISTER_BROKER body). :func:`loads` tries orjson first, which is what nearly every
body is, and only on failure quotes bare integer keys outside string literals and tries again.
Keys always come back as ``str`` (``"0"``).

Limits worth knowing (orjson's): nesting deeper than 1024 is an error, integers beyond 64 bits
come back as ``float``, ``NaN``/``Infinity`` and a UTF-8 BOM are rejected. A caller that walks
the result recursively must bound the depth itself (1024 levels is beyond Python's recursion
limit).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["JSONParseError", "java_string", "loads", "quote_bare_int_keys"]


class JSONParseError(ValueError):
    """The text is not JSON, even with fastjson's bare integer keys allowed."""


# One left-to-right pass. A bare integer key is digits right after '{' or ',' (maybe with
# whitespace) and followed by ':'. Everything else is consumed in long runs that swallow string
# literals whole, so nothing inside a string is ever rewritten and the Python callback runs about
# twice per bare key rather than once per string. Possessive quantifiers keep the scan linear on
# hostile input; the closing quote of a string is optional so an unterminated string is swallowed
# once instead of being rescanned (the text is invalid JSON either way and orjson reports it).
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?'
_BARE_KEY = r"(?<=[{,])(\s*+)(-?\d++)(?=\s*+:)"
_BARE_KEY_OR_OTHER_TEXT = re.compile(
    rf"{_BARE_KEY}|(?:[^\"{{,]++|{_STRING}|[{{,](?!\s*+-?\d++\s*+:))++",
    re.DOTALL | re.ASCII,
)


def _quote_key(match: re.Match[str]) -> str:
    digits = match.group(2)
    if digits is None:  # a run of other text: keep it as it is
        return match.group()
    return f'{match.group(1)}"{digits}"'


def quote_bare_int_keys(text: str) -> str:
    """``{0:"a",1:{2:3}}`` -> ``{"0":"a","1":{"2":3}}``; text inside strings is left alone."""
    return _BARE_KEY_OR_OTHER_TEXT.sub(_quote_key, text)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse standard JSON or fastjson's DEFAULT dialect; raise :class:`JSONParseError`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        first_error = exc
    text = _as_text(data)
    quoted = quote_bare_int_keys(text)
    if len(quoted) == len(text):  # no bare key was quoted: orjson's verdict stands
        raise JSONParseError(f"invalid JSON: {first_error}") from None
    try:
        return orjson.loads(quoted)
    except orjson.JSONDecodeError as exc:
        # Report the position in the caller's text, not in our rewritten copy.
        raise JSONParseError(f"invalid JSON: {first_error}") from exc


def _as_text(data: bytes | bytearray | memoryview | str) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONParseError(f"invalid JSON: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def java_string(value: Any) -> str:
    """The ``String`` fastjson's StringCodec makes of a parsed JSON value that is not null:
    strings as they are, integers as written, ``true``/``false``, decimals as
    ``BigDecimal.toString`` (exact for a :class:`~decimal.Decimal`, from the float's shortest
    repr otherwise), objects and arrays as compact JSON text."""
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if isinstance(value, Decimal):
        # Decimal's str() follows the same to-scientific-string rules as BigDecimal.toString;
        # only BigDecimal has no negative zero.
        return str(value.copy_abs() if value.is_zero() else value)
    if type(value) is float:
        return java_string(Decimal(repr(value)))
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:  # e.g. nested deeper than orjson renders
        raise JSONParseError(f"cannot render a {type(value).__name__} as text: {exc}") from None
