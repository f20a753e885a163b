"""Reading one run: its stream parts, from its client's stream or a join, through the capture's mapper.

A run is read from one of two sources:

- the **client's stream** (`ClientStream`): the frames the plugin forwards to
  the client that streams the run (or the parts an SDK client reads, in the
  SDK tee), pushed without waiting (the client's stream never waits on the
  journal). If the client goes away before the run ends, the rest is read by
  joining the run from the last frame the client got;
- a **join** through the SDK, for runs nobody streams: `runs.join_stream` with
  the capture's modes, from the first frame when the run is resumable. A
  created run whose client joins it at once is read from that join instead
  (`ClientJoin`), as from a client's stream, once its first frame shows it
  holds the run from its start.

`read_run` maps the parts with the capture's mapper (`events` -> `RunMapper`,
`state` -> `StateMapper`) and hands the records to `emit`, in stream order,
one batch at a time: reading goes on while a batch is written, and the records
mapped meanwhile make the next batch (`_Batches`), so a run costs the store a
few transactions instead of one per frame. When the stream is over it asks
the server how the run ended (`journal_bridge.host.outcome`) for what the stream
cannot say: a cancel, a failure whose `error` part it missed, the interrupts
of a paused run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from journal_bridge.host.compat import assistant_uuid, join_params
from journal_bridge.host.modes import EVENTS_MODE
from journal_bridge.host.outcome import ROLLBACK, RunOutcome, read_outcome, rollback_removed_checkpoints
from journal_bridge.host.sdk import OncePerAssistant, SdkClient
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.attempts import frame_attempt, superseding_fork
from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.mapping.events_mapper import RunMapper
from journal_bridge.mapping.private_views import PRIVATE_VIEWS, with_markers
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model import records
from journal_bridge.model.envelope import MESSAGE, MIDDLEWARE, RunEvent

logger = logging.getLogger(__name__)

__all__ = ["OWNERS", "Part", "RunSource", "ClientJoin", "ClientStream", "fork_record", "owned", "read_checkpoint", "read_run"]

_ERROR_MODE = "error"
_INTERRUPT_MODES = frozenset({"values", "updates"})
_INTERRUPT_KEY = b'"__interrupt__"'
_ALWAYS_READ = frozenset({_ERROR_MODE, "metadata"})

Emit = Callable[[list[RunEvent]], Awaitable[None]]
# Records held back while more frames wait, at most.
_MAX_PENDING = 500
# A run's batch starts no sooner than this after its reader began writing or
# after its last batch began: a run whose frames come quickly (a model that
# answers at once) is written in one or two transactions. The end of the
# reading does not wait for it.
_GATHER_SECONDS = 0.05
# A run's first records (its `run.start`) wait for its first frame, this long at
# most: a run is written with its first frames, in one transaction, when the
# server starts it within this (a created run waits about a second for the
# runtime's queue); a run still queued behind another shows as running once
# this has passed.
_START_HOLD_SECONDS = 2.0
# A streamed run's reader is woken this long after the first frame it keeps
# came, not at every frame: the frames that came meanwhile are read in one
# go, a few wake-ups per run instead of one per frame. Short beside the
# gathering of its records (`_GATHER_SECONDS`); the stream's end wakes it at once.
_READ_AFTER_SECONDS = 0.01
# Once the run's stream has ended, what is left to read (its outcome) comes
# within this: the records kept meanwhile wait for the run's last ones and go
# in one transaction with them, not in one of their own just before.
_END_HOLD_SECONDS = 0.5


class _Batches:
    """Hands a run's records to `emit` in order, one batch at a time.

    `add` keeps records; `send` has them written by a writer that gathers
    first: a batch goes `_GATHER_SECONDS` after the writer started, or after
    the previous batch began, so a run whose frames come quickly is written in
    one or two transactions (the records kept meanwhile make the batch).
    `send` waits only when `_MAX_PENDING` records are kept, and then does not
    wait for the gathering time. After `hold_start`, the first batch waits for
    `started` (then gathers from there), `_START_HOLD_SECONDS` at most.
    `finish` ends the gathering and waits until everything is written. A
    failed write is raised by the next call; a reader that is cancelled
    cancels the write under way. After `ending` (the stream is over, the
    run's last records are being made), the writer keeps what it holds for
    `finish`, `_END_HOLD_SECONDS` at most.
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._pending: list[RunEvent] = []
        self._writing: asyncio.Future[None] | None = None
        # Set: the writer takes what is kept without gathering more.
        self._hurry = False
        self._gate: asyncio.Future[None] | None = None
        self._finishing = False
        self._end_hold: float | None = None  # the loop's time until which `ending` holds batches
        self._start_hold: float | None = None  # the loop's time until which the first batch waits

    def add(self, records: list[RunEvent]) -> None:
        self._pending.extend(records)

    @property
    def full(self) -> bool:
        return len(self._pending) >= _MAX_PENDING

    async def send(self) -> None:
        if self._writing is not None:
            if not self._writing.done():
                if not self.full:
                    return  # the writer takes them next
                self._hurry_up()  # full: the writer stops gathering
            await self._written()
            if not self._finishing:
                self._hurry = False
        if self._pending:
            self._writing = asyncio.ensure_future(self._write())

    def hold_start(self) -> None:
        """What is kept now waits for `started`, a short while at most."""
        self._start_hold = asyncio.get_running_loop().time() + _START_HOLD_SECONDS

    def started(self) -> None:
        """A frame of the run came: a held first batch gathers from the first one on
        (later frames never put it off)."""
        if self._start_hold is not None:
            gathered = asyncio.get_running_loop().time() + _GATHER_SECONDS
            if gathered < self._start_hold:
                self._start_hold = gathered
                self._wake()

    def ending(self) -> None:
        """The stream is over: the next batch waits for `finish`, a short while at most."""
        self._end_hold = asyncio.get_running_loop().time() + _END_HOLD_SECONDS
        self._wake()  # a writer gathering now waits the longer

    async def finish(self) -> None:
        self._finishing = True
        self._hurry_up()
        await self.send()
        await self._written()

    async def cancel(self) -> None:
        writing, self._writing = self._writing, None
        if writing is None:
            return
        writing.cancel()
        with contextlib.suppress(BaseException):
            await writing

    def _hurry_up(self) -> None:
        self._hurry = True
        self._wake()

    def _wake(self) -> None:
        if self._gate is not None and not self._gate.done():
            self._gate.set_result(None)

    async def _gather(self, began: float) -> None:
        """Wait until `_GATHER_SECONDS` after the loop's time `began` (later while
        `ending` holds), or until hurried."""
        loop = asyncio.get_running_loop()
        while not self._hurry:
            until = max(began + _GATHER_SECONDS, self._end_hold or 0.0, self._start_hold or 0.0)
            if until <= loop.time():
                return
            gate = self._gate = loop.create_future()
            timer = loop.call_at(until, lambda: gate.done() or gate.set_result(None))
            try:
                await gate
            finally:
                timer.cancel()
                self._gate = None

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        while True:
            await self._gather(began)
            self._start_hold = None
            batch, self._pending = self._pending, []
            if not batch:
                return
            began = loop.time()
            await self._emit(batch)

    async def _written(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            await writing


@dataclass(frozen=True)
class Part:
    event: str
    data: Any
    id: str | None = None


# Callback events the `events` mapper ignores; the server writes the event's name
# first, so a frame is recognised before it is parsed. Tokens are most of the bytes.
_UNMAPPED_CALLBACKS = re.compile(rb'\{"event":"on_(chat_model_stream|chain_stream|chat_model_start|llm_stream|llm_start)"')


def _unmapped_callback(frame: Frame) -> bool:
    return frame.mode == EVENTS_MODE and frame.data is not None and _UNMAPPED_CALLBACKS.match(frame.data) is not None


# The lines before such a frame's data, as the server writes them: its `event`
# line (the root's `events`, or a subgraph's `events|<namespace>`), then `data`.
_EVENTS_DATA = re.compile(rb"event: ?events(?:\|[^\r\n]*)?(?:\r\n|\r|\n)data: ?")
# What may follow the data line: the frame's `id` line, the last (a resumable run's).
_ID_LINE = re.compile(rb"(?:\r\n|\r|\n)id: ?([^\r\n]*)")


def unmapped_callback_bytes(body: bytes, start: int, end: int) -> tuple[bool, str | None]:
    """Whether the unparsed frame `body[start:end]` is an `events` frame of an
    unmapped callback, laid out as the server writes one: its `event` line, one
    `data` line, then an `id` line or nothing; and that id. Such a frame
    `ClientStream.feed` keeps nothing of but its id and that a frame came.

    JSON data holds no raw line break: the data line ends at the first CR or LF
    after its start. Any other layout (data over several lines, a field after
    the id) answers False, and the frame is parsed."""
    lines = _EVENTS_DATA.match(body, start, end)
    if lines is None or _UNMAPPED_CALLBACKS.match(body, lines.end(), end) is None:
        return False, None
    data_end = body.find(b"\n", lines.end(), end)
    carriage = body.find(b"\r", lines.end(), data_end if data_end >= 0 else end)
    if carriage >= 0:
        data_end = carriage
    if data_end < 0:
        return True, None
    frame_id = _ID_LINE.fullmatch(body, data_end, end)
    if frame_id is None:
        return False, None
    return True, frame_id.group(1).decode("utf-8", "replace").strip()


class ClientStream:
    """The frames of one streamed run, as its client receives them.

    `feed` never waits and never raises into the response path; frames of
    modes the capture does not read are not kept.
    """

    def __init__(self, capture: Capture, client_modes: tuple[str, ...] = ()) -> None:
        self._wanted = frozenset(capture.modes) | _ALWAYS_READ
        self._frames: deque[Frame] = deque()
        self._closed = False
        # The reader waiting for frames, and the wake-up it is due (`_READ_AFTER_SECONDS`).
        self._waiter: asyncio.Future[None] | None = None
        self._wake: asyncio.TimerHandle | None = None
        self.complete: bool | None = None
        self.last_id: str | None = None
        # Whether a frame of the run came after its opening `metadata` one.
        self.fed = False
        # A run that pauses at `interrupt()` says so in its `values` and `updates`
        # frames; when its client streams either, this notes whether one did.
        self.watches_interrupts = bool(_INTERRUPT_MODES.intersection(client_modes))
        self.saw_interrupt = False

    def wants(self, mode: str | None) -> bool:
        """Whether frames of `mode` are read (a caller holding parsed parts skips the others)."""
        return mode in self._wanted

    def feed(self, frame: Frame) -> None:
        if frame.event is not None and frame.mode != "metadata":
            self.fed = True
        if frame.id is not None:
            self.last_id = frame.id
        if self.watches_interrupts and frame.mode in _INTERRUPT_MODES and frame.data and _INTERRUPT_KEY in frame.data:
            self.saw_interrupt = True
        if frame.event is not None and self.wants(frame.mode) and not _unmapped_callback(frame):
            self._frames.append(frame)
            if self._waiter is not None and self._wake is None:
                self._wake = self._waiter.get_loop().call_later(_READ_AFTER_SECONDS, self._woken)

    def passes_over(self, body: bytes, start: int, end: int) -> bool:
        """Whether the unparsed frame `body[start:end]` is one `feed` would keep
        nothing of but its id (`unmapped_callback_bytes`): noted as `feed` would
        note it, and not to be parsed. A frame this answers False for goes to `feed`."""
        return self.pass_over(body, start, end)[0]

    def pass_over(self, body: bytes, start: int, end: int) -> tuple[bool, str | None]:
        """`passes_over`, and the id of a frame passed over (None when it has none)."""
        passed, frame_id = unmapped_callback_bytes(body, start, end)
        if not passed:
            return False, None
        self.fed = True
        if frame_id is not None:
            self.last_id = frame_id
        return True, frame_id

    def discard(self) -> None:
        """Nobody here reads the run (another process does): keep no frame from now on."""
        self._wanted = frozenset()
        self._frames.clear()

    def ready(self) -> bool:
        """Whether another frame (or the end) is waiting to be read."""
        return bool(self._frames) or self._closed

    def close(self, *, complete: bool) -> None:
        if self.complete is None:
            self.complete = complete
            self._closed = True
            self._woken()  # the end is not held back

    def _woken(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _more(self) -> None:
        """Wait until frames have come and `_READ_AFTER_SECONDS` passed since the
        first of them, or the stream closed."""
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._woken()  # a reader cancelled meanwhile leaves no wake-up behind

    async def parts(self, needs: Callable[[bytes], bool] | None = None) -> AsyncIterator[Part | None]:
        """The frames kept, parsed, in order.

        An `events` frame whose bytes `needs` turns down (asked as it comes to be
        read) is passed over unparsed; when no other frame is waiting then, None
        comes instead: the reader is not to wait on the next frame for what it keeps.
        """
        frames = self._frames
        while True:
            if not frames:
                if self._closed:
                    return
                await self._more()
                continue
            frame = frames.popleft()
            if needs is not None and frame.mode == EVENTS_MODE and frame.data and not needs(frame.data):
                if not self.ready():
                    yield None
                continue
            try:
                data = orjson.loads(frame.data) if frame.data else None
            except orjson.JSONDecodeError:
                data = frame.data.decode("utf-8", "replace") if frame.data else None
            yield Part(frame.event or "", data, frame.id)


class ClientJoin:
    """A created run's first join by its client, which the run may be read from
    instead of a join of the journal's own.

    Waits `wait` seconds for the client's join (`take`); a join taken is read
    only if the first frame it gets is the run's own `metadata` frame, so it
    holds the run from its start. Otherwise, or without a join in time,
    `stream()` answers None and the reader joins the run itself.
    """

    def __init__(self, run_id: str, capture: Capture, wait: float) -> None:
        loop = asyncio.get_running_loop()
        self.run_id = str(run_id)
        self._capture = capture
        self._decided: asyncio.Future[ClientStream | None] = loop.create_future()
        self._timer: asyncio.TimerHandle | None = loop.call_later(wait, self._decide, None)
        self._taken = False

    @property
    def open(self) -> bool:
        """Whether a client join can still be taken."""
        return not self._taken and not self._decided.done()

    def take(self, modes: tuple[str, ...]) -> _JoinFrames | None:
        """The client's join of the run, reading `modes` (each frame of them is fed):
        what to feed its frames to, or None when the wait is over or a join was taken."""
        if not self.open:
            return None
        self._taken = True
        self._stop_timer()
        return _JoinFrames(self, ClientStream(self._capture, modes))

    def cancel(self) -> None:
        """The run is read another way: no join is taken from now on, none taken is kept."""
        self._stop_timer()
        self._decide(None)
        taken = self._decided.result()
        if taken is not None:
            taken.discard()

    @property
    def read_from_client(self) -> bool:
        """Whether the run is read from its client's join."""
        return self._decided.done() and self._decided.result() is not None

    async def stream(self) -> ClientStream | None:
        """The client's join to read the run from, None to join it here."""
        return await self._decided

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _decide(self, stream: ClientStream | None) -> None:
        if not self._decided.done():
            self._decided.set_result(stream)


class _JoinFrames:
    """The frames of a client's join, checked at the first for the run's start."""

    def __init__(self, join: ClientJoin, stream: ClientStream) -> None:
        self._join = join
        self._stream = stream
        self._reading: bool | None = None  # None until the first frame decides

    def feed(self, frame: Frame) -> None:
        if frame.event is None:
            return
        if self._reading is None:
            self._reading = frame.mode == "metadata" and frame.field("run_id") == self._join.run_id
            self._join._decide(self._stream if self._reading else None)
        if self._reading:
            self._stream.feed(frame)

    def close(self, *, complete: bool) -> None:
        if self._reading is None:
            self._reading = False
            self._join._decide(None)
        elif self._reading:
            self._stream.close(complete=complete)


@dataclass
class RunSource:
    """Where a run's parts come from and what is known about the run already."""

    capture: Capture
    resumable: bool = True
    client_stream: ClientStream | None = None  # the frames its client gets, when one streams it
    client_join: ClientJoin | None = None  # a created run's join by its client, when it comes in time
    run: Mapping[str, Any] | None = None  # the run object, when the response had it
    assistant_id: Any = None  # from the request, if the run object cannot be read
    run_input: Any = None
    client_modes: tuple[str, ...] = ()  # what the run's client streams, when known
    checkpoint: Mapping[str, Any] | None = None  # where the run forked from, when not the head


async def _graph_id(sdk: SdkClient, assistant_id: str) -> str | None:
    return (await sdk.assistants.get(assistant_id)).get("graph_id")


# Which graph each assistant runs (none known: run.start without it).
_ASSISTANTS = OncePerAssistant(_graph_id, None, "the graph")

# Where a thread's owner is kept: deer-flow's auth handler (and handlers like
# it) stamps the authenticated identity on every thread as `metadata.user_id`.
OWNER_KEY = "user_id"


class ThreadOwners:
    """Whose each thread is (`metadata.user_id`), asked of the server once per thread."""

    def __init__(self, size: int = 10_000) -> None:
        self._owners: OrderedDict[str, str | None] = OrderedDict()
        self._size = size

    async def owner_of(self, sdk: SdkClient, thread_id: str) -> str | None:
        if thread_id in self._owners:
            return self._owners[thread_id]
        try:
            thread = await sdk.threads.get(thread_id)
        except Exception as exc:  # noqa: BLE001 - a stateless run's thread, one deleted since: no owner
            logger.debug("journal-bridge: thread %s not readable (%s)", thread_id, exc)
            return None  # not remembered: a thread that appears later is asked again
        owner = (thread.get("metadata") or {}).get(OWNER_KEY) if isinstance(thread, Mapping) else None
        owner = owner if isinstance(owner, str) and owner else None
        self._owners[thread_id] = owner
        while len(self._owners) > self._size:
            self._owners.popitem(last=False)
        return owner

    def forget(self, thread_id: str) -> None:
        """The thread was deleted: one made again with its id may be someone else's."""
        self._owners.pop(thread_id, None)


OWNERS = ThreadOwners()


def owned(events: list[RunEvent], owner: str | None) -> list[RunEvent]:
    """`events` with `owner` as the owner of those that have none."""
    if owner is None:
        return events
    return [e if e.user_id is not None else dataclasses.replace(e, user_id=owner) for e in events]


async def _start_state_mapper(sdk: SdkClient, mapper: StateMapper, source: RunSource) -> list[RunEvent]:
    run = source.run
    if run is None and source.assistant_id is not None:
        # What the request said is enough; the assistant's graph is known after its first run.
        assistant_id = assistant_uuid(str(source.assistant_id))
        graph = await _ASSISTANTS.of(sdk, assistant_id)
        return mapper.start(graph, assistant_id, source.run_input)
    if run is None:
        try:
            run = await sdk.runs.get(mapper.thread_id, mapper.run_id)
        except Exception as exc:  # noqa: BLE001
            logger.debug("journal-bridge: run %s not readable (%s)", mapper.run_id, exc)
    kwargs = (run or {}).get("kwargs") or {}
    configurable = (kwargs.get("config") or {}).get("configurable") or {}
    graph = configurable.get("graph_id") or ((run or {}).get("metadata") or {}).get("graph_id")
    assistant_id = (run or {}).get("assistant_id")
    run_input = kwargs.get("input")
    if run_input is None and run:
        # A resume (`Command(resume=...)`) has a command instead of an input.
        run_input = kwargs.get("command")
    return mapper.start(graph, str(assistant_id) if assistant_id else None, run_input)


async def read_checkpoint(sdk: SdkClient, thread_id: str, checkpoint_id: str) -> dict[str, Any] | None:
    """The thread's state at `checkpoint_id`, None (logged) when the server cannot say."""
    try:
        return await sdk.threads.get_state(thread_id, checkpoint_id=checkpoint_id)
    except Exception as exc:  # noqa: BLE001 - the fork is then recorded from an unknown place
        logger.warning("journal-bridge: checkpoint %s of thread %s not readable (%s)", checkpoint_id, thread_id, exc)
        return None


async def fork_record(sdk: SdkClient, thread_id: str, run_id: str | None, checkpoint: Mapping[str, Any]) -> RunEvent:
    """The `journal.fork` record of a run that went on from `checkpoint`."""
    state = await read_checkpoint(sdk, thread_id, str(checkpoint["checkpoint_id"]))
    return records.fork(thread_id, run_id, checkpoint, state)


async def read_run(
    sdk: SdkClient,
    thread_id: str,
    run_id: str,
    source: RunSource,
    emit: Emit,
    *,
    on_part: Callable[[], None] | None = None,
    default_owner: str | None = None,
) -> RunMapper | StateMapper:
    """Read the run to its end and emit its records; returns the mapper (its `malformed` count).

    Every record carries the thread's owner (`ThreadOwners`), else `default_owner`.
    Join failures propagate; the caller decides whether to read again.
    """
    # A stateless run's journal is filed under its run id: no thread to ask.
    owner = (None if thread_id == run_id else await OWNERS.owner_of(sdk, thread_id)) or default_owner

    async def emit_owned(events: list[RunEvent]) -> None:
        await emit(owned(events, owner))

    batches = _Batches(emit_owned)
    try:
        mapper = await _read(sdk, thread_id, run_id, source, batches, on_part)
    except asyncio.CancelledError:
        await batches.cancel()
        raise
    except Exception:
        # What was read before the failure is journaled, as the frames came.
        await batches.finish()
        raise
    await batches.finish()
    return mapper


async def _read(
    sdk: SdkClient,
    thread_id: str,
    run_id: str,
    source: RunSource,
    batches: _Batches,
    on_part: Callable[[], None] | None,
) -> RunMapper | StateMapper:
    capture = source.capture
    mapper: RunMapper | StateMapper
    held: list[RunEvent] | None = None
    if source.checkpoint is not None:
        # Before the run's own records: the branch it is on starts there.
        batches.add([await fork_record(sdk, thread_id, run_id, source.checkpoint)])
    if capture.path == "events":
        mapper = RunMapper(thread_id, run_id)
    else:
        mapper = StateMapper(thread_id, run_id)
        # `run.start` waits for the run's first frame, a while at most: a run that
        # starts is written in one transaction, one still queued soon shows as running.
        batches.add(await _start_state_mapper(sdk, mapper, source))
        batches.hold_start()
        await batches.send()
        if mapper.assistant_id and await PRIVATE_VIEWS.of(sdk, mapper.assistant_id):
            # Its compactions are in its checkpoints alone: the records wait for the run's end.
            held = []
    add = batches.add if held is None else held.extend
    attempts: list[int] = []  # the later attempts the run's metadata frames announced

    async def consume(parts: AsyncIterator[Part | None], more: Callable[[], bool] = lambda: False) -> None:
        # Frames that arrived together are mapped before their records are sent.
        async for part in parts:
            if part is None:  # frames passed over, none waiting
                await batches.send()
                continue
            batches.started()
            if on_part is not None:
                on_part()
            if part.event == "metadata" and (attempt := frame_attempt(part.data) or 1) > 1:
                # The runtime executes the run again: superseded once it ended (below).
                attempts.append(attempt)
                mapper.new_attempt()
            add(mapper.feed(part.event, part.data))
            if not more() or batches.full:
                await batches.send()
        await batches.send()

    streamed = source.client_stream
    if streamed is None and source.client_join is not None:
        streamed = await source.client_join.stream()
    if streamed is not None:
        # The `events` mapper says which frames it would map to nothing: those are not parsed.
        needs = mapper.needs if isinstance(mapper, RunMapper) else None
        await consume(streamed.parts(needs), streamed.ready)
        # A response that ended with no frame of the run past its `metadata` (an
        # empty body, the run's stream lost on its way from another process)
        # showed nothing of it: a run that truly sent nothing more costs a join.
        missed = not streamed.complete or not streamed.fed
        last_id = streamed.last_id
    else:
        missed, last_id = True, None
    if missed:
        # Nobody streamed the run to its end: join it for what is left.
        if source.resumable:
            start = last_id or "0"
        else:
            start = None
        # A join gets only the modes it names: `error` too, or a failure reaches it as a bare end,
        # and `metadata`, which says when the runtime executes the run again.
        modes = (*capture.modes, _ERROR_MODE, "metadata")
        stream = sdk.runs.join_stream(thread_id, run_id, params=join_params(modes), last_event_id=start)
        await consume(_parts_of(stream))
    batches.ending()
    final_state = None
    if missed and not source.resumable:
        # Frames between the client leaving and the join are gone; the state still shows their messages.
        try:
            final_state = (await sdk.threads.get_state(thread_id)).get("values")
        except Exception as exc:  # noqa: BLE001
            logger.warning("journal-bridge: could not read the final state of thread %s: %s", thread_id, exc)
    wanted = mapper.outcome_wanted
    if wanted is None:
        outcome = None
    elif _returned_without_interrupt(wanted, streamed, missed):
        outcome = RunOutcome("success")
    else:
        outcome = await read_outcome(sdk, thread_id, run_id, **wanted)
    ending = mapper.flush(final_state=final_state, outcome=outcome)
    if held is not None and isinstance(mapper, StateMapper):
        conversation = [e for e in ending if e.category in (MESSAGE, MIDDLEWARE)]
        ending = [e for e in ending if e.category not in (MESSAGE, MIDDLEWARE)]
        batches.add(await with_markers(sdk, thread_id, run_id, [*held, *conversation], mapper.compactions))
    if (outcome is not None and outcome.cancelled and outcome.cancel_action == ROLLBACK
            and await rollback_removed_checkpoints(sdk, thread_id, run_id)):
        # The server removed the run and its checkpoints: the thread goes on from before it.
        ending.append(records.rollback(thread_id, run_id))
    if attempts and (fork := await superseding_fork(sdk, thread_id, run_id, max(attempts))) is not None:
        ending.append(fork)
    batches.add(ending)
    return mapper


def _returned_without_interrupt(wanted: Mapping[str, Any], streamed: ClientStream | None, missed: bool) -> bool:
    """Whether the stream alone shows how the run ended: its graph returned, and its
    client saw every `values` or `updates` frame, none of them an interrupt."""
    return (
        wanted.get("status") == "success"
        and streamed is not None
        and not missed
        and streamed.watches_interrupts
        and not streamed.saw_interrupt
    )


async def _parts_of(stream: AsyncIterator[Any]) -> AsyncIterator[Part]:
    async for part in stream:
        yield Part(part.event, part.data, getattr(part, "id", None))
