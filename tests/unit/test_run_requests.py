"""Run-creating requests: which are rewritten, how, and how run objects are given back."""

from __future__ import annotations

import json

import orjson
import pytest

from journal_bridge.capture.intercept import route_path
from journal_bridge.capture.run_requests import plan_run_request, restore_run_objects
from journal_bridge.mapping.capture_setting import CaptureSetting

AUTO, EVENTS, LEAN = CaptureSetting.AUTO, CaptureSetting.EVENTS, CaptureSetting.LEAN


def _plan(path: str, body, setting=AUTO):
    plans, new_body = plan_run_request("POST", path, json.dumps(body).encode(), setting)
    return (plans[0] if len(plans) == 1 else plans), json.loads(new_body)


@pytest.mark.parametrize(
    "path,kind,stateless",
    [
        ("/threads/t1/runs", "create", False),
        ("/threads/t1/runs/stream", "stream", False),
        ("/threads/t1/runs/wait", "wait", False),
        ("/runs", "create", True),
        ("/runs/stream", "stream", True),
        ("/runs/wait", "wait", True),
    ],
)
def test_every_run_creating_request_is_planned(path, kind, stateless):
    plan, payload = _plan(path, {"assistant_id": "agent", "stream_mode": ["updates"]})
    assert (plan.kind, plan.stateless) == (kind, stateless)
    assert plan.client_modes == ("updates",)
    assert payload["stream_resumable"] is True and plan.forced_resumable


def test_a_client_that_streams_tokens_is_captured_from_events_in_auto():
    plan, payload = _plan("/threads/t1/runs/stream", {"assistant_id": "a", "stream_mode": ["values", "messages-tuple"]})
    assert plan.capture.path == "events"
    assert payload["stream_mode"] == ["values", "messages-tuple", "events"]


@pytest.mark.parametrize("modes", [["values"], ["updates"], ["custom"], ["debug"], ["tasks"], "values"])
def test_any_other_client_is_captured_from_values_and_custom_in_auto(modes):
    plan, payload = _plan("/threads/t1/runs/stream", {"assistant_id": "a", "stream_mode": modes})
    assert plan.capture.path == "state"
    asked = [modes] if isinstance(modes, str) else modes
    assert payload["stream_mode"] == [*asked, *[m for m in ("values", "custom") if m not in asked]]
    assert "events" not in payload["stream_mode"]


def test_the_events_setting_always_adds_events_and_lean_never_does():
    plan, payload = _plan("/threads/t1/runs", {"assistant_id": "a"}, EVENTS)
    assert plan.capture.path == "events" and payload["stream_mode"] == ["values", "events"]
    plan, payload = _plan("/threads/t1/runs", {"assistant_id": "a", "stream_mode": "messages-tuple"}, LEAN)
    assert plan.capture.path == "state" and payload["stream_mode"] == ["messages-tuple", "values", "custom"]


@pytest.mark.parametrize("absent", [{}, {"stream_mode": []}])
def test_no_modes_means_the_servers_default(absent):
    plan, payload = _plan("/threads/t1/runs", {"assistant_id": "a", **absent})
    assert plan.client_modes == ("values",)
    assert payload["stream_mode"] == ["values", "custom"]


def test_a_client_that_asked_for_everything_keeps_its_body_byte_for_byte():
    body = b'{"assistant_id": "a",  "stream_mode": ["values", "custom"], "stream_resumable": true}'
    plans, new_body = plan_run_request("POST", "/threads/t/runs/stream", body, LEAN)
    assert new_body is body and not plans[0].changed


def test_batch_plans_every_run():
    plans, payload = _plan("/runs/batch", [{"assistant_id": "a"}, {"assistant_id": "b", "stream_mode": "updates"}])
    assert [p["stream_mode"] for p in payload] == [["values", "custom"], ["updates", "values", "custom"]]
    assert [p.kind for p in plans] == ["batch", "batch"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"assistant_id": "a", "stream_mode": ""}',
        b'{"assistant_id": "a", "stream_mode": null}',
        b'{"assistant_id": "a", "stream_mode": "bogus"}',
        b'{"assistant_id": "a", "stream_mode": ["values", "bogus"]}',
        b'{"assistant_id": "a", "stream_mode": [1]}',
        b'{"assistant_id": "a", "stream_resumable": 0}',
        b'{"assistant_id": "a", "stream_resumable": null}',
        b'\xef\xbb\xbf{"assistant_id": "a"}',
        '{"assistant_id": "a"}'.encode("utf-16"),
        b"[" * 3000 + b"]" * 3000,
        b"not json",
    ],
)
def test_a_body_the_server_may_read_otherwise_is_forwarded_untouched(body):
    assert plan_run_request("POST", "/threads/t1/runs/stream", body, AUTO) is None


