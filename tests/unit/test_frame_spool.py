"""The frame spool: a streamed run's frames on disk before its client gets them,
and the records a later start maps from the frames a process gone left behind."""

from __future__ import annotations

import os

import orjson
import pytest

from journal_bridge.delivery.frame_spool import FrameSpool, read_runs, recover, recover_records, worth_spooling
from journal_bridge.host.sse import Frame, SSEFrames
from journal_bridge.mapping.state_mapper import StateMapper

THREAD, RUN = "thread-1", "run-1"
RUN_INPUT = {"messages": [{"role": "user", "content": "add 2 and 3"}]}
HUMAN = {"type": "human", "content": "add 2 and 3", "id": "m-human"}
CALL = {"type": "ai", "content": "", "id": "m-call",
        "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}, "id": "call-1", "type": "tool_call"}]}
RESULT = {"type": "tool", "content": "5", "id": "m-result", "tool_call_id": "call-1", "name": "add"}


def sse(event: str, data, frame_id: str | None = None) -> bytes:
    text = b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data)
    return text + (b"\nid: " + frame_id.encode() if frame_id else b"") + b"\n\n"


def frames_of(body: bytes) -> list[Frame]:
    out: list[Frame] = []
    SSEFrames(lambda frame: out.append(frame)).feed(body, final=True)
    return out


class Reader:
    """A run's reader that notes, for every frame it is fed, whether the spool already held it."""

    def __init__(self, spool: FrameSpool) -> None:
        self.spool = spool
        self.fed: list[tuple[str | None, bool]] = []
        self.closed: bool | None = None

    def feed(self, frame: Frame) -> None:
        held = b"".join(p.read_bytes() for p in self.spool.path.glob("slot-*.frames"))
        self.fed.append((frame.event, bytes(frame.raw) in held))

    def close(self, *, complete: bool) -> None:
        self.closed = complete


STATE_STREAM = [
    sse("metadata", {"run_id": RUN}, "1"),
    sse("values", {"messages": [HUMAN]}, "2"),
    sse("messages", [{"content": "tok"}, {}], "3"),
    sse("values", {"messages": [HUMAN, CALL]}, "4"),
    sse("values|tools:1", {"messages": []}, "5"),
    sse("values", {"messages": [HUMAN, CALL, RESULT]}, "6"),
]


async def spooled_run(spool: FrameSpool, stream: list[bytes]) -> Reader:
    reader = Reader(spool)
    frames = spool.spooled(THREAD, RUN, "state", ("values", "custom", "error"), reader,
                           assistant_id="agent", run_input=RUN_INPUT)
    for frame in frames_of(b"".join(stream)):
        frames.feed(frame)
    return reader


async def test_each_frame_the_journal_maps_is_on_disk_before_the_reader_gets_it(tmp_path):
    spool = FrameSpool(tmp_path / "frames")
    assert await spool.open() == []
    reader = await spooled_run(spool, STATE_STREAM)
    # The root's `values` frames are spooled first; the others pass unspooled.
    assert reader.fed == [("metadata", False), ("values", True), ("messages", False), ("values", True),
                          ("values|tools:1", False), ("values", True)]
    await spool.close(keep_frames=True)


async def test_a_later_start_journals_what_the_client_of_a_killed_process_saw(tmp_path):
    killed = FrameSpool(tmp_path / "frames")
    await killed.open()
    await spooled_run(killed, STATE_STREAM)
    killed._close_files()  # what a kill does: the files and the lock go, the frames stay

    later = FrameSpool(tmp_path / "frames")
    left = await later.open()
    [(directory, [run])] = left
    assert (run.thread_id, run.run_id, len(run.frames)) == (THREAD, RUN, 3)

    live = StateMapper(THREAD, RUN)
    expected = live.start(None, None, RUN_INPUT)
    for data in ({"messages": [HUMAN]}, {"messages": [HUMAN, CALL]}, {"messages": [HUMAN, CALL, RESULT]}):
        expected += live.feed("values", data)
    recovered = recover_records(run)
    assert [r.source_key for r in recovered] == [r.source_key for r in expected]
    assert [r.content.get("id") for r in recovered if r.category == "message"] == ["m-human", "m-call", "m-result"]

    written: list = []

    async def write(records):
        written.extend(records)

    async def owner_of(thread_id):
        return "alice"

    assert await recover(later, left, write, owner_of) == [THREAD]
    assert {r.user_id for r in written} == {"alice"} and len(written) == len(recovered)
    assert not directory.exists()  # journaled: the directory of the process gone goes
    assert later.report()["recovered_runs"] == 1
    await later.close(keep_frames=True)
    assert list((tmp_path / "frames").iterdir()) == []


