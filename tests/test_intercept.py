"""The run-observing middleware: which requests it rewrites and what the client gets back."""

from __future__ import annotations

import json

import pytest

from journal_bridge.intercept import RunRequestPlan, _SSEFilter, plan_run_request


def _plan(path: str, body, method: str = "POST"):
    return plan_run_request(method, path, json.dumps(body).encode())


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
    assert plan.client_modes == [{"values", "messages-tuple"}]
    assert plan.added_mode and plan.forced_resumable
    assert plan.thread_id == ("t1" if path.startswith("/threads") else None)


def test_default_mode_is_the_servers_default():
    plan, body = _plan("/threads/t1/runs", {"assistant_id": "agent"})
    assert json.loads(body)["stream_mode"] == ["values", "events"]
    assert plan.client_modes == [{"values"}]


def test_a_string_mode_and_an_existing_events_mode():
    plan, body = _plan("/threads/t1/runs/stream", {"assistant_id": "a", "stream_mode": "events", "stream_resumable": True})
    assert json.loads(body)["stream_mode"] == "events"
    assert not plan.added_mode and not plan.forced_resumable


def test_batch_rewrites_every_run():
    plan, body = _plan("/runs/batch", [{"assistant_id": "a"}, {"assistant_id": "b", "stream_mode": "updates"}])
    payload = json.loads(body)
    assert [p["stream_mode"] for p in payload] == [["values", "events"], ["updates", "events"]]
    assert plan.kind == "batch"


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


def _filtered(plan: RunRequestPlan, chunk_size: int, on_thread=None) -> bytes:
    sse = _SSEFilter(plan, on_thread)
    out = b""
    for start in range(0, len(FRAMES), chunk_size):
        chunk = FRAMES[start : start + chunk_size]
        out += sse.feed(chunk, final=start + chunk_size >= len(FRAMES))
    return out


@pytest.mark.parametrize("chunk_size", [1, 7, 64, len(FRAMES)])
def test_sse_filter_gives_the_client_only_what_it_asked_for(chunk_size):
    plan = RunRequestPlan(kind="stream", thread_id="t", client_modes=[{"values", "messages"}],
                          added_mode=True, forced_resumable=True)
    assert _filtered(plan, chunk_size) == (
        b"event: metadata\r\ndata: {\"run_id\":\"r\"}\r\n\r\n"
        b": heartbeat\r\n\r\n"
        b"event: values\r\ndata: {\"messages\":[]}\r\n\r\n"
        b"event: messages|sub\r\ndata: [1]\r\n\r\n"
    )


def test_sse_filter_keeps_ids_the_client_asked_for_and_learns_the_thread():
    plan = RunRequestPlan(kind="stream", thread_id=None, client_modes=[{"values"}],
                          added_mode=True, forced_resumable=False)
    seen = []
    out = _filtered(plan, 5, seen.append)
    assert seen == ["t9"]
    assert b"id: 2-0" in out and b"on_chain_start" not in out
