"""The journal's HTTP routes over a real SQLite file: pages, errors, raw events."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import httpx
import pytest

from journal_bridge.store import open_store
from tests.harness.seed import THREAD_ID, expected_items, journal_app, seed_conversation


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'journal.db'}"


@pytest.fixture
async def records(store_url):
    async with open_store(store_url) as store:
        return await seed_conversation(store)


@pytest.fixture
async def client(store_url, records):
    app = journal_app(store_url)
    async with app.router.lifespan_context(app), _http(app) as http:
        yield http


def _http(app) -> httpx.AsyncClient:
    """A client that sends its requests to `app` in this process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


def _messages(thread_id: str = THREAD_ID) -> str:
    return f"/journal/threads/{thread_id}/messages"


async def _get_messages(app) -> httpx.Response:
    async with _http(app) as http:
        return await http.get(_messages())


async def test_messages_returns_items_with_the_marker_in_place(client, records):
    response = await client.get(_messages(), params={"limit": 500})
    assert response.status_code == 200
    body = response.json()
    assert [(item["seq"], item["type"]) for item in body["data"]] == expected_items(
        records
    )
    assert body["has_more"] is False and body["next_before_seq"] is None


async def test_paging_backwards_with_limit_3_matches_one_big_page(client):
    whole = (await client.get(_messages(), params={"limit": 500})).json()["data"]
    pages, params = [], {"limit": 3}
    while True:
        body = (await client.get(_messages(), params=params)).json()
        pages.append(body["data"])
        if not body["has_more"]:
            break
        params = {"limit": 3, "before_seq": body["next_before_seq"]}
    assert [item for page in reversed(pages) for item in page] == whole


async def test_paging_forwards_with_limit_3_matches_one_big_page(client):
    whole = (await client.get(_messages(), params={"limit": 500})).json()["data"]
    items, after = [], 0
    while True:
        body = (
            await client.get(_messages(), params={"limit": 3, "after_seq": after})
        ).json()
        items.extend(body["data"])
        if not body["has_more"]:
            break
        after = body["next_after_seq"]
    assert items == whole
    assert [item["seq"] for item in items] == sorted({item["seq"] for item in items})


async def test_default_page_is_the_newest_items(client):
    whole = (await client.get(_messages(), params={"limit": 500})).json()["data"]
    body = (await client.get(_messages())).json()
    assert body["data"] == whole[-50:]


async def test_unknown_thread_is_404_with_a_detail(client):
    response = await client.get(_messages("no-such-thread"))
    assert response.status_code == 404
    assert "no-such-thread" in response.json()["detail"]
    assert "journal" in response.json()["detail"]


@pytest.mark.parametrize(
    ("params", "name", "why"),
    [
        ({"limit": "ten"}, "limit", "integer"),
        ({"limit": "0"}, "limit", "at least 1"),
        ({"limit": "501"}, "limit", "at most 500"),
        ({"limit": "-3"}, "limit", "at least 1"),
        ({"before_seq": "x"}, "before_seq", "integer"),
        ({"before_seq": "-1"}, "before_seq", "negative"),
        ({"after_seq": "1.5"}, "after_seq", "integer"),
        ({"after_seq": "-2"}, "after_seq", "negative"),
        (
            {"before_seq": "9", "after_seq": "2"},
            "before_seq and after_seq",
            "at most one",
        ),
    ],
)
async def test_bad_cursor_or_limit_is_422_naming_the_parameter(
    client, params, name, why
):
    response = await client.get(_messages(), params=params)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith(name + ":")
    assert why in detail


async def test_markers_lists_only_the_summary_markers(client, records):
    response = await client.get(f"/journal/threads/{THREAD_ID}/markers")
    assert response.status_code == 200
    markers = response.json()["data"]
    assert [m["type"] for m in markers] == ["summary_marker"]
    assert markers[0]["replaced_count"] == 8
    assert markers[0]["id"] == f"summary-marker-{markers[0]['seq']}"


async def test_markers_of_an_unknown_thread_is_404(client):
    assert (await client.get("/journal/threads/nope/markers")).status_code == 404


