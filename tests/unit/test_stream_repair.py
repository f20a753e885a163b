"""Which frames of a run's replay a client whose stream the runtime ended already got."""

from __future__ import annotations

from journal_bridge.capture.stream_repair import StreamWatch, replay_scope
from journal_bridge.host.sse import Frame


def _frame(event: str, frame_id: str | None) -> Frame:
    return Frame(b"", b"\n\n", event, b"{}", frame_id)


def _watch(*frames: tuple[str, str | None]) -> StreamWatch:
    watch = StreamWatch()
    for event, frame_id in frames:
        watch.saw(event, frame_id)
    return watch


def test_an_empty_stream_is_replayed_from_the_first_frame() -> None:
    watch = _watch()
    assert watch.cursor() == "0"
    repeat = watch.repeats()
    assert [repeat(_frame(e, i)) for e, i in [("metadata", "5-0"), ("values", "5-0")]] == [False, False]


def test_a_metadata_only_stream_gets_everything_after_its_metadata() -> None:
    watch = _watch(("metadata", "1700000000000-0"))
    assert not watch.past_metadata
    # Every frame of one millisecond has the same id in the in-memory runtime: the replay starts below it.
    assert watch.cursor() == f"1699999999999-{2**64 - 1}"
    repeat = watch.repeats()
    replay = [("metadata", "1700000000000-0"), ("values", "1700000000000-0"), ("values", "1700000000001-0")]
    assert [repeat(_frame(e, i)) for e, i in replay] == [True, False, False]


def test_frames_the_client_got_with_its_last_id_are_skipped_as_often_as_it_got_them() -> None:
    watch = _watch(("metadata", "7-0"), ("values", "8-3"), ("updates", "8-3"))
    assert watch.past_metadata
    assert watch.cursor() == "8-2"
    repeat = watch.repeats()
    replay = [("values", "8-3"), ("updates", "8-3"), ("values", "8-3"), ("values", "9-0")]
    assert [repeat(_frame(e, i)) for e, i in replay] == [True, True, False, False]
    watch.saw("values", "9-0")  # what the replay sends on does not change what it skips
    assert repeat(_frame("values", "9-0")) is False


def test_a_heartbeat_is_no_frame_of_the_run() -> None:
    watch = _watch(("metadata", "1-0"))
    watch_before = watch.frames
    watch.saw(None, None)
    assert watch.frames == watch_before
    assert watch.repeats()(Frame(b": heartbeat", b"\n\n", None, None, None)) is True


def test_the_replay_is_the_clients_own_request_turned_into_a_join() -> None:
    scope = {
        "type": "http", "method": "POST", "path": "/api/threads/t/runs/stream", "root_path": "/api",
        "query_string": b"x=1",
        "headers": [(b"authorization", b"Bearer a"), (b"content-length", b"10"), (b"last-event-id", b"3-0")],
    }
    joined = replay_scope(scope, "t", "r", "5-0")
    assert (joined["method"], joined["path"], joined["query_string"]) == ("GET", "/api/threads/t/runs/r/stream", b"")
    assert joined["headers"] == [
        (b"authorization", b"Bearer a"), (b"accept", b"text/event-stream"), (b"last-event-id", b"5-0"),
    ]
