"""Retained frames of the real in-memory runtime's stream manager, dropped as the journal gets them."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import uuid
from pathlib import Path

import pytest

from journal_bridge.host import retained_frames

inmem_stream = pytest.importorskip("langgraph_runtime_inmem.inmem_stream")


@pytest.fixture
def codec(monkeypatch):
    """The runtime's stream codec, loaded on its own: its package reads the
    server's configuration on import, which a unit test has not."""
    name = "langgraph_api.utils.stream_codec"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.find_spec("langgraph_api")
        assert spec is not None and spec.submodule_search_locations
        path = Path(next(iter(spec.submodule_search_locations))) / "utils" / "stream_codec.py"
        loaded = importlib.util.spec_from_file_location(name, path)
        assert loaded is not None and loaded.loader is not None
        module = importlib.util.module_from_spec(loaded)
        monkeypatch.setitem(sys.modules, name, module)
        loaded.loader.exec_module(module)
    return module


@pytest.fixture
def manager():
    manager = inmem_stream.get_stream_manager()
    yield manager
    manager.message_stores.clear()


async def _put(manager, thread_id: str, run_id: str, count: int) -> list[str]:
    ids = []
    for index in range(count):
        message = inmem_stream.Message(topic=f"run:{run_id}:stream".encode(), data=f"frame {index}".encode())
        await manager.put(run_id, thread_id, message, resumable=True)
        ids.append(message.id.decode())
    return ids


async def test_frames_go_as_they_are_held_and_a_later_replay_still_works(manager):
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    release = retained_frames.frames_releaser(thread_id, run_id)
    assert release is not None
    ids = await _put(manager, thread_id, run_id, 5)
    stored = manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)]
    # Frames of one millisecond share an id; a join after a frame replays those above its id.
    assert release(ids[1]) == sum(1 for i in ids if i <= ids[1]) >= 2
    # In place: the runtime goes on appending to the list it holds.
    assert manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)] is stored
    ids += await _put(manager, thread_id, run_id, 2)
    assert [m.id.decode() for m in stored] == [i for i in ids[:5] if i > ids[1]] + ids[5:]
    # What a join after a held frame replays is still there, all of it.
    replayed = [m.id.decode() for m in manager.restore_messages(run_id, thread_id, ids[3])]
    assert replayed == [i for i in ids if i > ids[3]]
    release(ids[3])
    assert [m.id.decode() for m in stored] == replayed


async def test_a_frame_id_below_the_retained_ones_drops_nothing(manager):
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    release = retained_frames.frames_releaser(thread_id, run_id)
    await _put(manager, thread_id, run_id, 3)
    assert release("0-0") == 0
    assert len(manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)]) == 3
    # What is left goes when the run is read to its end.
    assert retained_frames.release_run_frames(thread_id, run_id, modes=None) == 3


async def test_a_run_without_retained_frames_is_left_alone(manager):
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    release = retained_frames.frames_releaser(thread_id, run_id)
    assert release("1-0") == 0
    # Asking created no entry in the runtime's stores.
    assert uuid.UUID(thread_id) not in manager.message_stores


def test_other_runtimes_keep_no_frames_to_release(monkeypatch):
    monkeypatch.setenv("LANGGRAPH_RUNTIME_EDITION", "postgres")
    assert retained_frames.frames_releaser(str(uuid.uuid4()), str(uuid.uuid4())) is None


def test_a_release_that_fails_leaves_the_client_stream_and_the_reader_as_they_were(caplog, monkeypatch):
    from journal_bridge.host.sse import Frame

    monkeypatch.setattr(retained_frames, "RELEASE_EVERY", 1)
    from journal_bridge.mapping.capture_setting import CaptureSetting, plan_capture
    from journal_bridge.mapping.reader import ClientStream
    from journal_bridge.server import _ReleasedWhenHeld

    calls = []

    def broken(frame_id: str) -> int:
        calls.append(frame_id)
        raise RuntimeError("the runtime keeps its frames otherwise")

    stream = ClientStream(plan_capture(["values"], CaptureSetting.AUTO), ("values",))
    journal = type("JournalStandIn", (), {"frames_released": 0})()
    fed = _ReleasedWhenHeld(stream, broken, journal)
    for index in range(3):
        fed.feed(Frame(b"", b"\n\n", "values", b'{"messages": []}', f"{index}-0"))
    assert stream.last_id == "2-0" and stream.ready()
    # Tried once, then left to the run's end.
    assert calls == ["0-0"] and journal.frames_released == 0
    assert "could not release" in caplog.text


