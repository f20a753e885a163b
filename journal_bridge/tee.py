"""SDK tee: journal the runs a client streams from a server without the plugin.

    from langgraph_sdk import get_client
    from journal_bridge.tee import JournalingClient

    async with JournalingClient(get_client(url=URL), "sqlite:///journal.db") as client:
        async for part in client.runs.stream(thread_id, "agent", input=..., stream_mode="values"):
            ...  # exactly the parts plain `runs.stream` would yield

`JournalingClient` wraps a `langgraph_sdk` async client; everything but
`runs.stream` passes through untouched. `runs.stream` takes the same arguments
and:

- adds `"events"` to the `stream_mode` it sends (the server runs
  `astream_events` -- the only source of the summarization event -- only then)
  and removes those parts from what it yields unless the caller asked for them;
- feeds every part to a `RunMapper` (run id from the `metadata` part; thread id
  from the call, or for a stateless run from the events' metadata) and hands the
  records to a `DeliveryQueue`, which batches them into the store.

Contract: the caller's iteration never sees a store error and never waits on
the store. Records are spooled to a local file while the store is down or
still opening and are retried in the background with backoff; `health()` and
the log report it. Leaving the `async with` waits up to `drain_timeout`
seconds for the queue to empty; what is left stays spooled and the next
`JournalingClient` for the same store delivers it. Records carry the same
`source_key`s as the plugin's, so a run journaled by both is stored once.

`tee_stream(runs, writer, ...)` is the same mechanism as a function, for code
that manages its own `TeeWriter`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Self

from journal_bridge.delivery import DeliveryQueue
from journal_bridge.health import assess
from journal_bridge.mapping import RunMapper
from journal_bridge.modes import EVENTS_MODE, mode_of, requested_modes
from journal_bridge.spool import spool_path
from journal_bridge.store import RunEventStore, StoreUnavailable, open_store_when_available

logger = logging.getLogger(__name__)

__all__ = ["JournalingClient", "TeeWriter", "tee_stream"]

class TeeWriter:
    """A store (given by URL or instance) and the `DeliveryQueue` in front of it.

    A URL is opened in the background, retried while unreachable, and closed on
    `stop()`; an instance is used as given and left open. The queue is unbounded
    so that a slow or absent store never holds up a stream.

    `spool` is the queue's spool file. By default a store URL gets
    `spool_path(url, "tee")` (`JOURNAL_BRIDGE_SPOOL_DIR`, else next to a SQLite
    store, else `.journal-bridge-spool/` in the working directory); a store
    instance, whose URL is unknown, keeps records in memory only.
    """

    def __init__(
        self,
        store: str | RunEventStore,
        *,
        spool: str | Path | None = None,
        max_backoff: float = 5.0,
        growing_after: float = 60.0,
    ) -> None:
        self._owns_store = isinstance(store, str)
        self._url = store if isinstance(store, str) else None
        if spool is None and self._url is not None:
            spool = spool_path(self._url, "tee")
        self.delivery = DeliveryQueue(
            None if isinstance(store, str) else store,
            spool=spool,
            queue_size=0,
            max_backoff=max_backoff,
            growing_after=growing_after,
        )
        self.malformed = 0
        self._opener: asyncio.Task[None] | None = None
        self._started = False

    async def start(self, *, open_timeout: float = 2.0) -> None:
        if self._started:
            return
        self._started = True
        await self.delivery.start()
        if self._url is not None:
            self._opener = asyncio.create_task(self._open(self._url), name="journal-tee-open-store")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._opener), timeout=open_timeout)

    async def _open(self, url: str) -> None:
        def unavailable(exc: StoreUnavailable) -> None:
            self.delivery.stats.last_error = f"store: {exc}"
            logger.warning("journal-bridge tee: store %s unavailable (%s); retrying", url, exc)

        self.delivery.store = await open_store_when_available(url, on_unavailable=unavailable)

    async def write(self, records: Sequence[Any]) -> None:
        """Spool records for the store; the queue is unbounded, so this never waits on the store."""
        if records:
            await self.delivery.write(records)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything queued is stored; False if `timeout` passed first."""
        try:
            await asyncio.wait_for(self.delivery.drain(), timeout=timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self, drain_timeout: float = 10.0) -> None:
        if not self._started:
            return
        self._started = False
        await self.delivery.stop(timeout=drain_timeout)
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opener
        if self._owns_store and self.delivery.store is not None:
            with contextlib.suppress(Exception):
                await self.delivery.store.close()
            self.delivery.store = None

    def health(self) -> dict[str, Any]:
        """The queue's report and the mapping's `malformed` count, with `status` and `reason`."""
        report = {**self.delivery.report(), "malformed": self.malformed}
        return {**assess(report), **report}


def _event_and_data(part: Any) -> tuple[str, Any]:
    """(SSE event name, payload) of a v1 `StreamPart` or a v2 part dict."""
    if isinstance(part, dict):
        event = str(part.get("type"))
        ns = part.get("ns") or []
        return ("|".join([event, *ns]) if ns else event), part.get("data")
    return part.event, part.data


