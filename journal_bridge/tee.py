"""SDK tee: journal the runs a client streams from a server without the plugin.

    from langgraph_sdk import get_client
    from journal_bridge.tee import JournalingClient

    async with JournalingClient(get_client(url=URL), "sqlite:///journal.db") as client:
        async for part in client.runs.stream(thread_id, "agent", input=..., stream_mode="values"):
            ...  # exactly the parts plain `runs.stream` would yield

`JournalingClient` wraps a `langgraph_sdk` async client; everything but
`runs.stream` passes through untouched. `runs.stream` takes the same arguments
and journals the run the way the plugin does:

- the capture is planned as the plugin plans it (`journal_bridge.mapping.capture_setting`,
  setting from `capture=` or `JOURNAL_BRIDGE_CAPTURE`): the modes it adds are
  appended to the `stream_mode` sent, and their parts are not yielded. A
  `stream_mode` the server would reject is sent untouched, so its error names
  only the caller's value. `stream_resumable` is left as the caller set it:
  a resumable stream gives its parts ids, which the caller would see;
- the parts are read by the plugin's reader and mappers (`journal_bridge.mapping.reader`,
  run through a `Bridge`), so the records, keys included, are the plugin's. A
  stateless run's temporary thread is named to no client: its journal is
  filed under the run's id, as the plugin files it;
- the caller gets exactly the parts plain `runs.stream` yields, `version="v2"`
  dicts included.

A caller that stops reading early (`break`) does not stop the journal: the
rest of the run is read from the same response in the background, so the
server sees no difference (by default a run outlives a client that goes
away). With `on_disconnect="cancel"` the response is closed at once, as plain
`runs.stream` would, and the run's end is joined. If the response cannot be
read further (the caller's task was cancelled inside a read, the connection
broke), the rest is joined live through the SDK, plus the thread's final
state for a state capture; frames sent in between may be missing, and that is
logged and counted in `health()` (`runs_partial`).

Contract: the caller's iteration never sees a store error and never waits on
the store. Records are spooled to a local file while the store is down or
still opening and are retried in the background with backoff; `health()` and
the log report it. Leaving the `async with` waits up to `drain_timeout`
seconds for runs still being read and for the queue to empty; what is left
stays spooled and the next `JournalingClient` for the same store delivers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import orjson

from journal_bridge.delivery.bridge import Bridge
from journal_bridge.mapping.capture_setting import Capture, CaptureSetting, plan_capture
from journal_bridge.host.compat import run_stream_modes
from journal_bridge.delivery.health import assess
from journal_bridge.capture.run_requests import requested_checkpoint
from journal_bridge.host.modes import mode_of, requested_modes
from journal_bridge.mapping.client_stream import ClientStream
from journal_bridge.mapping.reader import RunSource
from journal_bridge.settings import Settings
from journal_bridge.delivery.spool import spool_path
from journal_bridge.host.sse import Frame
from journal_bridge.store import RunEventStore, StoreUnavailable, open_store_when_available
from journal_bridge.host.sdk import SdkClient

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

logger = logging.getLogger(__name__)

__all__ = ["JournalingClient", "TeeWriter", "tee_stream"]

_VERDICT = ("status", "reason", "backlog_growing")

try:  # the SDK's own conversion, so v2 parts are exactly the SDK's
    from langgraph_sdk._shared.utilities import _sse_to_v2_dict
except ImportError:  # pragma: no cover - an SDK that moved it

    def _sse_to_v2_dict(event: str, data: Any) -> dict[str, Any] | None:
        if event == "end":
            return None
        event_type, *ns = event.split("|")
        interrupts = data.pop("__interrupt__", []) if event_type == "values" and isinstance(data, dict) else []
        return {"type": event_type, "ns": ns, "data": data, "interrupts": interrupts}


class TeeWriter:
    """A store (given by URL or instance) and the `Bridge` that journals runs into it.

    A URL is opened in the background, retried while unreachable, and closed on
    `stop()`; an instance is used as given and left open. The queue is unbounded
    so that a slow or absent store never holds up a stream.

    `spool` is the queue's spool file. By default a store URL gets
    `spool_path(url, "tee", spool_dir)` (in `spool_dir`, else next to a SQLite
    store, else `.journal-bridge-spool/` in the working directory); a store
    instance, whose URL is unknown, keeps records in memory only.
    `store_options` go to the store a URL opens (`max_content_bytes`).

    `client` is the SDK client runs are joined through when their stream is
    not read to its end.
    """

    def __init__(
        self,
        store: str | RunEventStore,
        *,
        client: SdkClient | None = None,
        spool: str | Path | None = None,
        max_backoff: float = 5.0,
        growing_after: float = 60.0,
        capture: CaptureSetting | str | None = None,
        spool_dir: str | Path | None = None,
        store_options: dict[str, Any] | None = None,
    ) -> None:
        self._owns_store = isinstance(store, str)
        self._url = store if isinstance(store, str) else None
        self._store_options = store_options or {}
        if spool is None and self._url is not None:
            spool = spool_path(self._url, "tee", spool_dir)
        self.client = client
        self.setting = capture if isinstance(capture, CaptureSetting) else CaptureSetting.parse(capture)
        self.bridge = Bridge(
            None if isinstance(store, str) else store,
            self._sdk,
            spool=spool,
            queue_size=0,
            max_backoff=max_backoff,
            growing_after=growing_after,
        )
        self.delivery = self.bridge.delivery
        self.runs_partial = 0
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()
        self._readers: set[asyncio.Task[None]] = set()
        self._opener: asyncio.Task[None] | None = None
        self._started = False

    async def start(self, *, open_timeout: float = 2.0) -> None:
        if self._started:
            return
        self._started = True
        await self.bridge.start()
        if self._url is not None:
            self._opener = asyncio.create_task(self._open(self._url), name="journal-tee-open-store")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._opener), timeout=open_timeout)

    def _sdk(self) -> SdkClient:
        """The client a run not read to its end is joined through."""
        if self.client is None:
            raise ValueError("client: a run whose stream was not read to its end is joined through it; none was given")
        return self.client

    async def _open(self, url: str) -> None:
        def unavailable(exc: StoreUnavailable) -> None:
            self.delivery.stats.last_error = f"store: {exc}"
            logger.warning("journal-bridge tee: store %s unavailable (%s); retrying", url, exc)

        self.delivery.store = await open_store_when_available(
            url, on_unavailable=unavailable, **self._store_options
        )

    async def write(self, records: Sequence[Any]) -> None:
        """Spool records for the store; the queue is unbounded, so this never waits on the store."""
        if records:
            await self.delivery.write(records)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until the runs being read are read and everything queued is stored;
        False if `timeout` passed first."""
        try:
            await asyncio.wait_for(self._settle(), timeout=timeout)
        except TimeoutError:
            return False
        return True

    async def _settle(self) -> None:
        while self._readers:
            await asyncio.gather(*list(self._readers), return_exceptions=True)
        await self.bridge.wait_for_runs()
        await self.delivery.drain()

    async def stop(self, drain_timeout: float = 10.0) -> None:
        if not self._started:
            return
        self._started = False
        for stream in list(self._streams):
            # A stream its caller left suspended: reading goes on in the background.
            with contextlib.suppress(Exception):
                await stream.aclose()
        if self._readers:
            await asyncio.wait(list(self._readers), timeout=drain_timeout)
        for task in list(self._readers):
            task.cancel()
        await asyncio.gather(*list(self._readers), return_exceptions=True)
        unfinished = self.bridge.active_runs
        if unfinished:
            logger.warning("journal-bridge tee: closing with %d runs not yet read to their end", unfinished)
        await self.bridge.stop(timeout=drain_timeout)
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opener
        if self._owns_store and self.delivery.store is not None:
            with contextlib.suppress(Exception):
                await self.delivery.store.close()
            self.delivery.store = None

    def health(self) -> dict[str, object]:
        """The bridge's health (`journal_bridge.delivery.health.assess`: `status`, `reason`, counters)."""
        report = {k: v for k, v in self.bridge.health().items() if k not in _VERDICT}
        report["runs_partial"] = self.runs_partial
        return {**assess(report), **report}

    def _keep_reading(self, stream: object, run: _RunTee) -> None:
        task = asyncio.create_task(run.read_rest(stream), name=f"journal-tee-rest-{run.run_id}")
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)


