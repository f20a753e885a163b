"""Shared test policy and fixtures.

Optional suites (Postgres, browser) skip with a reason on a developer machine
that lacks the service, and fail instead when JOURNAL_BRIDGE_REQUIRE_ALL=1 (CI),
so a missing service can never pass silently there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph_server import LanggraphDevServer  # noqa: E402

REQUIRE_ALL = os.environ.get("JOURNAL_BRIDGE_REQUIRE_ALL") == "1"


def require_or_skip(reason: str) -> None:
    """Skip with `reason` locally; fail with it when every suite is required."""
    if REQUIRE_ALL:
        pytest.fail(f"required suite cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture
def start_dev_server(tmp_path: Path) -> Iterator:
    """Factory: start a real `langgraph dev` of this project; all are stopped at teardown."""
    servers: list[LanggraphDevServer] = []

    def start(**kwargs) -> LanggraphDevServer:
        kwargs.setdefault("workdir", tmp_path / f"server-{len(servers)}")
        kwargs["workdir"].mkdir(parents=True, exist_ok=True)
        server = LanggraphDevServer(**kwargs)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LanggraphDevServer]:
    """One `langgraph dev` with the plugin, shared by the tests of a module."""
    workdir = tmp_path_factory.mktemp("dev-server")
    with LanggraphDevServer(workdir=workdir) as server:
        yield server
