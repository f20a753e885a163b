"""Retained frames of the real in-memory runtime's stream manager, dropped as the journal gets them."""

from __future__ import annotations

import uuid

import pytest

from journal_bridge.host import retained_frames

inmem_stream = pytest.importorskip("langgraph_runtime_inmem.inmem_stream")


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


def test_a_release_that_fails_leaves_the_client_stream_and_the_reader_as_they_were(caplog):
    from journal_bridge.host.sse import Frame
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
