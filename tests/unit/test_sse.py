"""SSE frames on their way to the client: cut at any chunk boundary, dropped or sent on."""

from __future__ import annotations

import random

import pytest

from journal_bridge.host.sse import Frame, SSEFrames

FRAMES = (
    b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\nid: 1-0\r\n\r\n"
    b"event: events\r\ndata: {\"event\":\"on_chain_start\",\"metadata\":{\"thread_id\":\"t9\"}}\r\nid: 1-0\r\n\r\n"
    b": heartbeat\r\n\r\n"
    b"event: values\r\ndata: {\"messages\":[]}\r\nid: 2-0\r\n\r\n"
    b"event: events\r\ndata: {\"event\":\"on_chain_end\"}\r\nid: 2-0\r\n\r\n"
    b"event: messages|sub\r\ndata: [1]\r\nid: 3-0\r\n\r\n"
)


def _through(on_frame, chunk_size: int) -> bytes:
    frames = SSEFrames(on_frame)
    out = b""
    for start in range(0, len(FRAMES), chunk_size):
        out += frames.feed(FRAMES[start : start + chunk_size], final=start + chunk_size >= len(FRAMES))
    return out


def _drop_events(frame: Frame) -> bytes:
    return b"" if frame.mode == "events" else frame.to_bytes(strip_ids=True)


@pytest.mark.parametrize("chunk_size", [1, 7, 64, len(FRAMES)])
def test_frames_of_a_mode_are_dropped_and_ids_stripped_at_any_chunk_size(chunk_size):
    assert _through(_drop_events, chunk_size) == (
        b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\n\r\n"
        b": heartbeat\r\n\r\n"
        b"event: values\r\ndata: {\"messages\":[]}\r\n\r\n"
        b"event: messages|sub\r\ndata: [1]\r\n\r\n"
    )


def test_frames_pass_byte_for_byte_and_their_fields_are_read():
    seen: list[Frame] = []

    def keep(frame: Frame) -> bytes:
        seen.append(frame)
        return frame.to_bytes()

    assert _through(keep, 5) == FRAMES
    assert (seen[1].event, seen[1].data, seen[1].id) == (
        "events",
        b'{"event":"on_chain_start","metadata":{"thread_id":"t9"}}',
        "1-0",
    )
    assert (seen[2].event, seen[2].data) == (None, None)
    assert seen[5].mode == "messages"


def test_data_spread_over_several_lines_is_joined():
    frame = Frame.parse(b"event: values\ndata: {\"a\":\ndata: 1}", b"\n\n")
    assert frame.data == b'{"a":\n1}'


def test_a_callback_that_fails_passes_the_frame_through():
    def broken(frame: Frame) -> bytes:
        raise RuntimeError("boom")

    assert _through(broken, 11) == FRAMES


MIXED = (
    b"event: values\ndata: 1\n\n"
    b"event: values\r\ndata: 2\r\n\r\n\n"
    b"event: custom\ndata: 3\n\n"
    b": ping\r\n\r\n"
    b"event: values\r\ndata: 4"
)


@pytest.mark.parametrize("split", range(len(MIXED) + 1))
def test_frames_end_at_the_first_blank_line_of_either_kind_wherever_the_body_is_cut(split):
    seen: list[tuple[bytes, bytes]] = []

    def keep(frame: Frame) -> bytes:
        seen.append((frame.raw, frame.terminator))
        return frame.to_bytes()

    frames = SSEFrames(keep)
    out = frames.feed(MIXED[:split], final=False) + frames.feed(MIXED[split:], final=True)
    assert out == MIXED
    assert seen == [
        (b"event: values\ndata: 1", b"\n\n"),
        (b"event: values\r\ndata: 2", b"\r\n\r\n"),
        (b"\nevent: custom\ndata: 3", b"\n\n"),
        (b": ping", b"\r\n\r\n"),
        (b"event: values\r\ndata: 4", b""),
    ]


def _frames_by_definition(body: bytes) -> list[tuple[bytes, bytes]]:
    """A body's frames by the definition: each ends at the earliest `\r\n\r\n` or `\n\n`."""
    found, start = [], 0
    while True:
        ends = [(at, end) for end in (b"\r\n\r\n", b"\n\n") if (at := body.find(end, start)) >= 0]
        if not ends:
            break
        at, end = min(ends)
        found.append((body[start:at], end))
        start = at + len(end)
    if start < len(body):
        found.append((body[start:], b""))
    return found


@pytest.mark.parametrize("seed", range(40))
def test_frames_are_cut_as_the_definition_cuts_them_in_any_chunks(seed):
    """Bodies of line breaks of both kinds, cut into chunks anywhere."""
    rng = random.Random(seed)
    for _ in range(50):
        body = bytes(rng.choice(b"\r\n\r\na:") for _ in range(rng.randint(0, 60)))
        cuts = sorted(rng.sample(range(len(body) + 1), min(len(body) + 1, rng.randint(0, 6))))
        chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
        seen: list[tuple[bytes, bytes]] = []

        def keep(frame: Frame) -> None:
            seen.append((bytes(frame.raw), frame.terminator))

        frames = SSEFrames(keep)
        out = b"".join(frames.feed(chunk, final=i == len(chunks) - 1) for i, chunk in enumerate(chunks))
        assert out == body
        assert seen == _frames_by_definition(body), (body, chunks)


