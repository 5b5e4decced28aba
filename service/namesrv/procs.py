"""Child processes that must not outlive the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes Linux send the child SIGTERM when its parent dies, even by
    SIGKILL or OOM kill. An embedded redis-server left running after its worker was killed would
    keep appending to the data directory a restarted worker then opens again with a second
    server. ``None`` (nothing to do) on other systems."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()

    def arm() -> None:  # runs in the child, between fork and exec
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return arm
