"""Fixtures of the spec-derived registry suite: services with custom NamesrvConfig flags."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from namesrv.config import Settings
from namesrv.registry.service import RegistryService
from namesrv.store.registry_store import RegistryStore

MakeService = Callable[..., RegistryService]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The root settings with the background sweeper slowed to once a minute: these tests call
    ``service.sweep()`` themselves, and a sweep running while the app shuts down can swallow the
    task's cancellation (redis-py 8.1 asyncio; reported), which hangs ``client.close()``."""
    return dataclasses.replace(settings, scanNotActiveBrokerInterval=60000)


@pytest.fixture
def make_service(store: RegistryStore, settings: Settings) -> MakeService:
    """``make_service(supportActingMaster=True)``: a service over the test's namespace whose
    Settings differ by the given flags (same Redis data as the ``service`` fixture)."""

    def make(**flags: Any) -> RegistryService:
        custom = dataclasses.replace(settings, **flags)
        return RegistryService(store, lambda: custom)

    return make
