"""A run's stream the runtime ended early, completed: which replayed frames the client already got,
and what the middleware sends it, around a minimal ASGI server."""

from __future__ import annotations

import orjson
import pytest
from httpx import ASGITransport, AsyncClient

from journal_bridge.capture.intercept import RunObserverMiddleware
from journal_bridge.capture.stream_repair import StreamWatch, replay_scope
from journal_bridge.host.sse import Frame
from journal_bridge.mapping.capture_setting import CaptureSetting
from journal_bridge.mapping.reader import ClientStream
from tests.harness.asgi import request_body


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


# -- the middleware completing a stream, around a minimal ASGI server ----------------

THREAD = "00000000-0000-0000-0000-00000000000a"
RUN = "00000000-0000-0000-0000-00000000000b"
_META = b'event: metadata\r\ndata: {"run_id":"' + RUN.encode() + b'"}\r\nid: 5-0\r\n\r\n'
_VALUES = b'event: values\r\ndata: {"n":1}\r\nid: 5-0\r\n\r\n'
_CUSTOM = b'event: custom\r\ndata: {"c":1}\r\nid: 6-0\r\n\r\n'
_ANSWER = b'event: values\r\ndata: {"n":2}\r\nid: 7-0\r\n\r\n'


class _Server:
    """Streams a created run's first `sent` frames and ends; a join replays the
    run's frames after `Last-Event-ID` the way the in-memory runtime does (ids
    greater than the one named, as text)."""

    def __init__(self, sent: int) -> None:
        self.frames = [_META, _VALUES, _CUSTOM, _ANSWER]
        self.sent = sent
        self.joins: list[str] = []
        self.created: dict = {}

    async def __call__(self, scope, receive, send) -> None:
        body = await request_body(receive)
        headers = dict(scope["headers"])
        if scope["method"] == "POST":
            self.created = orjson.loads(body)
            frames = self.frames[: self.sent]
        else:
            cursor = headers[b"last-event-id"].decode()
            self.joins.append(cursor)
            frames = [f for f in self.frames if f.split(b"id: ")[1].split(b"\r")[0].decode() > cursor]
        location = f"/threads/{THREAD}/runs/{RUN}".encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"content-location", location)]})
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _Sink:
    def __init__(self) -> None:
        self.streams: list[ClientStream] = []
        self.replays: list[tuple[str, int]] = []

    def replayed(self, run_id: str, missed: int) -> None:
        self.replays.append((run_id, missed))

    def read_client_stream(self, thread_id, run_id, plan):
        stream = ClientStream(plan.capture, plan.client_modes)
        self.streams.append(stream)
        return stream

    def unplanned(self, reason: str) -> None:  # pragma: no cover
        raise AssertionError(reason)


async def _post(server: _Server, sink: _Sink, **asked) -> bytes:
    middleware = RunObserverMiddleware(server, lambda scope: sink, CaptureSetting.LEAN)
    async with AsyncClient(transport=ASGITransport(app=middleware), base_url="http://server") as http:
        response = await http.post(f"/threads/{THREAD}/runs/stream",
                                   json={"assistant_id": "agent", "input": {}, "stream_mode": "values", **asked})
    assert response.status_code == 200
    return response.content


@pytest.mark.parametrize("sent", [0, 1])
async def test_a_stream_with_nothing_past_metadata_gets_the_rest_once_filtered(sent) -> None:
    server, sink = _Server(sent), _Sink()
    body = await _post(server, sink)
    assert server.created["stream_mode"] == ["values", "custom"] and server.created["stream_resumable"] is True
    # Each frame once, the added mode's frame left out, no `id:` line: the client did not ask for them.
    assert body == b"".join(f.replace(b"id: 5-0\r\n", b"").replace(b"id: 7-0\r\n", b"")
                            for f in (_META, _VALUES, _ANSWER))
    assert server.joins == (["0"] if sent == 0 else [f"4-{2**64 - 1}"])
    assert sink.replays == [(RUN, 4 - sent)]
    # The journal got every frame, the added one too, and needs no join of its own.
    assert sink.streams[0].fed and sink.streams[0].complete and sink.streams[0].last_id == "7-0"


async def test_a_client_that_asked_for_a_resumable_run_gets_the_ids() -> None:
    server, sink = _Server(1), _Sink()
    body = await _post(server, sink, stream_resumable=True)
    assert body == _META + _VALUES + _ANSWER


async def test_a_complete_stream_is_not_joined() -> None:
    server, sink = _Server(4), _Sink()
    body = await _post(server, sink)
    assert server.joins == [] and sink.replays == []
    assert body.count(b"event: ") == 3
