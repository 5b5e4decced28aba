"""The report's words: instants, durations, Markdown tables and the headline sentences. No Spark
session, no plotting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from namesrv.store.changelog import EventKind as K

if TYPE_CHECKING:
    from pyspark.sql import Row

CAUSE_WORDS = {
    "no_route": "had no route",
    "no_live_master": "had no live master",
    "no_writable_queue": "had no writable queue",
}
# What the event that started an interval did, in words ("broker pc-b expired").
TRIGGER_WORDS: Mapping[str, str] = {
    K.EXPIRE: "expired",
    K.UNREGISTER: "unregistered",
    K.CLOSE: "lost its connection",
    K.CLEAN_QUEUES: "had its queues cleaned",
    K.REGISTER_QUEUES: "stopped serving it",
    K.WIPE_PERM: "had its write permission wiped",
    K.TOPIC_REGISTER: "was registered without write permission",
}


def ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def ts_ms(ms: int | None) -> str:
    """An instant to the millisecond (--as-of instants are chosen to the millisecond)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    s = ms / 1000
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if not rows:
        return "_none_\n"
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    cells = [["-" if c is None else str(c).replace("|", "\\|") for c in r] for r in rows]
    out += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(out) + "\n"


def headline(g: Row) -> str:
    """One group of unwritable intervals in words: "2 topics had no route for 38.0 s (broker
    pc-b expired), still at the end of the log"."""
    n = int(g["topics"])
    text = (
        f"{n} topic{'s' if n != 1 else ''} {CAUSE_WORDS.get(g['cause'], g['cause'])} for {duration(g['ms'])}"
    )
    if g["broker"] and g["kind"] in TRIGGER_WORDS:
        text += f" (broker {g['broker']} {TRIGGER_WORDS[g['kind']]})"
    if g["open_at_end"]:
        text += ", still at the end of the log"
    return text
