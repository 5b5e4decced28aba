from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, not in pyproject.toml, so the fault suite stays in its own directory.
    config.addinivalue_line("markers", "faults: the fault suite (real Redis, workers, proxy); short form")
