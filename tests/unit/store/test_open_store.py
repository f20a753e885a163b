"""Choosing a backend by URL."""

from __future__ import annotations

import pytest

import journal_bridge
from journal_bridge.model.envelope import DEFAULT_MAX_CONTENT_BYTES
from journal_bridge.settings import default_store_url
from journal_bridge.store import (
    RunEventStore,
    open_store,
)
from journal_bridge.store.memory import MemoryRunEventStore
from journal_bridge.store.sqlite import SqliteRunEventStore, sqlite_path_from_url


async def test_memory_url_opens_a_memory_store():
    async with open_store("memory://") as store:
        assert isinstance(store, MemoryRunEventStore)
        assert isinstance(store, RunEventStore)


async def test_open_store_can_be_awaited_and_closed_by_the_caller(tmp_path):
    store = await open_store(f"sqlite:///{tmp_path / 'events.db'}")
    try:
        assert isinstance(store, SqliteRunEventStore)
        await store.ping()
    finally:
        await store.close()


@pytest.mark.parametrize(
    "url", ["mysql://localhost/db", "journal.db", "sqlite://", "sqlite:///:memory:"]
)
def test_unusable_urls_are_a_clear_value_error(url):
    with pytest.raises(ValueError, match="URL|memory"):
        open_store(url)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///relative.db", "relative.db"),
        ("sqlite:///data/events.db", "data/events.db"),
        ("sqlite:////abs/path/events.db", "/abs/path/events.db"),
    ],
)
def test_sqlite_url_paths(url, path):
    assert sqlite_path_from_url(url) == path


def test_default_url_is_a_journal_file_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("JOURNAL_BRIDGE_STORE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_store_url() == f"sqlite:///{tmp_path / 'journal.db'}"
    assert sqlite_path_from_url(default_store_url()) == str(tmp_path / "journal.db")


def test_default_url_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("JOURNAL_BRIDGE_STORE_URL", "memory://")
    assert default_store_url() == "memory://"


async def test_the_packages_open_store_without_url_uses_the_default(tmp_path, monkeypatch):
    monkeypatch.delenv("JOURNAL_BRIDGE_STORE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    async with journal_bridge.open_store() as store:
        await store.ping()
    assert (tmp_path / "journal.db").exists()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_the_packages_open_store_takes_the_content_limit_from_the_environment(backend, tmp_path, monkeypatch):
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'events.db'}"
    monkeypatch.setenv("JOURNAL_BRIDGE_STORE_URL", url)
    monkeypatch.setenv("JOURNAL_BRIDGE_MAX_CONTENT_BYTES", "64")
    async with journal_bridge.open_store() as store:
        stored = await store.put(thread_id="t", run_id="r", event_type="run.end", category="outputs", content="z" * 500)
    assert stored.content == "z" * 62 and stored.metadata["original_size"] == 502
    async with journal_bridge.open_store(url, max_content_bytes=20) as store:
        assert store.max_content_bytes == 20


async def test_the_store_packages_open_store_reads_no_variable(monkeypatch):
    monkeypatch.setenv("JOURNAL_BRIDGE_MAX_CONTENT_BYTES", "12")
    async with open_store("memory://") as store:
        assert store.max_content_bytes == DEFAULT_MAX_CONTENT_BYTES


async def test_store_options_reach_the_backend():
    async with open_store("memory://", max_content_bytes=12) as store:
        stored = await store.put(
            thread_id="t",
            run_id="r",
            event_type="run.end",
            category="outputs",
            content="x" * 50,
        )
    assert stored.content == "x" * 10 and stored.metadata["truncated"] is True


async def test_sqlite_url_takes_a_busy_timeout(tmp_path):
    store = await open_store(f"sqlite:///{tmp_path / 'events.db'}?busy_timeout=0.25")
    try:
        assert store.busy_timeout == 0.25
        assert store.path == str(tmp_path / "events.db")
    finally:
        await store.close()


@pytest.mark.parametrize("query", ["timeout=3", "busy_timeout=soon"])
def test_unknown_or_malformed_sqlite_url_options_are_a_value_error(query):
    with pytest.raises(ValueError, match="timeout"):
        open_store(f"sqlite:///events.db?{query}")


def test_a_postgres_url_chooses_its_table_layout():
    from journal_bridge.store import create_store
    from journal_bridge.store.postgres import PostgresRunEventStore
    from journal_bridge.store.postgres_deerflow import DeerflowPostgresRunEventStore

    plain = create_store("postgresql://u@db:5432/app?sslmode=disable")
    assert type(plain) is PostgresRunEventStore
    assert plain.url == "postgresql://u@db:5432/app?sslmode=disable"
    shared = create_store("postgresql://u@db:5432/app?layout=deerflow&sslmode=disable")
    assert type(shared) is DeerflowPostgresRunEventStore
    assert shared.url == "postgresql://u@db:5432/app?sslmode=disable"  # the driver never sees it
    assert type(create_store("postgres://db/app?layout=journal")) is PostgresRunEventStore
    with pytest.raises(ValueError, match="layout 'mysql'"):
        create_store("postgresql://db/app?layout=mysql")