class _RunTee:
    """The journal's side of one streamed run: feeds its parts to the bridge's reader."""

    def __init__(self, writer: TeeWriter, thread_id: str | None, source: RunSource) -> None:
        self._writer = writer
        self._thread_id = thread_id
        self._source = source
        self._stream: ClientStream | None = None
        self._held: list[Any] = []
        self.run_id: str | None = None

    def feed(self, part: Any) -> None:
        """Never raises: journaling must not break the caller's stream."""
        try:
            if self._stream is None:
                self._held.append(part)
                data = part.data
                if part.event == "metadata" and isinstance(data, dict) and data.get("run_id"):
                    self.run_id = str(data["run_id"])
                    self._stream = self._writer.bridge.read_client_stream(self._thread_id, self.run_id, self._source)
                    held, self._held = self._held, []
                    for earlier in held:
                        self._feed(earlier)
                return
            self._feed(part)
        except Exception:  # noqa: BLE001
            logger.exception("journal-bridge tee: could not journal a %r part", getattr(part, "event", None))

    def _feed(self, part: Any) -> None:
        assert self._stream is not None
        event = part.event
        # Serialised, as the plugin's middleware forwards frames: the caller may change the objects it gets.
        data = orjson.dumps(part.data) if self._stream.wants(mode_of(event)) else None
        self._stream.feed(Frame(b"", b"", event, data, getattr(part, "id", None)))

    def close(self, *, complete: bool) -> None:
        try:
            if self._stream is not None:
                if not complete and not self._source.resumable:
                    self._writer.runs_partial += 1
                    logger.warning(
                        "journal-bridge tee: the stream of run %s ended early; the rest is joined live,"
                        " frames sent in between may be missing from the journal", self.run_id,
                    )
                self._stream.close(complete=complete)
            elif self._held:
                logger.warning("journal-bridge tee: %d parts of a run were not journaled: no run id",
                               len(self._held))
        except Exception:  # noqa: BLE001
            logger.exception("journal-bridge tee: could not close a run's journal")

    async def read_rest(self, stream: Any) -> None:
        """Read what the caller left of the response, to its end."""
        complete = False
        try:
            async for part in stream:
                self.feed(part)
            complete = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the reader joins the rest
            logger.info("journal-bridge tee: reading the rest of run %s failed: %s", self.run_id, exc)
        finally:
            self.close(complete=complete)
            with contextlib.suppress(BaseException):
                await stream.aclose()


