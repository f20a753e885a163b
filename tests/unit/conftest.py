"""tests/unit starts no server: what needs a real one belongs in tests/e2e."""

from __future__ import annotations

import pytest

from tests.harness.server_process import ServerProcess


@pytest.fixture(autouse=True)
def _no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"a unit test started {self.name}: tests that start servers belong in tests/e2e")

    monkeypatch.setattr(ServerProcess, "_launch", refuse)
