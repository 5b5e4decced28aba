"""A garbage collector that pauses rarely, for load generators and test harnesses."""

from __future__ import annotations

import gc

# The workers' own setting (namesrv.runner.GC_THRESHOLDS): a load generator or a ceiling server
# with Python's defaults pauses for its own full collections, and those pauses would be charged
# to the server under test as latency.
GC_THRESHOLDS = (10_000, 10, 100)


def quiet_gc() -> None:
    """Collect, freeze what lives now, and collect rarely from here on."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