async def test_run_events_returns_the_raw_records_of_one_run(client, records):
    response = await client.get(f"/journal/threads/{THREAD_ID}/runs/run-3/events")
    assert response.status_code == 200
    body = response.json()
    expected = [r.to_dict() for r in records if r.run_id == "run-3"]
    assert body["data"] == expected
    assert body["has_more"] is False


@pytest.mark.parametrize(
    "query",
    [
        "event_types=middleware:summarize,run.end",
        "event_types=middleware:summarize&event_types=run.end",
    ],
)
async def test_run_events_filter_by_event_types_comma_separated_or_repeated(
    client, query
):
    response = await client.get(
        f"/journal/threads/{THREAD_ID}/runs/run-3/events?{query}"
    )
    assert [r["event_type"] for r in response.json()["data"]] == [
        "middleware:summarize",
        "run.end",
    ]


async def test_run_events_page_forwards_with_after_seq(client, records):
    url = f"/journal/threads/{THREAD_ID}/runs/run-3/events"
    first = (await client.get(url, params={"limit": 2})).json()
    assert first["has_more"] is True
    rest = (await client.get(url, params={"after_seq": first["next_after_seq"]})).json()
    seqs = [r["seq"] for r in first["data"] + rest["data"]]
    assert seqs == [r.seq for r in records if r.run_id == "run-3"]