def _planned(value: object, setting: CaptureSetting) -> tuple[object, Capture | None]:
    """The `stream_mode` to send and the capture; no capture for a value the server rejects."""
    asked = requested_modes(value)
    if asked is None or not set(asked) <= run_stream_modes():
        return value, None
    capture = plan_capture(asked, setting)
    return ([*asked, *capture.added] if capture.added else value), capture


async def tee_stream(
    runs: Any,
    writer: TeeWriter,
    thread_id: str | None,
    assistant_id: str,
    **kwargs: object,
) -> AsyncIterator[Any]:
    """`runs.stream(thread_id, assistant_id, **kwargs)`, journaled through `writer`.

    Yields exactly the parts `runs.stream` yields for the caller's arguments.
    """
    value = kwargs.pop("stream_mode", "values")
    version = kwargs.pop("version", "v1")
    sent, capture = _planned(value, writer.setting)
    if capture is None:
        # Nothing to journal: the server refuses the request, with its own message.
        async for part in runs.stream(thread_id, assistant_id, stream_mode=value, version=version, **kwargs):
            yield part
        return
    added = frozenset(capture.added)
    source = RunSource(
        capture,
        resumable=bool(kwargs.get("stream_resumable")),
        assistant_id=assistant_id,
        # A resume (`Command(resume=...)`) has a command instead of an input.
        run_input=kwargs["input"] if kwargs.get("input") is not None else kwargs.get("command"),
        # A run from an earlier checkpoint (a regenerate, an edit) forks the thread.
        checkpoint=requested_checkpoint(kwargs) if thread_id is not None else None,
    )
    run = _RunTee(writer, thread_id, source)
    stream = runs.stream(thread_id, assistant_id, stream_mode=sent, **kwargs)
    handed_over = complete = False
    try:
        async for part in stream:
            run.feed(part)
            if mode_of(part.event) in added:
                continue
            if version == "v2":
                converted = _sse_to_v2_dict(part.event, part.data)
                if converted is None:
                    continue
                yield converted
            else:
                yield part
        complete = True
    except GeneratorExit:
        # The caller stopped reading. Unless it asked for the run to be cancelled
        # then, the server runs on: read the rest of the same response.
        if kwargs.get("on_disconnect") != "cancel":
            writer._keep_reading(stream, run)
            handed_over = True
        raise
    finally:
        if not handed_over:
            run.close(complete=complete)
            with contextlib.suppress(BaseException):
                await stream.aclose()


class _JournalingRuns:
    """`client.runs` with `stream` journaled; every other attribute is the original."""

    def __init__(self, runs: object, writer: TeeWriter) -> None:
        self._runs = runs
        self._writer = writer

    def stream(self, thread_id: str | None, assistant_id: str, **kwargs: Any) -> AsyncIterator[Any]:
        stream = tee_stream(self._runs, self._writer, thread_id, assistant_id, **kwargs)
        self._writer._streams.add(stream)
        return stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runs, name)


class JournalingClient:
    """A `langgraph_sdk` async client whose `runs.stream` also journals the run.

    `store` is a store URL (`sqlite:///journal.db`, `postgresql://...`,
    `memory://`), opened and closed by this object, or an open `RunEventStore`.
    `capture` is `auto`, `events` or `lean` (default: `JOURNAL_BRIDGE_CAPTURE`,
    else `auto`), as for the plugin. Use as `async with`; `await drain()` waits
    until every run is read and its records are stored, `health()` reports
    status, backlog, retries and the last store error. `spool` as for `TeeWriter`.
    """

    def __init__(
        self,
        client: LangGraphClient,
        store: str | RunEventStore,
        *,
        drain_timeout: float = 10.0,
        spool: str | Path | None = None,
        capture: CaptureSetting | str | None = None,
    ) -> None:
        self.client = client
        settings = Settings.from_env(only=["capture", "spool_dir", "max_content_bytes"])
        self.writer = TeeWriter(
            store,
            client=client,
            spool=spool,
            capture=capture if capture is not None else settings.capture,
            spool_dir=settings.spool_dir,
            store_options=settings.store_options,
        )
        self.runs = _JournalingRuns(client.runs, self.writer)
        self._drain_timeout = drain_timeout

    async def __aenter__(self) -> Self:
        await self.writer.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.writer.stop(self._drain_timeout)

    async def drain(self, timeout: float | None = None) -> bool:
        return await self.writer.drain(timeout)

    def health(self) -> dict[str, object]:
        return self.writer.health()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)
