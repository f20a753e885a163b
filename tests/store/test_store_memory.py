"""The conformance suite against the in-process store."""

from __future__ import annotations

import pytest
from store_conformance import RunEventStoreConformance


class TestMemoryRunEventStore(RunEventStoreConformance):
    @pytest.fixture
    def store_url(self) -> str:
        return "memory://"
