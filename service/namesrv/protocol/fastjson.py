"""The two JSON dialects of RocketMQ's fastjson 1.2.83, as text (no I/O).

* ``DEFAULT`` is ``JSON.toJSONString(obj)``: compact, bean properties in alphabetical
  order, nulls omitted, and **non-String map keys unquoted** (``{0:"127.0.0.1:10911"}``),
  which is not valid JSON.
* ``STANDARD`` adds ``BrowserCompatible, QuoteFieldNames, MapSortField``: every key quoted,
  maps sorted by key, non-ASCII escaped as ``\\uXXXX`` with upper-case hex, ``/`` written as
  ``\\/``, and longs beyond ±2^53-1 written as strings. Only GET_ROUTEINFO_BY_TOPIC uses it
  (request version >= 4.9.4 or ``acceptStandardJsonOnly``).

Values are plain Python data: ``dict`` (keys sorted on output, which is both fastjson's bean
order and a valid order for its HashMaps), :class:`IntKeyDict` for Java maps keyed by
Integer/Long, ``list``/``tuple``, ``str``, ``int``, ``bool`` and ``None`` (omitted as a map
value, ``null`` inside a list).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

_MAX_SAFE = 9007199254740991

# String escaping of fastjson 1.2.83 (SerializeWriter.writeStringWithDoubleQuote, IOUtils
# specicalFlags_doubleQuotes/replaceChars, upper-case IOUtils.DIGITS):
# * DEFAULT escapes '"', '\\', the C0 controls, DEL..U+009F and U+2028/U+2029; \\b \\t \\n \\f \\r
#   get their short form, everything else \\uXXXX. Other non-ASCII text is written raw.
# * STANDARD (BrowserCompatible) also writes '/' as \\/ and escapes every char >= DEL as \\uXXXX
#   (UTF-16 units, so astral characters become a surrogate pair).
_DEFAULT_SPECIAL = re.compile('[\x00-\x1f"\\\\\x7f-\x9f\u2028\u2029]')
_STANDARD_SPECIAL = re.compile('[\x00-\x1f"/\\\\\x7f-\U0010ffff]')
_NON_ASCII_OR_SLASH = re.compile("[/\x7f-\U0010ffff]")
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Dialect(Enum):
    DEFAULT = "default"
    STANDARD = "standard"

    # Members are singletons compared by identity: hash them by identity too, in C, instead of
    # Enum's Python-level __hash__ (a dialect keys the encoded-route lookup of every request).
    __hash__ = object.__hash__


class IntKeyDict(dict[int, Any]):
    """A Java ``Map<Long|Integer, V>``: keys are written bare in the DEFAULT dialect."""


def _escape_char(ch: str) -> str:
    """The escape fastjson writes for ``ch`` (only called for characters that need one)."""
    short = _SHORT_ESCAPES.get(ch)
    if short is not None:
        return short
    if ch == "/":
        return "\\/"
    code = ord(ch)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def _escape_match(match: re.Match[str]) -> str:
    return _escape_char(match.group())


def quote(text: str, dialect: Dialect = Dialect.DEFAULT) -> str:
    """A JSON string literal as fastjson writes it in ``dialect``."""
    special = _STANDARD_SPECIAL if dialect is Dialect.STANDARD else _DEFAULT_SPECIAL
    if special.search(text) is None:
        return f'"{text}"'
    return f'"{special.sub(_escape_match, text)}"'


def _int(value: int, dialect: Dialect) -> str:
    if dialect is Dialect.STANDARD and not -_MAX_SAFE <= value <= _MAX_SAFE:
        return f'"{value}"'
    return str(value)


def _render_object(value: Mapping[Any, Any], dialect: Dialect, out: list[str], *, int_keys: bool) -> None:
    """Keys sorted, null values left out; an IntKeyDict's keys are bare integers in DEFAULT."""
    out.append("{")
    first = True
    for key in sorted(value):
        item = value[key]
        if item is None:
            continue
        if not first:
            out.append(",")
        first = False
        if int_keys:
            out.append(f'"{key}":' if dialect is Dialect.STANDARD else f"{key}:")
        else:
            out.append(quote(str(key), dialect))
            out.append(":")
        _render(item, dialect, out)
    out.append("}")


def _render(value: Any, dialect: Dialect, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(_int(value, dialect))
    elif isinstance(value, str):
        out.append(quote(value, dialect))
    elif isinstance(value, Mapping):
        _render_object(value, dialect, out, int_keys=isinstance(value, IntKeyDict))
    elif isinstance(value, set | frozenset):
        _render_seq(sorted(value), dialect, out)
    elif isinstance(value, list | tuple):
        _render_seq(value, dialect, out)
    elif isinstance(value, RawJson):
        out.append(value.text if dialect is Dialect.DEFAULT else ascii_escape(value.text))
    else:
        raise TypeError(f"cannot render {type(value).__name__} as fastjson")


def _render_seq(items: Iterable[Any], dialect: Dialect, out: list[str]) -> None:
    out.append("[")
    first = True
    for item in items:
        if not first:
            out.append(",")
        first = False
        _render(item, dialect, out)
    out.append("]")


class RawJson:
    """Already-rendered DEFAULT-dialect JSON that contains no int-keyed map (e.g. a stored
    QueueData); inserted verbatim, with non-ASCII and ``/`` escaped for STANDARD."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"RawJson({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJson) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def ascii_escape(text: str) -> str:
    """Turn DEFAULT-dialect JSON text into STANDARD: escape non-ASCII and ``/``. Both can only
    occur inside strings, and DEFAULT already escaped every other character STANDARD escapes."""
    return _NON_ASCII_OR_SLASH.sub(_escape_match, text)


def dumps(value: Any, dialect: Dialect = Dialect.DEFAULT) -> str:
    """Render ``value`` as fastjson would in ``dialect``."""
    out: list[str] = []
    _render(value, dialect, out)
    return "".join(out)
