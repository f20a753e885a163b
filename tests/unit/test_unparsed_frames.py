"""The `events` reader leaves unparsed the frames its mapper would map to nothing.

Node starts and ends carry the whole state and are most of an `events`
stream's bytes. `RunMapper.needs` tells from a frame's bytes whether the
mapper would map it; the client's stream passes over the others unparsed.
These tests hold that the records are the same either way, on the bundled
agent's real events (tools, compactions) written as the server writes them,
and on the shapes where a skipped frame would lose something.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import orjson
import pytest

from journal_bridge.host.sse import Frame, SSEFrames
from journal_bridge.mapping import batches as batching
from journal_bridge.mapping import reader
from journal_bridge.mapping.capture_setting import CaptureSetting, plan_capture
from journal_bridge.mapping.events_mapper import RunMapper, map_parts
from journal_bridge.model.envelope import RunEvent
from tests.unit.test_mapping import _capture, _graph

SERVER = orjson.dumps  # how the server writes a frame's data: no spaces, keys in order
SPACED = lambda data: json.dumps(data).encode()  # noqa: E731 - the same JSON, spaced


def _records(events: list[RunEvent]) -> list[tuple]:
    return [(e.event_type, e.source_key, json.dumps(e.content, sort_keys=True, default=str)) for e in events]


def _map_as_read(thread_id: str, run_id: str, parts, write=SERVER) -> tuple[list[RunEvent], list[str]]:
    """Map `parts` as the client-stream reader does: each frame's bytes asked first.
    Returns the records and the callback names of the frames passed over."""
    mapper = RunMapper(thread_id, run_id)
    out: list[RunEvent] = []
    skipped: list[str] = []
    for event, data in parts:
        raw = write(data)
        if event == "events" and not mapper.needs(raw):
            skipped.append(data["event"])
            continue
        out.extend(mapper.feed(event, orjson.loads(raw)))
    return out + mapper.flush(), skipped


@pytest.fixture(scope="module")
def conversation():
    async def run():
        graph = _graph()
        thread_id = str(uuid.uuid4())
        texts = ["hello", "add 2 and 3", "weather in Paris", "one more", "and again", "what time is it", "last"]
        return thread_id, [await _capture(graph, thread_id, text) for text in texts]

    return asyncio.run(run())


@pytest.mark.parametrize("write", [SERVER, SPACED], ids=["server", "spaced"])
def test_every_run_maps_to_the_same_records_with_its_unneeded_frames_unparsed(conversation, write):
    thread_id, runs = conversation
    skipped_kinds: set[str] = set()
    compacted = 0
    for run_id, parts in runs:
        expected = map_parts(thread_id, run_id, parts)
        got, skipped = _map_as_read(thread_id, run_id, parts, write)
        assert _records(got) == _records(expected)
        skipped_kinds.update(skipped)
        compacted += any(e.event_type == "middleware:summarize" for e in got)
    assert compacted, "the script should compact at least once"
    # Node starts once the input has its ids, and node ends that remove nothing.
    assert {"on_chain_start", "on_chain_end"} <= skipped_kinds
    assert "on_chat_model_stream" in skipped_kinds  # a callback no record comes from


def test_most_node_bytes_go_unparsed(conversation):
    thread_id, runs = conversation
    total = parsed = 0
    for run_id, parts in runs:
        mapper = RunMapper(thread_id, run_id)
        for event, data in parts:
            raw = SERVER(data)
            if data.get("event") in ("on_chain_start", "on_chain_end"):
                total += len(raw)
            if mapper.needs(raw):
                if data.get("event") in ("on_chain_start", "on_chain_end"):
                    parsed += len(raw)
                mapper.feed(event, orjson.loads(raw))
    assert parsed < total / 2, (parsed, total)


def _event(kind: str, run_id: str, parents: list[str], data: dict, **extra) -> dict:
    return {"event": kind, "data": data, "name": extra.pop("name", "node"), "tags": [], "run_id": run_id,
            "metadata": {"langgraph_checkpoint_ns": "node:1", **extra}, "parent_ids": parents}


def _human(text: str, message_id: str | None) -> dict:
    return {"type": "human", "content": text, "id": message_id}


def test_no_node_start_or_end_is_parsed_once_the_root_started_and_states_mark_compactions():
    """The states come as `values`: a node's input and update, whole states each, are never needed."""
    mapper = RunMapper("t", "r")
    history = [_human(f"m{i}", f"id{i}") for i in range(4)]
    start = _event("on_chain_start", "r", [], {"input": {"messages": [_human("new", None)]}}, name="LangGraph")
    mapper.feed("events", start)
    assert [r.event_type for r in mapper.feed("values", {"messages": [*history, _human("new", "id4")]})] == [
        "llm.human.input"
    ]
    node_start = _event("on_chain_start", "n1", ["r"], {"input": {"messages": [*history, _human("new", "id4")]}})
    assert not mapper.needs(SERVER(node_start))
    update = {"messages": [{"type": "remove", "id": "__remove_all__"}, {"type": "ai", "content": "summary", "id": "s1"}]}
    compacting = _event("on_chain_end", "n2", ["r"], {"input": {"messages": history}, "output": update})
    assert not mapper.needs(SERVER(compacting)) and not mapper.needs(SPACED(compacting))
    summary = {"type": "human", "content": "the summary", "id": "s1", "additional_kwargs": {"lc_source": "summarization"}}
    records = mapper.feed("values", {"messages": [summary, _human("new", "id4")]})
    assert [r.event_type for r in records] == ["middleware:summarize"]
    assert records[0].content["changes"]["replaced_count"] == 4


