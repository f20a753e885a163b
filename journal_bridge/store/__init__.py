"""The run event store: one interface, three backends chosen by URL.

    async with open_store("sqlite:///journal.db") as store:
        await store.put(thread_id=..., run_id=..., event_type=..., category=...)

URLs: `sqlite:///relative.db`, `sqlite:////absolute/path.db` (the embedded
default), `postgresql://...` or `postgres://...`, and `memory://`. A PostgreSQL
URL may end in `?layout=deerflow` to keep the journal in deer-flow's own
`run_events` table (see `journal_bridge.store.postgres_deerflow`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Generator
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from journal_bridge.events import EventRecord, InvalidEvent
from journal_bridge.settings import Settings
from journal_bridge.store.base import RunEventStore, StoreError, StoreUnavailable

__all__ = [
    "EventRecord",
    "InvalidEvent",
    "RunEventStore",
    "StoreError",
    "StoreUnavailable",
    "create_store",
    "default_store_url",
    "open_store",
    "open_store_when_available",
]


def default_store_url() -> str:
    """Env `JOURNAL_BRIDGE_STORE_URL`, else a SQLite file `journal.db` in the cwd."""
    return Settings.from_env(only=["store_url"]).journal_url


def create_store(url: str, **options: Any) -> RunEventStore:
    """The store for `url`, not yet opened. Unknown schemes raise ValueError."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "memory":
        from journal_bridge.store.memory import MemoryRunEventStore

        return MemoryRunEventStore(**options)
    if scheme == "sqlite":
        from journal_bridge.store.sqlite import (
            SqliteRunEventStore,
            sqlite_path_from_url,
        )

        return SqliteRunEventStore(
            sqlite_path_from_url(url), **{**_sqlite_url_options(url), **options}
        )
    if scheme in ("postgresql", "postgres"):
        url, layout = _take_layout(url)
        module_name, _, class_name = _POSTGRES_LAYOUTS[layout].partition(":")
        store_class = getattr(importlib.import_module(module_name), class_name)
        return store_class(url, **options)
    raise ValueError(
        f"unsupported run event store URL {url!r}: expected sqlite:///path.db,"
        " postgresql://... (or postgres://...) or memory://"
    )


# `?layout=NAME` of a PostgreSQL URL: which tables hold the journal.
_POSTGRES_LAYOUTS = {
    # journal-bridge's own tables (`journal_events`, ...)
    "journal": "journal_bridge.store.postgres:PostgresRunEventStore",
    # deer-flow's `run_events`, shared with deer-flow's Gateway
    "deerflow": "journal_bridge.store.postgres_deerflow:DeerflowPostgresRunEventStore",
}


def _take_layout(url: str) -> tuple[str, str]:
    """`url` without its `layout` option (the driver does not know it), and the layout."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    layouts = [value for name, value in query if name == "layout"]
    layout = layouts[-1] if layouts else "journal"
    if layout not in _POSTGRES_LAYOUTS:
        raise ValueError(
            f"unsupported PostgreSQL journal layout {layout!r}: expected one of"
            f" {', '.join(_POSTGRES_LAYOUTS)}"
        )
    if layouts:
        rest = urlencode([(name, value) for name, value in query if name != "layout"])
        url = urlunsplit(parts._replace(query=rest))
    return url, layout


def _sqlite_url_options(url: str) -> dict[str, Any]:
    """`?busy_timeout=SECONDS`: how long a write waits for another writer's lock."""
    query = parse_qs(urlsplit(url).query)
    options: dict[str, Any] = {}
    for name, values in query.items():
        if name != "busy_timeout":
            raise ValueError(
                f"unsupported SQLite URL option {name!r}: only busy_timeout is known"
            )
        try:
            options["busy_timeout"] = float(values[-1])
        except ValueError as exc:
            raise ValueError(
                f"busy_timeout: expected seconds, got {values[-1]!r}"
            ) from exc
    return options


class _OpeningStore:
    """`open_store(...)`: use with `async with` (closes on exit) or `await` it."""

    def __init__(self, store: RunEventStore) -> None:
        self._store = store

    async def _open(self) -> RunEventStore:
        await self._store.open()
        return self._store

    def __await__(self) -> Generator[Any, None, RunEventStore]:
        return self._open().__await__()

    async def __aenter__(self) -> RunEventStore:
        return await self._open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self._store.close()


def open_store(url: str | None = None, **options: Any) -> _OpeningStore:
    """Open the store for `url` (default: `default_store_url()`).

    `async with open_store(url) as store:` closes it on exit; `store = await
    open_store(url)` leaves closing to the caller. Backend options (e.g.
    `max_content_bytes`, Postgres `schema`) are passed through; the content
    limit not given is `JOURNAL_BRIDGE_MAX_CONTENT_BYTES`, as for the plugin.
    """
    settings = Settings.from_env(only=["store_url", "max_content_bytes"])
    return _OpeningStore(create_store(url or settings.journal_url, **{**settings.store_options, **options}))


async def open_store_when_available(
    url: str,
    *,
    on_unavailable: Callable[[StoreUnavailable], None] | None = None,
    max_delay: float = 10.0,
    **options: Any,
) -> RunEventStore:
    """Open the store for `url`, retrying with backoff for as long as it is unavailable.

    For components that must start whether or not their store is up (the plugin,
    the SDK tee): run it as a task and use the store once it returns.
    `on_unavailable` hears about every failed attempt; `options` go to the backend.
    """
    delay = 0.5
    while True:
        store = create_store(url, **options)
        try:
            await store.open()
            return store
        except StoreUnavailable as exc:
            if on_unavailable is not None:
                on_unavailable(exc)
            with contextlib.suppress(Exception):
                await store.close()
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay)
