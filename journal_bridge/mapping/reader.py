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
mapped meanwhile make the next batch (`Batches`), so a run costs the store a
few transactions instead of one per frame. When the stream is over it asks
the server how the run ended (`journal_bridge.host.outcome`) for what the stream
cannot say: a cancel, a failure whose `error` part it missed, the interrupts
of a paused run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from journal_bridge.host.compat import assistant_uuid, join_params
from journal_bridge.host.modes import ERROR_MODE
from journal_bridge.host.outcome import ROLLBACK, RunOutcome, read_outcome, rollback_removed_checkpoints
from journal_bridge.host.assistant_answers import OncePerAssistant
from journal_bridge.host.sdk import SdkClient
from journal_bridge.mapping.attempts import frame_attempt, superseding_fork
from journal_bridge.mapping.batches import Batches, Emit
from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.mapping.client_join import ClientJoin
from journal_bridge.mapping.client_stream import ClientStream, Part, unmapped_callback_bytes
from journal_bridge.mapping.events_mapper import RunMapper
from journal_bridge.mapping.forks import fork_record, read_checkpoint
from journal_bridge.mapping.owners import OWNER_KEY, OWNERS, ThreadOwners, owned
from journal_bridge.mapping.private_views import PRIVATE_VIEWS, with_markers
from journal_bridge.mapping.state_mapper import StateMapper
from journal_bridge.model import records
from journal_bridge.model.envelope import MESSAGE, MIDDLEWARE, RunEvent

logger = logging.getLogger(__name__)

# What a run is read with lives beside this module; the names stay importable from here.
__all__ = [
    "OWNERS",
    "OWNER_KEY",
    "ClientJoin",
    "ClientStream",
    "Part",
    "RunSource",
    "ThreadOwners",
    "fork_record",
    "owned",
    "read_checkpoint",
    "read_run",
    "unmapped_callback_bytes",
]


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
    run_assistant = (run or {}).get("assistant_id")
    run_input = kwargs.get("input")
    if run_input is None and run:
        # A resume (`Command(resume=...)`) has a command instead of an input.
        run_input = kwargs.get("command")
    return mapper.start(graph, str(run_assistant) if run_assistant else None, run_input)


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

    batches = Batches(emit_owned)
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
    batches: Batches,
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
        modes = (*capture.modes, ERROR_MODE, "metadata")
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
