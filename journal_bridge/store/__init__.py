"""The run event store: one interface, backends chosen by URL scheme.

    async with open_store("sqlite:///journal.db") as store:
        await store.put(thread_id=..., run_id=..., event_type=..., category=...)

URLs: `sqlite:///relative.db`, `sqlite:////absolute/path.db` (the embedded
default), `postgresql://...` or `postgres://...`, and `memory://`. A SQLite or
PostgreSQL URL may end in `?layout=deerflow` to keep the journal in deer-flow's
own `run_events` table (see `journal_bridge.store.deerflow`).

The contract is `journal_bridge.store.base.RunEventStore`: its abstract methods
are the core every backend implements, the rest optional capabilities
(`supports(store, name)`). Another backend registers its scheme with
`register_backend` and proves itself with `journal_bridge.store.conformance`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Callable, Generator

from journal_bridge.model.envelope import EventRecord
from journal_bridge.model.errors import InvalidEvent, InvalidStoreUrl
from journal_bridge.store.base import (
    RunEventStore,
    StoreError,
    StoreUnavailable,
    supports,
)

__all__ = [
    "EventRecord",
    "InvalidEvent",
    "InvalidStoreUrl",
    "OpeningStore",
    "RunEventStore",
    "StoreError",
    "StoreFactory",
    "StoreUnavailable",
    "create_store",
    "open_store",
    "open_store_when_available",
    "register_backend",
    "supports",
]


# (url, **options) -> a store not yet opened.
StoreFactory = Callable[..., RunEventStore]

# scheme -> factory, or "module:function" imported on first use so that a
# backend's driver (psycopg) is needed only by those who use it.
_BACKENDS: dict[str, StoreFactory | str] = {
    "memory": "journal_bridge.store.memory:from_url",
    "sqlite": "journal_bridge.store.sqlite:from_url",
    "postgresql": "journal_bridge.store.postgres:from_url",
    "postgres": "journal_bridge.store.postgres:from_url",
}
# Where installed packages name their backends: `scheme = "module:function"`.
ENTRY_POINT_GROUP = "journal_bridge.stores"


def register_backend(scheme: str, factory: StoreFactory | str) -> None:
    """Make `create_store` (and so `open_store`, the plugin, the CLI) build `scheme:` URLs.

    `factory(url, **options)` returns a `RunEventStore` not yet opened; a
    "module:function" string is imported on first use. A backend registered for
    a scheme replaces the one before. Installed packages can also declare the
    entry point `scheme = "module:function"` in the group `journal_bridge.stores`.
    """
    _BACKENDS[scheme.lower()] = factory


def _factory(scheme: str) -> StoreFactory | None:
    factory = _BACKENDS.get(scheme)
    if factory is None:
        from importlib.metadata import entry_points

        found = entry_points(group=ENTRY_POINT_GROUP, name=scheme)
        factory = next((point.value for point in found), None)
        if factory is None:
            return None
        _BACKENDS[scheme] = factory
    if isinstance(factory, str):
        module_name, _, name = factory.partition(":")
        factory = getattr(importlib.import_module(module_name), name)
        _BACKENDS[scheme] = factory
    return factory


def create_store(url: str, **options: object) -> RunEventStore:
    """The store for `url`, not yet opened. Unknown schemes raise `InvalidStoreUrl` (a ValueError)."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    factory = _factory(scheme) if scheme else None
    if factory is None:
        raise InvalidStoreUrl(
            f"unsupported run event store URL {url!r}: expected sqlite:///path.db,"
            " postgresql://... (or postgres://...), memory:// or a registered scheme"
        )
    return factory(url, **options)


class OpeningStore:
    """`open_store(...)`: use with `async with` (closes on exit) or `await` it."""

    def __init__(self, store: RunEventStore) -> None:
        self._store = store

    async def _open(self) -> RunEventStore:
        await self._store.open()
        return self._store

    def __await__(self) -> Generator[object, None, RunEventStore]:
        return self._open().__await__()

    async def __aenter__(self) -> RunEventStore:
        return await self._open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self._store.close()


def open_store(url: str, **options: object) -> OpeningStore:
    """Open the store for `url`.

    `async with open_store(url) as store:` closes it on exit; `store = await
    open_store(url)` leaves closing to the caller. Backend options (e.g.
    `max_content_bytes`, Postgres `schema`) are passed through. The package's
    `journal_bridge.open_store` is this with the settings' defaults: the URL
    and content limit the environment gives.
    """
    return OpeningStore(create_store(url, **options))


async def open_store_when_available(
    url: str,
    *,
    on_unavailable: Callable[[StoreUnavailable], None] | None = None,
    max_delay: float = 10.0,
    **options: object,
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
