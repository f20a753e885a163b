"""A backend from outside the package: registered by URL scheme, proved by the conformance suite."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from journal_bridge.store import create_store, open_store, register_backend, supports
from journal_bridge.store.conformance import RunEventStoreConformance
from journal_bridge.store.memory import MemoryRunEventStore


class OutsideStore(MemoryRunEventStore):
    """Stands for a third party's backend: it takes its options from its own URL."""

    def __init__(self, url: str, **options: Any) -> None:
        super().__init__(**options)
        self.url = url


def outside_store(url: str, **options: Any) -> OutsideStore:
    return OutsideStore(url, **options)


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_backend("outside", outside_store)


class TestARegisteredBackendRunsTheConformanceSuite(RunEventStoreConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "outside://anywhere"


async def test_open_store_builds_a_registered_scheme_with_the_options():
    async with open_store("OUTSIDE://db", max_content_bytes=12) as store:
        assert type(store) is OutsideStore and store.url == "OUTSIDE://db"
        assert store.max_content_bytes == 12


def test_a_registration_names_a_factory_by_module_and_function():
    register_backend("outside-lazy", f"{__name__}:outside_store")
    assert type(create_store("outside-lazy://x")) is OutsideStore


def test_an_installed_package_registers_its_scheme_by_entry_point(monkeypatch):
    import importlib.metadata

    def entry_points(*, group: str, name: str) -> list[Any]:
        assert group == "journal_bridge.stores"
        return [SimpleNamespace(value=f"{__name__}:outside_store")] if name == "plugged" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert type(create_store("plugged://x")) is OutsideStore
    with pytest.raises(ValueError, match="unsupported run event store URL"):
        create_store("unplugged://x")


def test_optional_capabilities_are_named():
    store = create_store("memory://")
    assert supports(store, "search_threads")
    with pytest.raises(ValueError, match="unknown store capability"):
        supports(store, "time_travel")