def test_a_root_known_only_by_its_run_id_has_every_chain_end_read():
    """A root whose events have parents (its graph called inside another run) is
    told by its run id, which its end's bytes cannot show: every chain end is read."""
    mapper = RunMapper("t", "r")
    mapper.feed("events", _event("on_chain_start", "r", ["outer"], {"input": {"messages": []}}, name="LangGraph"))
    end = _event("on_chain_end", "r", ["outer"], {"output": {"messages": [_human("x", "x1")]}})
    assert mapper.needs(SERVER(end))
    mapper.feed("events", end)
    assert [r.event_type for r in mapper.flush()] == ["run.end"]


def test_before_the_root_starts_every_start_is_read_and_bad_bytes_are_parsed():
    mapper = RunMapper("t", "r")
    assert mapper.needs(SERVER(_event("on_chain_start", "n", ["r"], {"input": {}})))
    for raw in (b"not json", b"[1, 2]", b'{"data": {}, "event": "on_chain_end"}', b"{}"):
        assert mapper.needs(raw)
    mapper.feed("events", "not an object")
    assert mapper.malformed == 1
    assert not mapper.needs(SERVER(_event("on_chat_model_stream", "m", ["r"], {"chunk": {}})))
    assert not mapper.needs(SERVER(_event("on_retriever_end", "m", ["r"], {"output": []})))
    assert not mapper.needs(SERVER(_event("on_tool_start", "m", ["r"], {"input": {}})))
    for kind in ("on_tool_end", "on_chat_model_end", "on_custom_event", "on_chain_error"):
        assert mapper.needs(SERVER(_event(kind, "x", ["r"], {})))


async def _next(parts):
    return await asyncio.wait_for(anext(parts), 5)


def _frame(data: dict | None, event: str = "events", frame_id: str | None = None) -> Frame:
    raw = orjson.dumps(data) if data is not None else None
    return Frame(b"", b"\n\n", event, raw, frame_id)


async def test_frames_passed_over_with_none_waiting_let_the_reader_send_what_it_keeps():
    stream = reader.ClientStream(plan_capture(["events"], CaptureSetting.parse("auto")), ("events",))
    stream.feed(_frame({"run_id": "r"}, "metadata"))
    stream.feed(_frame(_event("on_chain_start", "r", [], {"input": {}})))
    stream.feed(_frame(_event("on_chain_start", "n", ["r"], {"input": {}})))
    stream.feed(_frame(_event("on_chain_start", "n2", ["r"], {"input": {}})))
    parts = stream.parts(lambda raw: b'"parent_ids":[]' in raw)
    assert (await _next(parts)).event == "metadata"
    assert (await _next(parts)).data["run_id"] == "r"
    # Two frames passed over, then nothing waits: None, not a wait on the next frame.
    assert await _next(parts) is None
    waiting = asyncio.ensure_future(anext(parts))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    stream.feed(_frame(_event("on_chain_start", "n3", ["r"], {"input": {}})))
    stream.feed(_frame(_event("on_chain_end", "r", [], {"output": {}})))
    assert (await asyncio.wait_for(waiting, 5)).data["event"] == "on_chain_end"  # one passed over, another waiting: no None
    stream.close(complete=True)
    assert [p async for p in parts] == []