async def test_run_events_reject_a_bad_limit(client):
    response = await client.get(
        f"/journal/threads/{THREAD_ID}/runs/run-3/events", params={"limit": "0"}
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("limit:")


async def test_threads_lists_recent_journaled_threads(client):
    body = (await client.get("/journal/threads")).json()
    assert [t["thread_id"] for t in body["data"]] == [THREAD_ID]
    assert body["data"][0]["last_seq"] == 30


async def test_threads_carry_title_assistant_counts_and_last_activity(client):
    (thread,) = (await client.get("/journal/threads")).json()["data"]
    assert thread["title"] == "What is the weather in Paris?"
    assert thread["assistant_id"] is None  # the seeded runs name no assistant
    assert (thread["message_count"], thread["marker_count"]) == (18, 1)
    assert thread["updated_at"]


async def test_threads_search_finds_message_text(client):
    found = (await client.get("/journal/threads", params={"q": "LIMA"})).json()["data"]
    assert [t["thread_id"] for t in found] == [THREAD_ID]
    assert (await client.get("/journal/threads", params={"q": "Madrid"})).json()["data"] == []
    twice = await client.get("/journal/threads?q=a&q=b")
    assert twice.status_code == 422 and twice.json()["detail"].startswith("q:")


async def test_a_store_that_cannot_search_matches_titles_and_ids():
    from starlette.applications import Starlette

    from journal_bridge.store.base import RunEventStore
    from journal_bridge.store.memory import MemoryRunEventStore
    from journal_bridge.web.routes import journal_routes

    class NoSearch(MemoryRunEventStore):
        search_threads = RunEventStore.search_threads

    app = Starlette(routes=journal_routes("/journal"))
    app.state.journal_store = store = NoSearch()
    await seed_conversation(store)
    async with _http(app) as http:
        by_title = (await http.get("/journal/threads", params={"q": "paris"})).json()["data"]
        by_id = (await http.get("/journal/threads", params={"q": "HISTORY"})).json()["data"]
        by_later_text = (await http.get("/journal/threads", params={"q": "Lima"})).json()["data"]
    assert [t["thread_id"] for t in by_title] == [t["thread_id"] for t in by_id] == [THREAD_ID]
    assert by_later_text == []


async def test_runs_report_status_duration_and_error(store_url, client):
    from journal_bridge.model.envelope import make_event

    async with open_store(store_url) as store:
        await store.put_batch([
            make_event(thread_id=THREAD_ID, run_id="run-bad", event_type="run.start", content={"assistant_id": "a-1"}),
            make_event(thread_id=THREAD_ID, run_id="run-bad", event_type="run.error",
                       content="ValueError: boom", metadata={"error_type": "ValueError"}),
            make_event(thread_id=THREAD_ID, run_id="run-live", event_type="run.start", content={}),
        ])
    body = (await client.get(f"/journal/threads/{THREAD_ID}/runs?run_ids=run-1,run-bad&run_ids=run-live,nope")).json()
    assert [(r["run_id"], r["status"]) for r in body["data"]] == [
        ("run-1", "success"), ("run-bad", "error"), ("run-live", "running"), ("nope", "unknown"),
    ]
    first, bad = body["data"][:2]
    assert first["duration_ms"] == 5000 and first["error"] is None
    assert (bad["error"], bad["error_type"], bad["assistant_id"]) == ("ValueError: boom", "ValueError", "a-1")


async def test_runs_refuse_more_than_100_ids_and_unknown_threads(client):
    many = ",".join(f"r{i}" for i in range(101))
    response = await client.get(f"/journal/threads/{THREAD_ID}/runs", params={"run_ids": many})
    assert response.status_code == 422 and response.json()["detail"].startswith("run_ids:")
    assert (await client.get("/journal/threads/nope/runs?run_ids=a")).status_code == 404


async def test_the_history_module_is_served_for_other_apps(client):
    module = await client.get("/journal/static/history.js")
    assert module.status_code == 200
    assert "javascript" in module.headers["content-type"]
    assert "export class JournalClient" in module.text and "export function mergeHistory" in module.text


UNAVAILABLE = "the journal store is unavailable; retry shortly"


def _assert_unavailable(response: httpx.Response) -> None:
    """A 503 that says only that the store is unavailable."""
    assert response.status_code == 503
    assert response.json() == {"detail": UNAVAILABLE}


async def test_store_down_is_503_with_the_reason_in_the_log_not_the_body(caplog):
    app = journal_app("memory://")
    async with app.router.lifespan_context(app):
        await seed_conversation(app.state.journal_store)
        await app.state.journal_store.close()
        response = await _get_messages(app)
    _assert_unavailable(response)
    assert response.headers["Retry-After"] == "5"
    assert "memory store is closed" in caplog.text


async def test_sqlite_journal_gone_is_503_naming_no_file_and_no_sql(store_url, records):
    import sqlite3

    app = journal_app(store_url)
    async with app.router.lifespan_context(app):
        path = store_url.removeprefix("sqlite:///")
        with sqlite3.connect(
            path
        ) as conn:  # the journal's tables vanish under the server
            tables = conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            for (name,) in tables:
                conn.execute(f'DROP TABLE "{name}"')
        response = await _get_messages(app)
    _assert_unavailable(response)


async def test_no_store_open_yet_is_503_saying_so_without_internals():
    from starlette.applications import Starlette

    from journal_bridge.web.routes import journal_routes

    app = Starlette(routes=journal_routes())
    response = await _get_messages(app)
    _assert_unavailable(response)
    assert response.headers["content-type"] == "application/json"


async def test_routes_live_under_the_given_prefix(store_url, records):
    app = journal_app(store_url, prefix="/history-api")
    async with (
        app.router.lifespan_context(app),
        _http(app) as http,
    ):
        moved = await http.get(f"/history-api/threads/{THREAD_ID}/messages")
        assert moved.status_code == 200
        assert (await http.get(_messages())).status_code == 404


async def test_the_plugin_mounts_its_routes_under_the_prefix_of_the_environment(monkeypatch):
    from journal_bridge.server import create_app

    monkeypatch.setenv("JOURNAL_BRIDGE_ROUTE_PREFIX", "/history-api/")
    monkeypatch.setenv("JOURNAL_BRIDGE_ENABLED", "0")
    app = create_app()
    async with _http(app) as http:
        assert (await http.get("/history-api/health")).json() == {"enabled": False}
        assert (await http.get(f"/history-api/threads/{THREAD_ID}/messages")).status_code == 503
        assert (await http.get("/journal/health")).status_code == 404


async def test_viewer_pages_and_assets_are_served(client):
    page = await client.get(f"/journal/ui/threads/{THREAD_ID}")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'content="/journal"' in page.text
    assert "Content-Security-Policy" in page.headers
    index = await client.get("/journal/ui")
    assert index.status_code == 200 and 'data-page="index"' in index.text
    script = await client.get("/journal/ui/static/viewer.js")
    assert script.status_code == 200 and "textContent" in script.text
    assert "innerHTML" not in script.text
    assert (await client.get("/journal/ui/static/viewer.css")).status_code == 200


_opened: list[str] | None = None
_hook_installed = False


def _note_open(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None:
        _opened.append(str(args[0]))


@contextmanager
def _files_opened():
    """The paths this process opens inside the block (through the "open" audit event)."""
    global _opened, _hook_installed
    if not _hook_installed:
        sys.addaudithook(_note_open)  # cannot be removed: it records only inside this block
        _hook_installed = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


async def test_viewer_pages_are_served_without_reading_from_disk(client):
    viewer_dir = str(resources.files("journal_bridge").joinpath("viewer"))
    with _files_opened() as opened:
        pages = [
            await client.get(f"/journal/ui/threads/{THREAD_ID}"),
            await client.get("/journal/ui"),
            await client.get(f"/journal/ui/threads/{THREAD_ID}"),
        ]
    assert [page.status_code for page in pages] == [200, 200, 200]
    assert all("script-src 'self'" in p.headers["Content-Security-Policy"] for p in pages)
    assert 'content="/journal"' in pages[0].text
    assert [path for path in opened if path.startswith(viewer_dir)] == []


async def test_access_check_under_a_mount_asks_what_the_callers_own_request_would(
    monkeypatch, store_url, records
):
    # The server's app mounted under a prefix, as `http.mount_prefix` does it:
    # its own GET /threads/{id} lets only user A read the thread.
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    from journal_bridge.web import access

    seen = []

    async def get_thread(request):
        seen.append((request.scope["root_path"], request.url.path))
        if request.headers.get("authorization") != "Bearer a":
            return JSONResponse({"detail": "not found"}, status_code=404)
        return JSONResponse({"thread_id": request.path_params["thread_id"]})

    monkeypatch.setattr(access, "auth_configured", lambda: True)
    app = journal_app(store_url)
    app.router.routes.append(Route("/threads/{thread_id}", get_thread))
    server = Starlette(routes=[Mount("/api", app=app)])
    async with (
        app.router.lifespan_context(app),
        _http(server) as http,
    ):
        direct = await http.get(f"/api/threads/{THREAD_ID}", headers={"Authorization": "Bearer a"})
        owner = await http.get(f"/api/journal/threads/{THREAD_ID}/messages", headers={"Authorization": "Bearer a"})
        other = await http.get(f"/api/journal/threads/{THREAD_ID}/messages", headers={"Authorization": "Bearer b"})

    assert direct.status_code == 200
    assert owner.status_code == 200 and owner.json()["data"]
    assert other.status_code == 404
    # The check reached the route exactly as the caller's own request did.
    assert seen == [seen[0]] * 3 == [("/api", f"/api/threads/{THREAD_ID}")] * 3


# -- parameters every store must answer alike ----------------------------------

MAX_SEQ = 2**63 - 1
POSTGRES_URL_ENV = "JOURNAL_BRIDGE_TEST_POSTGRES_URL"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def on_every_store(request, tmp_path):
    """A client of the journal routes over a seeded store of each backend."""
    import os
    import uuid

    from starlette.applications import Starlette

    from journal_bridge.web.routes import journal_routes
    from tests.harness.suites import require_or_skip

    options = {}
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.db'}"
    else:
        url = os.environ.get(POSTGRES_URL_ENV)
        if not url:
            require_or_skip(f"set {POSTGRES_URL_ENV} to run the route tests on Postgres")
        options["schema"] = f"journal_test_{uuid.uuid4().hex[:12]}"
    async with open_store(url, **options) as store:
        await seed_conversation(store)
        app = Starlette(routes=journal_routes())
        app.state.journal_store = store
        async with _http(app) as http:
            yield http
    if "schema" in options:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{options["schema"]}" CASCADE')


_PAGED = [
    ("messages", "before_seq"),
    ("messages", "after_seq"),
    ("markers", "before_seq"),
    ("markers", "after_seq"),
    ("runs/run-3/events", "after_seq"),
]


@pytest.mark.parametrize(("route", "name"), _PAGED)
@pytest.mark.parametrize("value", [str(MAX_SEQ + 1), "1" + "0" * 40])
async def test_a_cursor_beyond_any_seq_a_store_holds_is_422_naming_it(
    on_every_store, route, name, value
):
    response = await on_every_store.get(
        f"/journal/threads/{THREAD_ID}/{route}", params={name: value}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert response.json()["detail"] == f"{name}: must be at most {MAX_SEQ}, got {value}"


@pytest.mark.parametrize(("route", "name"), _PAGED)
async def test_the_largest_seq_a_store_holds_is_a_cursor_like_any_other(
    on_every_store, route, name
):
    response = await on_every_store.get(
        f"/journal/threads/{THREAD_ID}/{route}", params={name: str(MAX_SEQ)}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    # Everything is older than the largest seq, nothing newer.
    assert bool(body["data"]) is (name == "before_seq")


@pytest.mark.parametrize(
    "path",
    [
        "/journal/threads/a%00b/messages",
        "/journal/threads/a%00b/markers",
        "/journal/threads/a%00b/runs/run-3/events",
    ],
)
async def test_a_nul_in_the_thread_id_is_422_naming_only_the_parameter(
    on_every_store, path
):
    response = await on_every_store.get(path)
    assert response.status_code == 422
    assert response.json() == {"detail": "thread_id: must not contain a NUL character"}


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (f"/journal/threads/{THREAD_ID}/runs/run%003/events", "run_id"),
        (f"/journal/threads/{THREAD_ID}/runs/run-3/events?event_types=run.end,run%00end", "event_types"),
    ],
)
async def test_a_nul_in_a_run_id_or_event_type_is_422_naming_it(on_every_store, path, name):
    response = await on_every_store.get(path)
    assert response.status_code == 422
    assert response.json() == {"detail": f"{name}: must not contain a NUL character"}


# -- thread ids the server could never have ------------------------------------


@pytest.mark.parametrize("thread_id", ["not-a-uuid", "%2E", "%2E%2E", "a%00b", THREAD_ID])
async def test_repair_of_an_id_that_is_no_uuid_is_422_before_asking_the_server(client, thread_id):
    response = await client.post(f"/journal/threads/{thread_id}/repair")
    assert response.status_code == 422
    assert response.json()["detail"].startswith("thread_id: must be a UUID")


def test_the_access_check_path_is_one_segment_for_any_id():
    from journal_bridge.web.access import thread_path

    assert thread_path("..") == "/threads/%2E%2E"
    assert thread_path(".", "/api") == "/api/threads/%2E"
    assert thread_path("...") == "/threads/..."
    assert thread_path("a/../b") == "/threads/a%2F..%2Fb"
    assert thread_path("a?b#c%") == "/threads/a%3Fb%23c%25"
    for thread_id in ("..", ".", "a/../b"):
        assert httpx.URL("http://server" + thread_path(thread_id)).path == f"/threads/{thread_id}"


@pytest.mark.parametrize("encoded", ["%2E", "%2E%2E", "%2e", "%2e%2e"])
async def test_a_dot_thread_id_is_checked_against_the_thread_route_not_the_server_root(
    monkeypatch, store_url, records, encoded
):
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from journal_bridge.web import access

    asked = []

    async def get_thread(request):
        asked.append(request.path_params["thread_id"])
        return JSONResponse({"detail": "Invalid thread ID: must be a UUID"}, status_code=422)

    async def anything_else(request):
        asked.append(f"other route {request.url.path}")
        return JSONResponse({"ok": True})

    monkeypatch.setattr(access, "auth_configured", lambda: True)
    app = journal_app(store_url)
    app.router.routes += [
        Route("/threads/{thread_id}", get_thread),
        Route("/{path:path}", anything_else),
    ]
    async with (
        app.router.lifespan_context(app),
        _http(app) as http,
    ):
        response = await http.get(f"/journal/threads/{encoded}/messages")

    assert response.status_code == 404
    assert response.json()["detail"].startswith("thread ")
    assert asked == [encoded.lower().replace("%2e", ".")]


async def test_an_unexpected_failure_is_a_json_500_with_the_reason_in_the_log(caplog):
    from starlette.applications import Starlette

    from journal_bridge.web.routes import journal_routes

    class BrokenStore:
        async def has_thread(self, thread_id):
            raise RuntimeError("secret internals")

    app = Starlette(routes=journal_routes())
    app.state.journal_store = BrokenStore()
    response = await _get_messages(app)
    assert response.status_code == 500
    assert response.json() == {"detail": "the journal failed; the reason is in the server log"}
    assert "secret internals" in caplog.text
