"""Shared fixtures: real `langgraph dev` servers of this project, a served agent thread, an API key to send.

The policy for suites that need a service (Postgres, Chromium) is in `suites.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# Headless Chromium for the browser suites: `chromium_path` and `page`.
from tests.harness.browser import chromium_path, page  # noqa: F401
from tests.harness.langgraph_server import LanggraphDevServer


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


@pytest.fixture(scope="session")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LanggraphDevServer]:
    """One `langgraph dev` with the plugin on its defaults, shared by every test that needs no other.

    Tests using it make threads of their own and never read another test's.
    """
    workdir = tmp_path_factory.mktemp("dev-server")
    with LanggraphDevServer(workdir=workdir) as server:
        yield server


@pytest.fixture(scope="module")
def compacted_twice(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """A real agent's thread `compacted-twice`, compacted more than once, served; and its records."""
    from tests.harness.seed import ServedApp, journal_app, seed_agent_file

    url = f"sqlite:///{tmp_path_factory.mktemp('agent') / 'journal.db'}"
    records = seed_agent_file(url, "compacted-twice")
    with ServedApp(journal_app(url)) as served:
        yield served, records


@pytest.fixture
def api_key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two API keys in the environment: LANGGRAPH_API_KEY (`from-env`, padded and quoted) is the one to send."""
    for name in ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGSMITH_API_KEY", "second-choice")
    monkeypatch.setenv("LANGGRAPH_API_KEY", ' "from-env" ')