async def test_a_streamed_runs_answer_is_written_before_its_next_read_frame_comes(monkeypatch):
    """The answer is written with the state that holds it, not held for the run's next frame."""
    monkeypatch.setattr(batching, "_GATHER_SECONDS", 0.0)
    capture = plan_capture(["events"], CaptureSetting.parse("auto"))
    stream = reader.ClientStream(capture, ("events", "values"))
    written: list[list[str]] = []

    async def emit(events: list[RunEvent]) -> None:
        written.append([e.event_type for e in events])

    source = reader.RunSource(capture=capture, client_stream=stream, client_modes=("events", "values"))
    reading = asyncio.ensure_future(reader.read_run(None, "r", "r", source, emit))  # stateless: no thread to ask
    stream.feed(_frame({"run_id": "r"}, "metadata"))
    stream.feed(_frame(_event("on_chain_start", "r", [], {"input": {"messages": []}}, name="LangGraph")))
    stream.feed(_frame({"messages": []}, "values"))
    answer = {"type": "ai", "content": "hi", "id": "a1"}
    stream.feed(_frame(_event("on_chat_model_end", "m", ["r", "n"], {"output": answer})))
    stream.feed(_frame(_event("on_chain_end", "n", ["r"], {"output": {"messages": [answer]}})))
    stream.feed(_frame({"messages": [answer]}, "values"))
    for _ in range(100):
        if any("llm.ai.response" in batch for batch in written):
            break
        await asyncio.sleep(0.01)
    assert any("llm.ai.response" in batch for batch in written), written
    assert not reading.done()
    stream.feed(_frame(_event("on_chain_end", "r", [], {"output": {"messages": [answer]}})))
    stream.close(complete=True)
    await asyncio.wait_for(reading, 5)
    assert [t for batch in written for t in batch] == ["run.start", "llm.ai.response", "run.end"]


def _sse(event: str, data: dict, frame_id: str | None = None, newline: bytes = b"\r\n") -> bytes:
    """A frame as the server writes it: `event`, `data`, then `id` when resumable."""
    frame = b"event: " + event.encode() + newline + b"data: " + SERVER(data) + newline
    if frame_id is not None:
        frame += b"id: " + frame_id.encode() + newline
    return frame + newline


def _through_client_stream(
    body: bytes, chunk: int, passing_over: bool
) -> tuple[bytes, reader.ClientStream, int]:
    """`body` through the response filter of a streamed run whose client asked for
    useStream's modes under `auto` (the journal reads `events`, the client does not);
    with the number of frames passed over unparsed."""
    client_modes = ("values", "messages-tuple", "custom")
    capture = plan_capture(client_modes, CaptureSetting.AUTO)
    stream = reader.ClientStream(capture, client_modes)

    def on_frame(frame: Frame) -> bytes | None:
        stream.feed(frame)
        return b"" if frame.mode in capture.added else None

    over = 0

    def passes_over(body: bytes, start: int, end: int) -> bool:
        nonlocal over
        passed = stream.passes_over(body, start, end)
        over += passed
        return passed

    frames = SSEFrames(on_frame, passes_over if passing_over else None)
    out = b"".join(frames.feed(body[i : i + chunk], final=i + chunk >= len(body)) for i in range(0, len(body), chunk))
    return out, stream, over


def _kept(stream: reader.ClientStream) -> list[tuple]:
    return [(frame.event, frame.data, frame.id) for frame in stream._frames]