async def _publish(manager, codec, thread_id: str, run_id: str, modes: list[str]) -> list[tuple[str, str]]:
    """Frames of these modes, encoded as the runtime stores a run's frames; their (mode, id)."""
    sent = []
    for index, mode in enumerate(modes):
        data = codec.STREAM_CODEC.encode(mode, f'{{"n": {index}}}'.encode())
        message = inmem_stream.Message(topic=f"run:{run_id}:stream".encode(), data=data)
        await manager.put(run_id, thread_id, message, resumable=True)
        sent.append((mode, message.id.decode()))
    return sent


def _modes_and_ids(stored) -> list[tuple[str | None, str]]:
    from journal_bridge.host.compat import frame_mode

    return [(frame_mode(m), m.id.decode()) for m in stored]


async def test_for_a_run_its_client_made_resumable_only_the_added_modes_frames_go(manager, codec, monkeypatch):
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    looked_at = []
    real_mode = retained_frames.frame_mode
    monkeypatch.setattr(retained_frames, "frame_mode", lambda m: looked_at.append(m) or real_mode(m))
    release = retained_frames.frames_releaser(thread_id, run_id, modes=frozenset({"events"}))
    assert release is not None
    first = await _publish(manager, codec, thread_id, run_id, ["values", "events", "events", "values", "events"])
    stored = manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)]
    held = first[3][1]
    assert release(held) == sum(1 for mode, i in first if mode == "events" and i <= held) >= 2
    assert manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)] is stored
    later = await _publish(manager, codec, thread_id, run_id, ["events", "values"])
    release(later[-1][1])
    every = first + later
    # The client's own frames all stay, in order; none of the added mode's it could not replay does.
    assert _modes_and_ids(stored) == [(m, i) for m, i in every if m != "events"]
    replayed = [m.id.decode() for m in manager.restore_messages(run_id, thread_id, "0")]
    assert replayed == [i for m, i in every if m != "events"]
    # Each frame was looked at once, however many releases came.
    assert len(looked_at) == len(every)
    # What is left of the added mode goes at the run's end, the client's frames stay.
    assert retained_frames.release_run_frames(thread_id, run_id, modes=frozenset({"events"})) == 0
    assert len(stored) == 3


async def test_frames_of_the_added_modes_after_the_held_one_stay_for_a_join_after_it(manager, codec):
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    release = retained_frames.frames_releaser(thread_id, run_id, modes=frozenset({"events"}))
    sent = await _publish(manager, codec, thread_id, run_id, ["events", "values"])
    await asyncio.sleep(0.002)  # the next frames in another millisecond
    sent += await _publish(manager, codec, thread_id, run_id, ["events", "events"])
    release(sent[1][1])
    stored = manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)]
    assert _modes_and_ids(stored) == [sent[1], sent[2], sent[3]]
    replayed = [m.id.decode() for m in manager.restore_messages(run_id, thread_id, sent[1][1])]
    assert replayed == [sent[2][1], sent[3][1]]


