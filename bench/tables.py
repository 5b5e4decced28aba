"""Plain-text tables and number formats shared by the bench's reports."""

from __future__ import annotations

import math
from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int] | None = None) -> list[str]:
    right = right or set()
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def num(value: float | None, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def mib(n: float) -> str:
    return f"{n / 1048576:.1f} MiB"
