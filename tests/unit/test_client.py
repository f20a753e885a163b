"""The journal client, async and sync, against the real routes served by uvicorn over a seeded SQLite journal."""

from __future__ import annotations

import pytest
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from journal_bridge.client import get_journal_client, get_sync_journal_client
from tests.harness.seed import THREAD_ID, ServedApp, expected_items, journal_app, seed_file


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('client') / 'journal.db'}"
    records = seed_file(url)
    with ServedApp(journal_app(url)) as served:
        yield served, records


def _seqs(items):
    return [(item["seq"], item["type"]) for item in items]


async def test_iterating_all_pages_gives_the_whole_history_in_order(seeded):
    served, records = seeded
    async with get_journal_client(url=served.url, api_key=None) as journal:
        items = [item async for item in journal.iter_history(THREAD_ID, page_size=3)]
        assert _seqs(items) == expected_items(records)
        assert await journal.history(THREAD_ID) == items


async def test_newest_page_then_older_pages_with_before_cursors(seeded):
    served, records = seeded
    async with get_journal_client(url=served.url, api_key=None) as journal:
        newest = await journal.newest(THREAD_ID, limit=4)
        assert _seqs(newest["data"]) == expected_items(records)[-4:]
        older = await journal.page(THREAD_ID, limit=4, before_seq=newest["next_before_seq"])
        assert _seqs(older["data"]) == expected_items(records)[-8:-4]
        pages = [page async for page in journal.pages(THREAD_ID, page_size=4, newest_first=True)]
        assert [item for page in reversed(pages) for item in page["data"]] == await journal.history(THREAD_ID)
        assert not pages[-1]["has_more"]


async def test_after_cursor_resumes_where_a_reader_stopped(seeded):
    served, records = seeded
    async with get_journal_client(url=served.url, api_key=None) as journal:
        first = await journal.page(THREAD_ID, limit=5, after_seq=0)
        rest = [item async for item in journal.iter_history(THREAD_ID, after_seq=first["next_after_seq"])]
        assert _seqs(first["data"] + rest) == expected_items(records)
        with pytest.raises(ValueError, match="at most one cursor"):
            await journal.page(THREAD_ID, before_seq=5, after_seq=1)


async def test_markers_run_events_and_run_summaries(seeded):
    served, records = seeded
    async with get_journal_client(url=served.url, api_key=None) as journal:
        (marker,) = await journal.markers(THREAD_ID)
        assert marker["condensed_message_ids"] == ["h1", "a1", "t1", "a101", "h2", "a2", "t2", "a102"]
        events = [record async for record in journal.iter_run_events(THREAD_ID, "run-3")]
        assert [e["seq"] for e in events] == [r.seq for r in records if r.run_id == "run-3"]
        page = await journal.run_events(THREAD_ID, "run-3", event_types=["run.end"])
        assert [e["event_type"] for e in page["data"]] == ["run.end"]
        (run,) = await journal.runs(THREAD_ID, ["run-3"])
        assert (run["status"], run["duration_ms"]) == ("success", 5000)


async def test_threads_with_title_counts_and_search(seeded):
    served, _ = seeded
    async with get_journal_client(url=served.url, api_key=None) as journal:
        (thread,) = await journal.threads()
        assert thread["title"] == "What is the weather in Paris?"
        assert (thread["message_count"], thread["marker_count"]) == (18, 1)
        assert [t["thread_id"] for t in await journal.threads(q="oslo")] == [THREAD_ID]
        assert await journal.threads(q="Madrid") == []


async def test_errors_are_the_sdk_errors_with_the_journal_detail(seeded):
    served, _ = seeded
    async with get_journal_client(url=served.url, api_key=None) as journal:
        with pytest.raises(NotFoundError) as missing:
            await journal.page("no-such-thread")
        assert "no-such-thread" in missing.value.response.json()["detail"]
        with pytest.raises(UnprocessableEntityError):
            await journal.page(THREAD_ID, limit=501)


def test_the_sync_client_reads_the_same_history(seeded):
    served, records = seeded
    with get_sync_journal_client(url=served.url, api_key=None) as journal:
        assert _seqs(list(journal.iter_history(THREAD_ID, page_size=4))) == expected_items(records)
        assert _seqs(journal.newest(THREAD_ID, limit=2)["data"]) == expected_items(records)[-2:]
        assert len(journal.markers(THREAD_ID)) == 1
        assert journal.runs(THREAD_ID, ["run-1", "nope"])[1]["status"] == "unknown"
        assert journal.threads()[0]["thread_id"] == THREAD_ID


@pytest.fixture
def recorder():
    seen: list[dict[str, str]] = []

    async def page(request):
        seen.append(dict(request.headers))
        return JSONResponse({"data": [], "has_more": False, "next_before_seq": None, "next_after_seq": 0})

    app = Starlette(routes=[Route("/{path:path}", page)])
    with ServedApp(app) as served:
        yield served, seen


async def test_the_api_key_and_headers_are_sent_as_langgraph_sdk_sends_them(recorder, api_key_env):
    served, seen = recorder
    async with get_journal_client(url=served.url, headers={"X-Tenant": "blue"}) as journal:
        await journal.page("t")
    with get_sync_journal_client(url=served.url) as journal:
        journal.page("t")
    async with get_journal_client(url=served.url, api_key="given") as journal:
        await journal.page("t")
    async with get_journal_client(url=served.url, api_key=None) as journal:
        await journal.page("t")
    assert [h.get("x-api-key") for h in seen] == ["from-env", "from-env", "given", None]
    assert seen[0]["x-tenant"] == "blue"
    assert seen[0]["user-agent"].startswith("langgraph-sdk-py/")


async def test_the_prefix_comes_from_the_argument_or_the_environment(recorder, monkeypatch):
    served, seen = recorder
    monkeypatch.setenv("JOURNAL_BRIDGE_ROUTE_PREFIX", "/env-prefix/")
    async with get_journal_client(url=served.url, api_key=None) as journal:
        assert journal._requests.messages("a/b", 5, None, None)[0] == "/env-prefix/threads/a%2Fb/messages"
    async with get_journal_client(url=served.url, api_key=None, prefix="") as journal:
        assert journal._requests.messages("a", 5, None, None)[0] == "/threads/a/messages"
