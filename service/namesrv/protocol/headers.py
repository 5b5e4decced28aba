"""Typed, lenient access to a request's ``extFields``, as Java's custom-header decoding does it.

``RemotingCommand.decodeCommandCustomHeader`` never rejects a request for its header: a missing
field stays ``null`` and a value that does not parse keeps the field's default (the error is only
logged). The getters here mirror that: they return ``None`` for "absent or unparsable" (or the
``default`` you pass), never raise, and parse exactly like ``Integer.parseInt``,
``Long.parseLong`` and ``Boolean.parseBoolean``. :func:`ext_fields` goes the other way, rendering
values as ``String.valueOf`` does for a reply's custom header.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import overload

__all__ = [
    "ext_fields",
    "get_bool",
    "get_int",
    "get_long",
    "get_str",
    "parse_java_int",
]

ExtFields = Mapping[str, str] | None

# Java's parseInt/parseLong take an optional sign and decimal digits, where a digit is anything
# Character.digit(ch, 10) accepts: the Unicode Nd category, which is what Python's \d matches.
# No whitespace and no '_', both of which int() would accept.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")


def parse_java_int(text: str, bits: int = 32) -> int | None:
    """``Integer.parseInt`` (``bits=32``) or ``Long.parseLong`` (``bits=64``); ``None`` where
    Java throws ``NumberFormatException``."""
    if _JAVA_INTEGER.fullmatch(text) is None:
        return None
    sign = text[0] if text[0] in "+-" else ""
    # Java accepts any number of leading zeros, so drop them before judging the length.
    digits = text[len(sign) :].lstrip("0") or "0"
    if len(digits) > 19 and digits.isascii():  # more digits than any 64-bit value
        return None
    try:
        value = int(sign + digits)
    except ValueError:  # int()'s 4300-digit guard: only reachable with non-ASCII zero padding
        return None
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None


def get_str(ext: ExtFields, name: str) -> str | None:
    return None if ext is None else ext.get(name)


@overload
def get_int(ext: ExtFields, name: str) -> int | None: ...
@overload
def get_int(ext: ExtFields, name: str, default: int) -> int: ...
def get_int(ext: ExtFields, name: str, default: int | None = None) -> int | None:
    """An ``Integer`` header field: ``default`` when absent or not a 32-bit decimal integer."""
    text = get_str(ext, name)
    value = None if text is None else parse_java_int(text, 32)
    return default if value is None else value


@overload
def get_long(ext: ExtFields, name: str) -> int | None: ...
@overload
def get_long(ext: ExtFields, name: str, default: int) -> int: ...
def get_long(ext: ExtFields, name: str, default: int | None = None) -> int | None:
    """A ``Long`` header field (e.g. ``brokerId``): ``default`` when absent or unparsable."""
    text = get_str(ext, name)
    value = None if text is None else parse_java_int(text, 64)
    return default if value is None else value


@overload
def get_bool(ext: ExtFields, name: str) -> bool | None: ...
@overload
def get_bool(ext: ExtFields, name: str, default: bool) -> bool: ...
def get_bool(ext: ExtFields, name: str, default: bool | None = None) -> bool | None:
    """A ``Boolean`` header field. ``Boolean.parseBoolean`` never fails: ``"true"`` in any case
    is ``True`` and every other present value (``"1"``, ``"yes"``, ``""``) is ``False``."""
    text = get_str(ext, name)
    if text is None:
        return default
    return text.lower() == "true"


def ext_fields(values: Mapping[str, str | int | bool | None]) -> dict[str, str]:
    """A custom header as ``makeCustomHeaderToNet`` puts it on the wire: ``None`` fields left
    out, booleans as ``"true"``/``"false"``, integers in decimal."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, int | str):
            out[name] = str(value)
        else:
            raise TypeError(f"header field {name!r}: cannot render {type(value).__name__} like Java")
    return out