async def test_a_run_done_leaves_nothing_to_recover_and_its_file_goes_to_the_next_run(tmp_path):
    spool = FrameSpool(tmp_path / "frames")
    await spool.open()
    await spooled_run(spool, STATE_STREAM)
    spool.done(RUN)
    assert [p.stat().st_size for p in spool.path.glob("slot-*.frames")] == [0]
    await spooled_run(spool, STATE_STREAM[:2])
    assert len(list(spool.path.glob("slot-*.frames"))) == 1
    spool.done(RUN)
    spool._close_files()
    later = FrameSpool(tmp_path / "frames")
    [(_, runs)] = await later.open()
    assert runs == []
    await later.close(keep_frames=False)


async def test_a_frame_fed_after_the_run_is_done_is_not_spooled(tmp_path):
    spool = FrameSpool(tmp_path / "frames")
    await spool.open()
    reader = Reader(spool)
    frames = spool.spooled(THREAD, RUN, "state", ("values",), reader)
    [first, second] = frames_of(STATE_STREAM[1] + STATE_STREAM[3])
    frames.feed(first)
    spool.done(RUN)  # read elsewhere: the reader stopped, the response goes on
    other = spool.spooled(THREAD, "run-2", "state", ("values",), Reader(spool))
    other.feed(first)
    frames.feed(second)
    assert reader.fed == [("values", True), ("values", False)]
    [run] = read_runs(next(spool.path.glob("slot-*.frames")).read_bytes())
    assert (run.run_id, len(run.frames)) == ("run-2", 1)
    await spool.close(keep_frames=False)


async def test_the_directory_of_a_live_process_is_left_to_it(tmp_path):
    alive = FrameSpool(tmp_path / "frames")
    await alive.open()
    await spooled_run(alive, STATE_STREAM)
    other = FrameSpool(tmp_path / "frames")
    assert await other.open() == []
    assert alive.path.exists()
    await other.close(keep_frames=False)
    await alive.close(keep_frames=False)


async def test_a_frame_cut_short_by_the_kill_is_skipped(tmp_path):
    spool = FrameSpool(tmp_path / "frames")
    await spool.open()
    await spooled_run(spool, STATE_STREAM)
    slot = next(spool.path.glob("slot-*.frames"))
    spool._close_files()
    with open(slot, "ab") as file:
        file.write(b'event: values\ndata: {"messages": [{"type": "ai", "id": "m-ha')
    later = FrameSpool(tmp_path / "frames")
    [(_, [run])] = await later.open()
    assert [r.content.get("id") for r in recover_records(run) if r.category == "message"] == [
        "m-human", "m-call", "m-result"]
    await later.close(keep_frames=False)


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        ({"event": "on_chat_model_stream", "data": {}, "parent_ids": ["r"]}, False),
        ({"event": "on_chain_end", "data": {"output": {"messages": []}}, "parent_ids": ["r"]}, False),
        ({"event": "on_chain_start", "data": {"input": RUN_INPUT}, "run_id": RUN, "parent_ids": []}, True),
        ({"event": "on_chain_end", "data": {"output": {}}, "run_id": RUN, "parent_ids": []}, True),
        ({"event": "on_chat_model_end", "data": {"output": CALL}, "parent_ids": ["r"]}, True),
        ({"event": "on_tool_end", "data": {"output": RESULT}, "parent_ids": ["r"]}, True),
        ({"event": "on_custom_event", "name": "summarization", "data": {}, "parent_ids": ["r"]}, True),
    ],
)
def test_of_events_only_the_callbacks_a_record_is_made_of_are_spooled(data, kept):
    [frame] = frames_of(sse("events", data))
    assert worth_spooling(frame, frozenset({"events", "values"})) is kept
    assert not worth_spooling(frame, frozenset({"values"}))


async def test_a_spool_directory_that_cannot_be_made_leaves_the_spool_off(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    spool = FrameSpool(blocker / "frames")
    assert await spool.open() == []
    reader = Reader.__new__(Reader)
    reader.fed = []
    inner = spool.spooled(THREAD, RUN, "state", ("values",), reader)
    assert inner is reader
    assert not os.path.exists(blocker / "frames")
