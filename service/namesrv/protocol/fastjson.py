"""The two JSON dialects of RocketMQ's fastjson 1.2.83, as text (no I/O).

* ``DEFAULT`` is ``JSON.toJSONString(obj)``: compact, bean properties in alphabetical
  order, nulls omitted, and **non-String map keys unquoted** (``{0:"127.0.0.1:10911"}``),
  which is not valid JSON.
* ``STANDARD`` adds ``BrowserCompatible, QuoteFieldNames, MapSortField``: every key quoted,
  maps sorted by key, non-ASCII escaped as ``\\uXXXX`` with upper-case hex, and longs beyond
  ±2^53-1 written as strings. Only GET_ROUTEINFO_BY_TOPIC uses it (request version >= 4.9.4 or
  ``acceptStandardJsonOnly``).

Values are plain Python data: ``dict`` (keys sorted on output, which is both fastjson's bean
order and a valid order for its HashMaps), :class:`IntKeyDict` for Java maps keyed by
Integer/Long, ``list``/``tuple``, ``str``, ``int``, ``bool`` and ``None`` (omitted as a map
value, ``null`` inside a list).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

_MAX_SAFE = 9007199254740991
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Dialect(Enum):
    DEFAULT = "default"
    STANDARD = "standard"


class IntKeyDict(dict[int, Any]):
    """A Java ``Map<Long|Integer, V>``: keys are written bare in the DEFAULT dialect."""


def _escape_char(ch: str, ascii_only: bool) -> str:
    short = _SHORT_ESCAPES.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x20 or code == 0x7F:
        return f"\\u{code:04X}"
    if ascii_only and code > 0x7F:
        if code > 0xFFFF:
            code -= 0x10000
            return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
        return f"\\u{code:04X}"
    return ch


def quote(text: str, dialect: Dialect = Dialect.DEFAULT) -> str:
    """A JSON string literal as fastjson writes it in ``dialect``."""
    ascii_only = dialect is Dialect.STANDARD
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + "".join(_escape_char(ch, ascii_only) for ch in text) + '"'


def _int(value: int, dialect: Dialect) -> str:
    if dialect is Dialect.STANDARD and not -_MAX_SAFE <= value <= _MAX_SAFE:
        return f'"{value}"'
    return str(value)


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
    elif isinstance(value, IntKeyDict):
        out.append("{")
        first = True
        for key in sorted(value):
            item = value[key]
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(f'"{key}":' if dialect is Dialect.STANDARD else f"{key}:")
            _render(item, dialect, out)
        out.append("}")
    elif isinstance(value, Mapping):
        out.append("{")
        first = True
        for key in sorted(value):
            item = value[key]
            if item is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(quote(str(key), dialect))
            out.append(":")
            _render(item, dialect, out)
        out.append("}")
    elif isinstance(value, set | frozenset):
        _render_seq(sorted(value), dialect, out)
    elif isinstance(value, list | tuple):
        _render_seq(value, dialect, out)
    elif isinstance(value, RawJson):
        out.append(
            value.text if dialect is Dialect.DEFAULT or value.text.isascii() else ascii_escape(value.text)
        )
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
    QueueData); inserted verbatim, with non-ASCII escaped for STANDARD."""

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
    """Escape non-ASCII characters of rendered JSON as STANDARD does (inside strings only,
    which is everywhere non-ASCII can occur in JSON)."""
    return "".join(ch if ord(ch) < 0x80 else _escape_char(ch, True) for ch in text)


def dumps(value: Any, dialect: Dialect = Dialect.DEFAULT) -> str:
    """Render ``value`` as fastjson would in ``dialect``."""
    out: list[str] = []
    _render(value, dialect, out)
    return "".join(out)
