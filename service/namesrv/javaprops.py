"""Java ``.properties`` text: parse and format like ``java.util.Properties``.

Operators migrating from the Java NameServer hand us their ``namesrv.properties``
(``namesrv -c``), and ``mqadmin updateNamesrvConfig`` sends properties text in the
UPDATE_NAMESRV_CONFIG body. Both follow ``Properties.load`` rules: ``=``, ``:`` or
whitespace separate key and value, ``#``/``!`` start comments, a trailing odd
backslash continues the line, and ``\\uXXXX`` escapes are decoded.
"""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=: \t\f"
_WHITESPACE = " \t\f"


class PropertiesError(ValueError):
    """The text is not valid properties syntax (a malformed ``\\u`` escape)."""


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines; drop blank and comment lines."""
    out: list[str] = []
    pending: str | None = None
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.lstrip(_WHITESPACE)
        if pending is None:
            if not line or line[0] in "#!":
                continue
            current = line
        else:
            current = pending + line
        trailing = len(current) - len(current.rstrip("\\"))
        if trailing % 2 == 1:
            pending = current[:-1]
            continue
        pending = None
        out.append(current)
    if pending is not None:
        out.append(pending)
    return out


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i >= len(text):
            break
        nxt = text[i]
        if nxt == "u":
            digits = text[i + 1 : i + 5]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"Malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 1
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    i = 0
    escaped = False
    while i < len(line):
        ch = line[i]
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in _SEPARATORS:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text; later keys win, as with ``Properties.load``."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        result[_unescape(key)] = _unescape(value)
    return result


def format_properties(values: dict[str, str]) -> str:
    """Render ``key=value`` lines sorted by key, as GET_NAMESRV_CONFIG does."""
    return "".join(f"{key}={values[key]}\n" for key in sorted(values))
