"""The registry's change log outside Redis: ``namesrv events export`` (see :mod:`.export`)."""

from __future__ import annotations
