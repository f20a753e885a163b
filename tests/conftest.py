"""Shared fixtures: real `langgraph dev` servers of this project.

The policy for suites that need a service (Postgres, Chromium) is in `suites.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph_server import LanggraphDevServer  # noqa: E402


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
