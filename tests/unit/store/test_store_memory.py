"""The conformance suite against the in-process store."""

from __future__ import annotations

import pytest

from journal_bridge.store.conformance import RunEventStoreConformance


class TestMemoryRunEventStore(RunEventStoreConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
