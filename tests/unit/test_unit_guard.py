"""The quick pass stays quick: a test under tests/unit that starts a server fails, naming where it belongs."""

from __future__ import annotations

import pytest

from tests.harness.langgraph_server import LanggraphDevServer


def test_a_unit_test_that_starts_a_server_fails(tmp_path):
    with pytest.raises(AssertionError, match="belong in tests/e2e"):
        LanggraphDevServer(workdir=tmp_path).start()