@pytest.mark.parametrize("resumable", [False, True], ids=["plain", "with ids"])
@pytest.mark.parametrize("chunk", [97, 4096, 1 << 20])
def test_token_frames_dropped_unparsed_leave_the_journal_and_the_client_what_they_get_parsed(
    conversation, resumable, chunk
):
    _, runs = conversation
    passed_over = 0
    for run_id, parts in runs:
        frames = [_sse("metadata", {"run_id": run_id}, "0-0" if resumable else None)]
        for index, (event, data) in enumerate(parts):
            frame_id = f"{index + 1}-0" if resumable else None
            frames.append(_sse("values" if index % 9 == 0 else event, data, frame_id))  # the client's modes too
        body = b"".join(frames)
        passed, journal, over = _through_client_stream(body, chunk, passing_over=True)
        parsed, reference, _ = _through_client_stream(body, chunk, passing_over=False)
        passed_over += over
        assert passed == parsed  # the client gets the same bytes
        assert (journal.fed, journal.last_id, journal.saw_interrupt) == (
            reference.fed, reference.last_id, reference.saw_interrupt)
        assert _kept(journal) == _kept(reference)  # and the journal reads the same frames
    unmapped = ("on_chat_model_stream", "on_chain_stream", "on_chat_model_start", "on_llm_stream", "on_llm_start")
    callbacks = [data.get("event") for _, parts in runs for index, (_, data) in enumerate(parts) if index % 9]
    assert "on_chat_model_stream" in callbacks, "the script should stream tokens"
    # Every such callback goes unparsed, its id read from its bytes.
    assert passed_over == sum(name in unmapped for name in callbacks)


TOKEN = {"event": "on_chat_model_stream", "data": {"chunk": {"content": "a"}}}


@pytest.mark.parametrize(
    ("frame", "over", "frame_id"),
    [
        (_sse("events", TOKEN), True, None),
        (_sse("events", TOKEN, newline=b"\n"), True, None),
        (_sse("events", TOKEN, "1733-7"), True, "1733-7"),  # a resumable run's: its id read
        (_sse("events", TOKEN, "9-0", newline=b"\n"), True, "9-0"),
        (_sse("events", TOKEN, "9-0", newline=b"\r"), True, "9-0"),
        (_sse("events|tools:1", {"event": "on_llm_stream", "data": {}}), True, None),  # a subgraph's
        (_sse("events", {"event": "on_chain_end", "data": {}}), False, None),  # mapped
        (_sse("events", {"event": "on_tool_start", "data": {}}, "2-0"), False, None),
        (_sse("values", TOKEN), False, None),
        (_sse("eventsx", TOKEN), False, None),
        (b'event: events\r\ndata: {"event":"on_chat_model_stream",\r\ndata: "x":1}\r\n\r\n', False, None),
        (b'event: events\r\ndata: {"event":"on_chat_model_stream"}\r\nid: 1\r\nretry: 5\r\n\r\n', False, None),
        (b'event: events\r\nid: 1\r\ndata: {"event":"on_chat_model_stream"}\r\n\r\n', False, None),
        (b'data: {"event":"on_chat_model_stream"}\r\n\r\n', False, None),  # no event name
    ],
)
def test_a_frame_is_passed_over_unparsed_only_when_its_bytes_show_feed_would_keep_nothing(frame, over, frame_id):
    terminator = next(t for t in (b"\r\n\r\n", b"\n\n", b"\r\r") if frame.endswith(t))
    end = 2 + len(frame) - len(terminator)
    padded = b"xx" + frame + b"event: values\r\ndata: {}\r\n\r\n"  # the frame anywhere in the body
    assert reader.unmapped_callback_bytes(padded, 2, end) == (over, frame_id)
    stream = reader.ClientStream(plan_capture(("values",), CaptureSetting.EVENTS), ("values",))
    assert stream.passes_over(padded, 2, end) is over
    assert stream.fed is over  # a frame passed over still counts as a frame of the run
    assert stream.last_id == frame_id
    if over:  # what `feed` makes of the parsed frame
        parsed = reader.ClientStream(plan_capture(("values",), CaptureSetting.EVENTS), ("values",))
        parsed.feed(Frame.parse(padded[2:end], terminator))
        assert (parsed.fed, parsed.last_id, parsed.ready()) == (True, frame_id, False)
