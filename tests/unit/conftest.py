"""tests/unit starts no server: what needs a real one belongs in tests/e2e."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import _sqlite3
import pytest

from tests.harness.server_process import ServerProcess


@pytest.fixture(autouse=True)
def _no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"a unit test started {self.name}: tests that start servers belong in tests/e2e")

    monkeypatch.setattr(ServerProcess, "_launch", refuse)


@pytest.fixture
def sqlite_heap() -> Callable[[], int]:
    """Bytes the SQLite library of this interpreter holds (`sqlite3_memory_used`),
    looked up through the driver module, whether it links the library or embeds it."""
    library = ctypes.CDLL(_sqlite3.__file__)
    library.sqlite3_memory_used.restype = ctypes.c_int64
    return library.sqlite3_memory_used