def test_a_frame_in_many_chunks_is_scanned_once_not_once_per_chunk():
    """Each chunk's search starts where the held-back part could end a frame: the
    total scanned stays near the frame's size however many chunks it comes in."""

    class CountingBytes(bytes):
        scanned = 0

        def find(self, sub, start=0, end=None):
            end = len(self) if end is None else min(end, len(self))
            found = bytes.find(self, sub, start, end)
            CountingBytes.scanned += (end if found < 0 else found + len(sub)) - start  # what it read
            return found

        def __add__(self, other):
            return CountingBytes(bytes(self) + bytes(other))

        def __getitem__(self, index):
            item = bytes.__getitem__(self, index)
            return CountingBytes(item) if isinstance(item, bytes) else item

    frame = b"event: values\r\ndata: " + b"x" * 100_000 + b"\r\n\r\n"
    seen: list[Frame] = []
    frames = SSEFrames(lambda f: seen.append(f) or f.to_bytes())
    frames._buffer = CountingBytes()
    out = b"".join(frames.feed(CountingBytes(frame[i : i + 1000]), final=False) for i in range(0, len(frame), 1000))
    assert out == frame and len(seen) == 1 and len(seen[0].data) == 100_000
    # Two terminators searched for, then the frame's line ends (LF, CR) once:
    # about four times the frame, not ~100 times it.
    assert CountingBytes.scanned < 5 * len(frame)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"run_id": "r1", "attempt": 1}', "r1"),
        (b'{"run_id": 7}', "7"),
        (b'{"run_id": ""}', None),
        (b'{"other": "r1"}', None),
        (b'["run_id"]', None),
        (b"not json", None),
        (None, None),
    ],
)
def test_a_frames_json_field_is_read_as_text_or_none(data, expected):
    assert Frame(b"", b"\n\n", "metadata", data, None).field("run_id") == expected


def test_a_body_whose_frames_all_go_on_as_they_came_is_sent_on_itself():
    """No copy of a large frame for the client's sake: the chunk itself goes on."""
    seen: list[Frame] = []
    frames = SSEFrames(lambda f: seen.append(f) or None)
    chunk = FRAMES + b"event: values\r\ndata: " + b"x" * 100_000 + b"\r\n\r\n"
    assert frames.feed(chunk, final=False) is chunk
    assert len(seen) == 7 and len(seen[-1].data) == 100_000
    assert bytes(seen[1].raw) == b'event: events\r\ndata: {"event":"on_chain_start","metadata":{"thread_id":"t9"}}\r\nid: 1-0'


@pytest.mark.parametrize("chunk_size", [1, 7, 64, len(FRAMES)])
def test_frames_sent_on_as_they_came_keep_their_place_between_changed_ones(chunk_size):
    def drop_events_strip_values(frame: Frame) -> bytes | None:
        if frame.mode == "events":
            return b""
        return frame.sent_on(strip_ids=frame.mode == "values")

    assert _through(drop_events_strip_values, chunk_size) == (
        b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\nid: 1-0\r\n\r\n"
        b": heartbeat\r\n\r\n"
        b"event: values\r\ndata: {\"messages\":[]}\r\n\r\n"
        b"event: messages|sub\r\ndata: [1]\r\nid: 3-0\r\n\r\n"
    )


def test_a_field_name_is_the_whole_name_before_the_colon():
    frame = Frame.parse(b"database: 1\nevent: values\ndata\nidentity: x\nid: 7", b"\n\n")
    assert (frame.event, frame.data, frame.id) == ("values", b"", "7")
    lone_cr = Frame.parse(b"event: values\rdata: 2\rid: 3", b"\n\n")
    assert (lone_cr.event, lone_cr.data, lone_cr.id) == ("values", b"2", "3")


def test_a_frame_passed_over_is_dropped_unparsed_and_one_whose_check_fails_is_parsed():
    seen: list[Frame] = []
    asked: list[bytes] = []

    def keep(frame: Frame) -> None:
        seen.append(frame)
        return None

    def over(body: bytes, start: int, end: int) -> bool:
        asked.append(bytes(body[start:end]))
        if b"on_chain_start" in body[start:end]:
            raise RuntimeError("boom")  # a check that fails: the frame goes to `on_frame`
        return b"on_chain_end" in body[start:end]

    frames = SSEFrames(keep, over)
    out = b"".join(frames.feed(FRAMES[i : i + 9], final=i + 9 >= len(FRAMES)) for i in range(0, len(FRAMES), 9))
    # Each complete frame is asked about once, as its bytes, before it is parsed.
    assert asked == [frame for frame in FRAMES.split(b"\r\n\r\n") if frame]
    assert out == FRAMES.replace(b"event: events\r\ndata: {\"event\":\"on_chain_end\"}\r\nid: 2-0\r\n\r\n", b"")
    assert [frame.event for frame in seen] == ["metadata", "events", None, "values", "messages|sub"]