async def test_a_token_frame_passed_over_unparsed_lets_its_retained_frames_go(manager, codec, monkeypatch):
    """A streamed run the plugin made resumable: the token frames only the journal
    asked for are dropped from their bytes, never parsed, and go from the runtime too."""
    monkeypatch.setattr(retained_frames, "RELEASE_EVERY", 1)
    from journal_bridge.host.sse import SSEFrames
    from journal_bridge.mapping.capture_setting import CaptureSetting, plan_capture
    from journal_bridge.mapping.reader import ClientStream
    from journal_bridge.server import _ReleasedWhenHeld

    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    sent = await _publish(manager, codec, thread_id, run_id, ["events", "events"])
    await asyncio.sleep(0.002)  # the next frame in another millisecond
    sent += await _publish(manager, codec, thread_id, run_id, ["events"])
    modes = ("values", "messages-tuple", "custom")
    stream = ClientStream(plan_capture(modes, CaptureSetting.AUTO), modes)
    journal = type("JournalStandIn", (), {"frames_released": 0})()
    reader = _ReleasedWhenHeld(stream, retained_frames.frames_releaser(thread_id, run_id), journal)
    parsed = []

    def on_frame(frame):
        parsed.append(frame.id)
        reader.feed(frame)
        return b"" if frame.mode == "events" else None

    # As the middleware builds it: the reader's own `passes_over`, when it offers one.
    frames = SSEFrames(on_frame, getattr(reader, "passes_over", None))
    token = b'event: events\r\ndata: {"event":"on_chat_model_stream","data":{"chunk":"a"}}\r\nid: %s\r\n\r\n'
    assert frames.feed(token % sent[1][1].encode(), final=False) == b""
    assert parsed == [] and not stream.ready() and stream.fed
    assert stream.last_id == sent[1][1]
    stored = manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)]
    assert [m.id.decode() for m in stored] == [sent[2][1]]
    assert journal.frames_released == 2
    # A frame the journal reads is parsed and fed as before, and its retained copy goes.
    tool_end = b'event: events\r\ndata: {"event":"on_tool_end","data":{}}\r\nid: %s\r\n\r\n' % sent[2][1].encode()
    assert frames.feed(tool_end, final=False) == b""
    assert parsed == [sent[2][1]] and stream.ready()
    assert list(stored) == [] and journal.frames_released == 3


async def test_retained_frames_go_a_few_dozen_at_a_time_and_the_rest_when_the_response_ends(manager, codec, monkeypatch):
    """One release per `retained_frames.RELEASE_EVERY` frames the journal holds, passed over or fed;
    what is held since the last one goes when the client's response ends."""
    from journal_bridge import server
    from journal_bridge.host.sse import SSEFrames
    from journal_bridge.mapping.capture_setting import CaptureSetting, plan_capture
    from journal_bridge.mapping.reader import ClientStream

    monkeypatch.setattr(retained_frames, "RELEASE_EVERY", 3)
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    sent = []
    for _ in range(5):  # each frame in a millisecond of its own
        sent += await _publish(manager, codec, thread_id, run_id, ["events"])
        await asyncio.sleep(0.002)
    modes = ("values", "messages-tuple", "custom")
    stream = ClientStream(plan_capture(modes, CaptureSetting.AUTO), modes)
    journal = type("JournalStandIn", (), {"frames_released": 0})()
    calls = []
    release = retained_frames.frames_releaser(thread_id, run_id)

    def counted(frame_id: str) -> int:
        calls.append(frame_id)
        return release(frame_id)

    reader = server._ReleasedWhenHeld(stream, counted, journal)
    frames = SSEFrames(lambda frame: reader.feed(frame) or b"", reader.passes_over)
    token = b'event: events\r\ndata: {"event":"on_chat_model_stream","data":{"chunk":"a"}}\r\nid: %s\r\n\r\n'
    tool_end = b'event: events\r\ndata: {"event":"on_tool_end","data":{}}\r\nid: %s\r\n\r\n'
    stored = manager.message_stores[uuid.UUID(thread_id)][uuid.UUID(run_id)]
    frames.feed(token % sent[0][1].encode(), final=False)
    frames.feed(token % sent[1][1].encode(), final=False)
    # Held, not yet released: the runtime keeps them a little longer.
    assert calls == [] and len(stored) == 5 and stream.last_id == sent[1][1]
    frames.feed(tool_end % sent[2][1].encode(), final=False)  # the third: a frame fed, not passed over
    assert calls == [sent[2][1]] and [m.id.decode() for m in stored] == [sent[3][1], sent[4][1]]
    frames.feed(token % sent[3][1].encode(), final=False)
    assert len(calls) == 1
    reader.close(complete=True)
    # The response ended: what the journal held goes; the frame it never got stays for its join.
    assert calls == [sent[2][1], sent[3][1]] and [m.id.decode() for m in stored] == [sent[4][1]]
    assert journal.frames_released == 4 and stream.complete is True
    reader.close(complete=True)
    assert len(calls) == 2