@pytest.mark.parametrize(
    "method,path,body",
    [
        ("GET", "/threads/t1/runs", b"{}"),
        ("POST", "/threads/t1/runs/crons", b"{}"),
        ("POST", "/runs/crons", b"{}"),
        ("POST", "/runs/cancel", b"{}"),
        ("POST", "/threads/t1/runs/r1/cancel", b"{}"),
        ("POST", "/threads", b"{}"),
        ("POST", "/runs/batch", b"{}"),
        ("POST", "/runs/batch", b"[]"),
    ],
)
def test_other_requests_are_left_alone(method, path, body):
    assert plan_run_request(method, path, body, AUTO) is None


def _run(run_id: str, modes, resumable: bool) -> dict:
    return {"run_id": run_id, "thread_id": "t", "kwargs": {"stream_mode": modes, "resumable": resumable, "x": 1.5}}


def test_run_objects_get_the_clients_own_values_back():
    plan, _ = _plan("/threads/t/runs", {"assistant_id": "a", "stream_mode": ["updates"]})
    body = orjson.dumps([_run("r1", ["updates", "values", "custom"], True), _run("r2", ["values", "custom"], True)])
    restored = orjson.loads(restore_run_objects(body, {"r1": plan}))
    assert restored[0]["kwargs"] == {"stream_mode": ["updates"], "resumable": False, "x": 1.5}
    assert restored[1]["kwargs"]["stream_mode"] == ["values", "custom"]  # not ours: untouched


def test_a_run_object_the_plugin_did_not_change_is_sent_as_it_came():
    plan, _ = _plan("/threads/t/runs", {"assistant_id": "a", "stream_mode": ["values", "custom"], "stream_resumable": True})
    body = orjson.dumps(_run("r1", ["values", "custom"], True))
    assert restore_run_objects(body, {"r1": plan}) is None
    assert restore_run_objects(b'{"run_id": "r1"}', {"r1": plan}) is None  # not the server's own bytes


def test_route_path_is_relative_to_the_mount_point():
    assert route_path({"path": "/api/threads/t/runs", "root_path": "/api"}) == "/threads/t/runs"
    assert route_path({"path": "/threads/t/runs", "root_path": ""}) == "/threads/t/runs"
    assert route_path({"path": "/apix/runs", "root_path": "/api"}) == "/apix/runs"


def test_a_run_object_whose_input_had_a_nul_gets_the_clients_values_back_byte_for_byte():
    # The server stores a NUL as U+FFFD and writes that escaped; orjson writes it raw.
    (plan,), _ = plan_run_request("POST", "/threads/t/runs", b'{"assistant_id": "a"}', CaptureSetting.AUTO)
    body = (
        b'{"run_id":"r1","kwargs":{"input":{"messages":[{"content":"a\\ufffdb"}]},'
        b'"stream_mode":["values","custom"],"resumable":true}}'
    )
    restored = restore_run_objects(body, {"r1": plan})
    assert restored == body.replace(b'["values","custom"]', b'["values"]').replace(b"true", b"false")
    # Both forms in one body: which was which cannot be told, so it goes as it came.
    assert restore_run_objects(body.replace(b'"r1"', '"r1\ufffd"'.encode()), {"r1": plan}) is None


def test_runs_that_asked_for_the_same_modes_share_what_their_plans_keep():
    # The plugin keeps the plans of its last ten thousand runs: equal modes and
    # captures are one object each, not one per run.
    bodies = [json.dumps({"assistant_id": "agent", "input": {"n": i}, "stream_mode": ["updates", "messages-tuple"]})
              for i in range(3)]
    plans = [plan_run_request("POST", "/threads/t1/runs/stream", body.encode(), CaptureSetting.AUTO)[0][0]
             for body in bodies]
    assert plans[0].client_modes == ("updates", "messages-tuple") and plans[0].capture.added == ("events", "values")
    assert all(p.client_modes is plans[0].client_modes and p.capture is plans[0].capture for p in plans)
    assert plans[0].kind is plans[1].kind
    assert not hasattr(plans[0], "__dict__") and not hasattr(plans[0].capture, "__dict__")
