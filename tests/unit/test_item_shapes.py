"""Every answer of the journal's routes is valid against the schema the OpenAPI document gives it.

The schemas in `journal_bridge.web.openapi` are the only description of the
history API's shapes. Real journals (a compacted conversation, a real agent's
thread compacted twice, a regenerated turn, runs that failed, were cancelled
or paused) are written to a SQLite file and served; each answer is checked
against the schema of its route and status in the document built from the
same routes, so a field the projection adds without the schema allowing it, or
one the schema requires and an answer lacks, fails here.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from journal_bridge.capture import backfill
from journal_bridge.model import records
from journal_bridge.model.envelope import make_event
from journal_bridge.projection.history import project
from journal_bridge.store import open_store
from journal_bridge.web import routes
from journal_bridge.web.openapi import SCHEMAS, document
from journal_bridge.web.routes import journal_routes
from tests.harness.seed import BRANCHED_THREAD, THREAD_ID, ServedApp, branched_records, journal_app, seed_agent_file, seed_file

SPEC = document(journal_routes())
AGENT_THREAD = "thread-agent"
OUTCOMES_THREAD = "thread-outcomes"
# The state the server gives for checkpoint `cp-h2` of the branched thread:
# the second question asked, before either answer.
CHECKPOINT_STATE = {
    "values": {"messages": [{"id": "h1"}, {"id": "a1"}, {"id": "h2"}]},
    "metadata": {"run_id": "run-b"},
    "next": ["model"],
    "checkpoint": {"checkpoint_id": "cp-h2"},
    "created_at": "2026-12-01T00:00:00+00:00",
}


def _outcome_records() -> list[Any]:
    """A run that failed, one that was cancelled and one paused at an interrupt, each after a question."""

    def question(run: str, n: int) -> Any:
        return make_event(thread_id=OUTCOMES_THREAD, run_id=run, event_type="llm.human.input",
                          content={"type": "human", "id": f"q{n}", "content": f"question {n}"})

    def outcome(run: str, draft: Any) -> Any:
        return records.record(OUTCOMES_THREAD, run, draft)

    return [
        question("run-failed", 1),
        outcome("run-failed", records.run_error({"error": "ToolFailure", "message": "the tool broke"})),
        question("run-cancelled", 2),
        outcome("run-cancelled", records.run_cancelled(None)),
        question("run-paused", 3),
        outcome("run-paused", records.run_interrupt(records.interrupt_values([{"id": "i1", "value": {"ask": "ok?"}}]))),
        outcome("run-paused", records.run_end({"messages": []})),
    ]


async def _write(store_url: str, events: list[Any]) -> list[Any]:
    async with open_store(store_url) as store:
        return await store.put_batch(events)


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The store's URL and the records of each thread written to it."""
    import asyncio

    url = f"sqlite:///{tmp_path_factory.mktemp('shapes') / 'journal.db'}"
    written = {
        THREAD_ID: seed_file(url),
        AGENT_THREAD: seed_agent_file(url, AGENT_THREAD),
        BRANCHED_THREAD: asyncio.run(_write(url, branched_records())),
        OUTCOMES_THREAD: asyncio.run(_write(url, _outcome_records())),
    }
    return {"url": url, "records": written}


