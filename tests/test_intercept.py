"""The run-observing middleware: which requests it rewrites and what the client gets back."""

from __future__ import annotations

import json

import pytest

from journal_bridge.intercept import RunRequestPlan, _SSEFilter, plan_run_request, route_path


def _plan(path: str, body, method: str = "POST"):
    plans, new_body = plan_run_request(method, path, json.dumps(body).encode())
    return (plans[0] if len(plans) == 1 else plans), new_body


@pytest.mark.parametrize(
    "path,kind",
    [
        ("/threads/t1/runs", "create"),
        ("/threads/t1/runs/stream", "stream"),
        ("/threads/t1/runs/wait", "wait"),
        ("/runs", "create"),
        ("/runs/stream", "stream"),
        ("/runs/wait", "wait"),
    ],
)
def test_run_creating_requests_get_events_and_resumable(path, kind):
    plan, body = _plan(path, {"assistant_id": "agent", "stream_mode": ["values", "messages-tuple"]})
    payload = json.loads(body)
    assert plan.kind == kind
    assert payload["stream_mode"] == ["values", "messages-tuple", "events"]
    assert payload["stream_resumable"] is True
    assert plan.client_modes == {"values", "messages-tuple"}
    assert plan.added_mode and plan.forced_resumable


def test_default_mode_is_the_servers_default():
    plan, body = _plan("/threads/t1/runs", {"assistant_id": "agent"})
    assert json.loads(body)["stream_mode"] == ["values", "events"]
    assert plan.client_modes == {"values"}


@pytest.mark.parametrize("empty", [[], ""])
def test_an_empty_mode_means_the_servers_default(empty):
    plan, body = _plan("/threads/t1/runs/stream", {"assistant_id": "agent", "stream_mode": empty})
    assert json.loads(body)["stream_mode"] == ["values", "events"]
    assert plan.client_modes == {"values"}


@pytest.mark.parametrize("bad", [5, {"a": 1}, [1, "values"], [None]])
def test_a_mode_the_server_would_reject_is_forwarded_unchanged(bad):
    body = json.dumps({"assistant_id": "agent", "stream_mode": bad}).encode()
    assert plan_run_request("POST", "/threads/t1/runs/stream", body) is None


def test_a_string_mode_and_an_existing_events_mode():
    plan, body = _plan("/threads/t1/runs/stream", {"assistant_id": "a", "stream_mode": "events", "stream_resumable": True})
    assert json.loads(body)["stream_mode"] == "events"
    assert not plan.added_mode and not plan.forced_resumable


def test_batch_rewrites_every_run():
    plans, body = _plan("/runs/batch", [{"assistant_id": "a"}, {"assistant_id": "b", "stream_mode": "updates"}])
    payload = json.loads(body)
    assert [p["stream_mode"] for p in payload] == [["values", "events"], ["updates", "events"]]
    assert [p.kind for p in plans] == ["batch", "batch"]
    assert [p.client_modes for p in plans] == [{"values"}, {"updates"}]


@pytest.mark.parametrize(
    "method,path,body",
    [
        ("GET", "/threads/t1/runs", b"{}"),
        ("POST", "/threads/t1/runs/crons", b"{}"),
        ("POST", "/runs/crons", b"{}"),
        ("POST", "/runs/cancel", b"{}"),
        ("POST", "/threads/t1/runs/r1/cancel", b"{}"),
        ("POST", "/threads", b"{}"),
        ("POST", "/threads/t1/runs", b"not json"),
        ("POST", "/threads/t1/runs", b"[1, 2]"),
        ("POST", "/runs/batch", b"{}"),
        ("POST", "/runs/batch", b"[]"),
    ],
)
def test_other_requests_are_left_alone(method, path, body):
    assert plan_run_request(method, path, body) is None


FRAMES = (
    b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\nid: 1-0\r\n\r\n"
    b"event: events\r\ndata: {\"event\":\"on_chain_start\",\"metadata\":{\"thread_id\":\"t9\"}}\r\nid: 1-0\r\n\r\n"
    b": heartbeat\r\n\r\n"
    b"event: values\r\ndata: {\"messages\":[]}\r\nid: 2-0\r\n\r\n"
    b"event: events\r\ndata: {\"event\":\"on_chain_end\"}\r\nid: 2-0\r\n\r\n"
    b"event: messages|sub\r\ndata: [1]\r\nid: 3-0\r\n\r\n"
)


def _filtered(sse: _SSEFilter, chunk_size: int) -> bytes:
    out = b""
    for start in range(0, len(FRAMES), chunk_size):
        chunk = FRAMES[start : start + chunk_size]
        out += sse.feed(chunk, final=start + chunk_size >= len(FRAMES))
    return out


def _drop_events(event, data):
    return not (event or "").startswith("events")


@pytest.mark.parametrize("chunk_size", [1, 7, 64, len(FRAMES)])
def test_sse_filter_gives_the_client_only_what_it_asked_for(chunk_size):
    assert _filtered(_SSEFilter(_drop_events, strip_ids=True), chunk_size) == (
        b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\n\r\n"
        b": heartbeat\r\n\r\n"
        b"event: values\r\ndata: {\"messages\":[]}\r\n\r\n"
        b"event: messages|sub\r\ndata: [1]\r\n\r\n"
    )


def test_sse_filter_keeps_ids_unless_told_and_sees_each_frames_data():
    seen = []

    def keep(event, data):
        seen.append((event, data))
        return True

    out = _filtered(_SSEFilter(keep, strip_ids=False), 5)
    assert out == FRAMES
    assert seen[1] == ("events", b' {"event":"on_chain_start","metadata":{"thread_id":"t9"}}')
    assert seen[2] == (None, None)


def test_a_filter_that_fails_passes_the_frame_through():
    def broken(event, data):
        raise RuntimeError("boom")

    assert _filtered(_SSEFilter(broken, strip_ids=True), 11) == FRAMES


def test_route_path_is_relative_to_the_mount_point():
    assert route_path({"path": "/api/threads/t/runs", "root_path": "/api"}) == "/threads/t/runs"
    assert route_path({"path": "/threads/t/runs", "root_path": ""}) == "/threads/t/runs"
    assert route_path({"path": "/apix/runs", "root_path": "/api"}) == "/apix/runs"