class _RunTee:
    """One run's mapper, created once both ids are known (stateless runs: late)."""

    def __init__(self, writer: TeeWriter, thread_id: str | None) -> None:
        self._writer = writer
        self._thread_id = thread_id
        self._run_id: str | None = None
        self._mapper: RunMapper | None = None
        self._held: list[tuple[str, Any]] = []

    async def feed(self, event: str, data: Any) -> None:
        try:
            await self._feed(event, data)
        except Exception:
            logger.exception("journal-bridge tee: could not map a %r part", event)

    async def _feed(self, event: str, data: Any) -> None:
        mode = mode_of(event)
        if mode == "metadata" and isinstance(data, dict) and self._run_id is None:
            self._run_id = str(data.get("run_id")) if data.get("run_id") else None
            return
        if mode not in (EVENTS_MODE, "error"):
            return
        if self._thread_id is None and mode == EVENTS_MODE and isinstance(data, dict):
            thread_id = (data.get("metadata") or {}).get("thread_id")
            if thread_id:
                self._thread_id = str(thread_id)
        if self._mapper is None:
            if self._run_id is None and mode == EVENTS_MODE and isinstance(data, dict):
                run_id = (data.get("metadata") or {}).get("run_id")
                self._run_id = str(run_id) if run_id else None
            if self._thread_id is None or self._run_id is None:
                self._held.append((mode, data))
                return
            self._mapper = RunMapper(self._thread_id, self._run_id)
            held, self._held = self._held, []
            for item in held:
                await self._writer.write(self._mapper.feed(*item))
        await self._writer.write(self._mapper.feed(mode, data))

    async def finish(self) -> None:
        try:
            if self._mapper is not None:
                await self._writer.write(self._mapper.flush())
                self._writer.malformed += self._mapper.malformed
            elif self._held:
                logger.warning(
                    "journal-bridge tee: %d parts of a run were not journaled: its %s never appeared",
                    len(self._held),
                    "run id" if self._run_id is None else "thread id",
                )
        except Exception:
            logger.exception("journal-bridge tee: could not finish a run's journal")


async def tee_stream(
    runs: Any,
    writer: TeeWriter,
    thread_id: str | None,
    assistant_id: str,
    **kwargs: Any,
) -> AsyncIterator[Any]:
    """`runs.stream(thread_id, assistant_id, **kwargs)`, journaled through `writer`.

    Yields exactly the parts `runs.stream` yields for the caller's `stream_mode`
    (and `version`); `"events"` parts are journaled and yielded only if asked for.
    """
    value = kwargs.pop("stream_mode", "values")
    asked = requested_modes(value)
    if asked is None:
        # A value the server will reject: send it as given, so the caller gets that error.
        asked = list(value) if isinstance(value, list | tuple) else [value]
    sent = asked if EVENTS_MODE in asked else [*asked, EVENTS_MODE]
    run = _RunTee(writer, thread_id)
    stream = runs.stream(thread_id, assistant_id, stream_mode=sent, **kwargs)
    try:
        async for part in stream:
            event, data = _event_and_data(part)
            await run.feed(event, data)
            if mode_of(event) == EVENTS_MODE and EVENTS_MODE not in asked:
                continue
            yield part
    finally:
        await run.finish()
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


class _JournalingRuns:
    """`client.runs` with `stream` journaled; every other attribute is the original."""

    def __init__(self, runs: Any, writer: TeeWriter) -> None:
        self._runs = runs
        self._writer = writer

    def stream(self, thread_id: str | None, assistant_id: str, **kwargs: Any) -> AsyncIterator[Any]:
        return tee_stream(self._runs, self._writer, thread_id, assistant_id, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runs, name)


class JournalingClient:
    """A `langgraph_sdk` async client whose `runs.stream` also journals the run.

    `store` is a store URL (`sqlite:///journal.db`, `postgresql://...`,
    `memory://`), opened and closed by this object, or an open `RunEventStore`.
    Use as `async with`; `await drain()` waits for every journaled record to be
    stored, `health()` reports status, backlog, retries and the last store
    error. `spool` as for `TeeWriter`.
    """

    def __init__(
        self,
        client: Any,
        store: str | RunEventStore,
        *,
        drain_timeout: float = 10.0,
        spool: str | Path | None = None,
    ) -> None:
        self.client = client
        self.writer = TeeWriter(store, spool=spool)
        self.runs = _JournalingRuns(client.runs, self.writer)
        self._drain_timeout = drain_timeout

    async def __aenter__(self) -> Self:
        await self.writer.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.writer.stop(self._drain_timeout)

    async def drain(self, timeout: float | None = None) -> bool:
        return await self.writer.drain(timeout)

    def health(self) -> dict[str, Any]:
        return self.writer.health()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)