@pytest.fixture(scope="module")
def http(journal) -> Any:
    with ServedApp(journal_app(journal["url"])) as served, httpx.Client(base_url=served.url, timeout=30) as client:
        yield client


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of `schema` whose `#/components/...` references resolve in the document."""
    return Draft202012Validator({"components": SPEC["components"], "allOf": [schema]})


def _errors(schema: dict[str, Any], value: Any, at: str = "") -> list[str]:
    """What in `value` breaks `schema`, each at its place; for an item that fits no
    kind of item, what breaks the kind its `type` names (the schema's discriminator)."""
    found = []
    for error in _validator(schema).iter_errors(value):
        place = "/".join([at, *map(str, error.absolute_path)]).strip("/")
        mapping = error.schema.get("discriminator", {}).get("mapping", {}) if isinstance(error.schema, dict) else {}
        kind = error.instance.get("type") if isinstance(error.instance, dict) else None
        if kind in mapping:
            found += _errors({"$ref": mapping[kind]}, error.instance, place)
        else:
            found.append(f"{place or '(answer)'}: {error.message}")
    return found


def _route(path: str) -> str:
    """The document's path template that `path` (a request path) matches."""
    parts = path.split("/")
    for template in SPEC["paths"]:
        pattern = template.split("/")
        if len(pattern) == len(parts) and all(p == q or p.startswith("{") for p, q in zip(pattern, parts, strict=True)):
            return template
    raise AssertionError(f"{path}: no route of the document matches")


def _checked(response: httpx.Response, status: int) -> Any:
    """The JSON answer, after checking its status and its shape against the document."""
    request = response.request
    assert response.status_code == status, (request.url, response.text)
    operation = SPEC["paths"][_route(request.url.path)][request.method.lower()]
    described = operation["responses"].get(str(status))
    assert described is not None, f"{request.method} {request.url.path}: {status} is not described"
    body = response.json()
    errors = _errors(described["content"]["application/json"]["schema"], body)
    assert not errors, f"{request.method} {request.url}: the answer does not fit its schema:\n" + "\n".join(errors)
    return body


def _whole_history(http: httpx.Client, thread_id: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a branch, read backwards a few at a time, each page checked."""
    items: list[dict[str, Any]] = []
    cursor: int | None = None
    while True:
        query = {"limit": 3, **params, **({"before_seq": cursor} if cursor is not None else {})}
        page = _checked(http.get(f"/journal/threads/{thread_id}/messages", params=query), 200)
        items = page["data"] + items
        cursor = page["next_before_seq"]
        if cursor is None:
            return items


def test_the_schemas_are_valid_json_schemas_and_every_reference_resolves():
    for name, schema in SCHEMAS.items():
        Draft202012Validator.check_schema(schema)
        # A reference that names no component fails here rather than passing silently.
        _validator({"$ref": f"#/components/schemas/{name}"}).is_valid({})


def test_every_kind_of_item_in_the_history_fits_its_schema(http):
    kinds: Counter[str] = Counter()
    statuses = set()
    for thread_id in (THREAD_ID, AGENT_THREAD, BRANCHED_THREAD, OUTCOMES_THREAD):
        whole = _checked(http.get(f"/journal/threads/{thread_id}/messages", params={"limit": 500}), 200)["data"]
        assert _whole_history(http, thread_id) == whole
        kinds.update(item["type"] for item in whole)
        statuses.update(item["status"] for item in whole if item["type"] == "run_status")
    assert set(kinds) == {"human", "ai", "tool", "summary_marker", "run_status"}
    assert statuses == {"failed", "cancelled", "interrupted"}


def test_the_items_of_a_real_agent_carry_tool_calls_and_summaries(http):
    whole = _checked(http.get(f"/journal/threads/{AGENT_THREAD}/messages", params={"limit": 500}), 200)["data"]
    assert any(item.get("tool_calls") for item in whole if item["type"] == "ai")
    assert any(item.get("tool_call_id") for item in whole if item["type"] == "tool")
    markers = [item for item in whole if item["type"] == "summary_marker"]
    assert len(markers) > 1 and all(marker["summary"] for marker in markers)


def test_forward_pages_fit_their_schema(http):
    page = _checked(http.get(f"/journal/threads/{THREAD_ID}/messages", params={"limit": 4, "after_seq": 0}), 200)
    while page["has_more"]:
        page = _checked(
            http.get(f"/journal/threads/{THREAD_ID}/messages", params={"limit": 4, "after_seq": page["next_after_seq"]}),
            200,
        )
    # Past the newest item: an empty page, still of the same shape.
    _checked(http.get(f"/journal/threads/{THREAD_ID}/messages", params={"after_seq": page["next_after_seq"]}), 200)


def test_each_branch_and_its_fork_point_fit_their_schemas(http, monkeypatch):
    current = _whole_history(http, BRANCHED_THREAD)
    abandoned = _whole_history(http, BRANCHED_THREAD, run_id="run-b")
    annotated = [item["branch"] for item in current + abandoned if "branch" in item]
    assert sorted(branch["index"] for branch in annotated) == [1, 2]

    class Threads:
        async def get_state(self, thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
            if checkpoint_id == "cp-h2":
                return CHECKPOINT_STATE
            return {"values": {}, "checkpoint": None, "created_at": None}

    class Client:
        threads = Threads()

    monkeypatch.setattr(routes, "in_process_client", lambda headers: Client())
    as_of = _whole_history(http, BRANCHED_THREAD, checkpoint_id="cp-h2")
    assert [item["id"] for item in as_of] == ["h1", "a1", "h2"]
    markers = f"/journal/threads/{BRANCHED_THREAD}/markers"
    _checked(http.get(markers, params={"checkpoint_id": "cp-h2"}), 200)
    _checked(http.get(markers, params={"checkpoint_id": "cp-unknown"}), 404)
    _checked(http.get(f"/journal/threads/{BRANCHED_THREAD}/messages", params={"checkpoint_id": "cp-unknown"}), 404)


def test_markers_pages_fit_their_schema(http):
    for thread_id in (THREAD_ID, AGENT_THREAD):
        page = _checked(http.get(f"/journal/threads/{thread_id}/markers", params={"limit": 1}), 200)
        assert page["data"] and page["data"][0]["type"] == "summary_marker"
        while page["next_before_seq"] is not None:
            page = _checked(
                http.get(f"/journal/threads/{thread_id}/markers", params={"limit": 1, "before_seq": page["next_before_seq"]}),
                200,
            )
    empty = _checked(http.get(f"/journal/threads/{BRANCHED_THREAD}/markers", params={"run_id": "run-b"}), 200)
    assert empty["data"] == []


def test_the_threads_index_fits_its_schema(http):
    index = _checked(http.get("/journal/threads"), 200)
    assert {thread["thread_id"] for thread in index["data"]} == {THREAD_ID, AGENT_THREAD, BRANCHED_THREAD, OUTCOMES_THREAD}
    _checked(http.get("/journal/threads", params={"q": "weather"}), 200)
    _checked(http.get("/journal/threads", params={"q": "nothing anybody wrote"}), 200)


def test_runs_and_their_records_fit_their_schemas(http, journal):
    run_ids = list(dict.fromkeys(record.run_id for record in journal["records"][OUTCOMES_THREAD]))
    summaries = _checked(
        http.get(f"/journal/threads/{OUTCOMES_THREAD}/runs", params={"run_ids": ",".join([*run_ids, "run-unknown"])}), 200
    )["data"]
    assert [summary["run_id"] for summary in summaries] == [*run_ids, "run-unknown"]
    for run_id in {record.run_id for record in journal["records"][AGENT_THREAD]}:
        _checked(http.get(f"/journal/threads/{AGENT_THREAD}/runs/{run_id}/events", params={"limit": 5}), 200)
    _checked(http.get(f"/journal/threads/{AGENT_THREAD}/runs", params={"run_ids": run_id}), 200)


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/journal/threads/thread-nobody-wrote/messages", {}, 404),
        ("/journal/threads/thread-nobody-wrote/markers", {}, 404),
        ("/journal/threads/thread-nobody-wrote/runs", {"run_ids": "r"}, 404),
        ("/journal/threads/thread-nobody-wrote/runs/r/events", {}, 404),
        (f"/journal/threads/{BRANCHED_THREAD}/messages", {"run_id": "run-nobody-ran"}, 404),
        (f"/journal/threads/{THREAD_ID}/messages", {"before_seq": 3, "after_seq": 1}, 422),
        (f"/journal/threads/{THREAD_ID}/messages", {"limit": 0}, 422),
        (f"/journal/threads/{THREAD_ID}/markers", {"before_seq": -1}, 422),
        (f"/journal/threads/{THREAD_ID}/messages", {"run_id": "r", "checkpoint_id": "c"}, 422),
        (f"/journal/threads/{THREAD_ID}/runs/run-1/events", {"before_seq": 3}, 422),
        (f"/journal/threads/{THREAD_ID}/runs", {"run_ids": ",".join(f"r{n}" for n in range(101))}, 422),
        ("/journal/threads", {"limit": "many"}, 422),
    ],
)
def test_error_answers_fit_their_schema(http, path, params, status):
    body = _checked(http.get(path, params=params), status)
    assert body["detail"]


def test_repair_answers_fit_their_schemas(http, monkeypatch):
    import langgraph_sdk

    outcome: dict[str, str] = {}

    async def backfill_thread(client: Any, store: Any, thread_id: str, **options: Any) -> backfill.ThreadBackfill:
        # What a backfill of a thread with two checkpoints and one message reports.
        return backfill.ThreadBackfill(thread_id, status=outcome["status"], checkpoints=2, messages=1, written=1,
                                       notes=["a note"])

    monkeypatch.setattr(langgraph_sdk, "get_client", lambda *args, **kwargs: None)
    monkeypatch.setattr(backfill, "backfill_thread", backfill_thread)
    thread = f"/journal/threads/{uuid.uuid4()}/repair"
    for status, code in (
        (backfill.COMPLETE, 200),
        (backfill.PARTIAL, 200),
        (backfill.NOT_RECOVERABLE, 200),
        (backfill.BUSY, 409),
        (backfill.NOT_FOUND, 404),
    ):
        outcome["status"] = status
        _checked(http.post(thread), code)
    _checked(http.post("/journal/threads/not-a-uuid/repair"), 422)


def test_the_projection_of_every_record_fits_the_history_item_schema(journal):
    """The projection itself, for records no route reads (a record of every category, in every thread)."""
    item_schema = {"$ref": "#/components/schemas/JournalHistoryItem"}
    items = [item for written in journal["records"].values() for item in project(written)]
    assert {item["type"] for item in items} == {"human", "ai", "tool", "summary_marker", "run_status"}
    for item in items:
        # The route's JSON turns times into text; the projection gives them as the record has them.
        errors = _errors(item_schema, {**item, "created_at": str(item["created_at"])})
        assert not errors, f"{item['type']} item {item['seq']}:\n" + "\n".join(errors)
