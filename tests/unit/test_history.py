"""The history projection over a real store: items, marker placement, cursor paging."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from journal_bridge.model.envelope import InvalidEvent, make_event
from journal_bridge.projection import history
from journal_bridge.store import open_store
from tests.harness.marker_spec import design_history
from tests.harness.seed import SUMMARY_TEXT, THREAD_ID, expected_items, journal_agent_thread, seed_conversation

REPLACED = ["h1", "a1", "t1", "a101", "h2", "a2", "t2", "a102"]


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path):
    url = (
        f"sqlite:///{tmp_path / 'journal.db'}"
        if request.param == "sqlite"
        else "memory://"
    )
    async with open_store(url) as opened:
        yield opened


@pytest.fixture
async def records(store):
    return await seed_conversation(store)


async def _all_backward(store, limit: int, fetch=history.history_page) -> list[dict]:
    pages, before = [], None
    while True:
        page = await fetch(store, THREAD_ID, limit=limit, before_seq=before)
        pages.append(page)
        assert len(page["data"]) <= limit
        if not page["has_more"]:
            assert page["next_before_seq"] is None
            break
        before = page["next_before_seq"]
    return [item for page in reversed(pages) for item in page["data"]]


async def _all_forward(store, limit: int, after: int = 0) -> list[dict]:
    items = []
    while True:
        page = await history.history_page(
            store, THREAD_ID, limit=limit, after_seq=after
        )
        assert len(page["data"]) <= limit
        items.extend(page["data"])
        if not page["has_more"]:
            break
        after = page["next_after_seq"]
    return items


async def test_one_big_page_holds_every_visible_item_in_seq_order(store, records):
    page = await history.history_page(store, THREAD_ID, limit=500)
    assert [(item["seq"], item["type"]) for item in page["data"]] == expected_items(
        records
    )
    assert page["has_more"] is False
    assert page["next_before_seq"] is None


async def test_marker_sits_after_the_replaced_messages_and_before_the_answer(
    store, records
):
    items = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    types = [item["type"] for item in items]
    at = types.index("summary_marker")
    marker = items[at]
    summarize = next(r for r in records if r.event_type == "middleware:summarize")
    assert marker == {
        "type": "summary_marker",
        "id": f"summary-marker-{summarize.seq}",
        "seq": summarize.seq,
        "run_id": "run-3",
        "created_at": summarize.created_at.isoformat(),
        "replaced_count": 8,
        "condensed_count": 8,
        "preserved_count": 1,
        "summary": SUMMARY_TEXT,
        "summary_message_id": "summary-1",
        "replaced_message_ids": REPLACED,
        "condensed_message_ids": REPLACED,
    }
    assert items[at - 1]["type"] == "human" and items[at - 1]["run_id"] == "run-3"
    assert items[at + 1]["type"] == "ai" and items[at + 1]["id"] == "a3"


async def test_message_rows_are_the_message_dict_plus_seq_run_and_time(store, records):
    items = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    call = next(item for item in items if item["type"] == "ai" and item["tool_calls"])
    assert call["tool_calls"][0]["args"] == {"city": "Paris"}
    assert call["run_id"] == "run-1"
    assert call["seq"] == records[2].seq
    assert call["created_at"] == records[2].created_at.isoformat()
    tool = next(item for item in items if item["type"] == "tool")
    assert tool["tool_call_id"] == "call-1" and tool["name"] == "get_weather"


async def test_summarizer_model_calls_and_run_records_are_not_shown(store, records):
    items = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    assert all(item.get("id") != "a900" for item in items)
    assert {item["type"] for item in items} == {"human", "ai", "tool", "summary_marker"}


@pytest.mark.parametrize("limit", [1, 3, 4, 7])
async def test_paging_backwards_yields_the_same_sequence_as_one_page(
    store, records, limit
):
    whole = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    assert await _all_backward(store, limit) == whole


@pytest.mark.parametrize("limit", [1, 3, 5])
async def test_paging_forwards_yields_the_same_sequence_as_one_page(
    store, records, limit
):
    whole = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    assert await _all_forward(store, limit) == whole


async def test_forward_paging_from_a_middle_cursor_continues_without_repeat(
    store, records
):
    whole = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    older = await history.history_page(
        store, THREAD_ID, limit=3, before_seq=whole[10]["seq"]
    )
    assert older["data"] == whole[7:10]
    newer = await _all_forward(store, 3, after=older["next_after_seq"])
    assert newer == whole[10:]


async def test_newest_page_has_cursors_for_both_directions(store, records):
    whole = (await history.history_page(store, THREAD_ID, limit=500))["data"]
    page = await history.history_page(store, THREAD_ID, limit=3)
    assert page["data"] == whole[-3:]
    assert page["has_more"] is True
    assert page["next_before_seq"] == whole[-3]["seq"]
    assert page["next_after_seq"] == whole[-1]["seq"]
    tail = await history.history_page(
        store, THREAD_ID, limit=3, after_seq=page["next_after_seq"]
    )
    assert tail["data"] == [] and tail["has_more"] is False
    assert tail["next_after_seq"] == whole[-1]["seq"]


async def test_has_more_is_false_when_only_hidden_records_remain(store):
    thread = "hidden-tail"
    await store.put_batch(
        [
            make_event(
                thread_id=thread, run_id="r", event_type="run.start", content={}
            ),
            make_event(
                thread_id=thread,
                run_id="r",
                event_type="llm.ai.response",
                category="trace",
                content={"type": "ai", "content": "summary"},
                metadata={"caller": "middleware:summarize"},
            ),
            make_event(
                thread_id=thread,
                run_id="r",
                event_type="llm.human.input",
                content={"type": "human", "content": "only one"},
            ),
        ]
    )
    page = await history.history_page(store, thread, limit=1)
    assert [item["content"] for item in page["data"]] == ["only one"]
    assert page["has_more"] is False


async def test_markers_page_lists_only_markers(store, records):
    page = await history.history_page(store, THREAD_ID, limit=50, markers_only=True)
    assert [item["type"] for item in page["data"]] == ["summary_marker"]
    assert page["data"][0]["replaced_count"] == 8
    assert page["has_more"] is False


async def test_unknown_thread_gives_an_empty_page(store):
    page = await history.history_page(store, "no-such-thread", limit=3)
    assert page == {
        "data": [],
        "has_more": False,
        "next_before_seq": None,
        "next_after_seq": None,
    }


async def test_both_cursors_at_once_is_refused(store):
    with pytest.raises(ValueError, match="before_seq and after_seq"):
        await history.history_page(store, THREAD_ID, before_seq=5, after_seq=2)


def test_a_record_with_text_content_still_projects_to_a_message():
    event = make_event(
        thread_id="t", run_id="r", event_type="llm.human.input", content="plain"
    )
    event = replace(event, seq=4)
    assert history.project_record(event)["type"] == "human"
    assert history.project_record(event)["content"] == "plain"


def test_a_record_no_store_appended_is_refused_naming_its_seq():
    # An item's place is its record's seq: a record without one has no place in a page.
    event = make_event(thread_id="t", run_id="r", event_type="llm.human.input", content="plain")
    with pytest.raises(InvalidEvent, match="seq: a stored record has one"):
        history.project_record(event)


@pytest.mark.parametrize("text", ["[1, 2]", '{"type": "ai", "content": "not me"}', "42", "null"])
async def test_text_content_reads_back_as_the_same_text(store, text):
    await store.put_batch(
        [
            make_event(
                thread_id="text-thread",
                run_id="r",
                event_type="llm.human.input",
                content=text,
            )
        ]
    )
    (item,) = (await history.history_page(store, "text-thread"))["data"]
    assert item["type"] == "human"
    assert item["content"] == text


async def test_the_category_and_the_caller_decide_what_is_conversation(store):
    # A human message that carries the summarizer's marks (a client that sent
    # a summary back as input) is still something the user sent; an AI message
    # journaled under `trace`, or from a middleware's model call, is not
    # conversation, whatever it looks like.
    summary_like = {
        "type": "human",
        "content": "Here is a summary of the conversation so far",
        "id": "sent-back",
        "additional_kwargs": {"lc_source": "summarization"},
    }
    await store.put_batch(
        [
            make_event(
                thread_id="categories",
                run_id="r",
                event_type="llm.human.input",
                content=summary_like,
                metadata={"caller": "middleware:summarize", "lc_source": "summarization"},
            ),
            make_event(
                thread_id="categories",
                run_id="r",
                event_type="llm.ai.response",
                category="trace",
                content={"type": "ai", "content": "plain answer", "id": "traced"},
                metadata={"caller": "agent"},
            ),
            make_event(
                thread_id="categories",
                run_id="r",
                event_type="llm.ai.response",
                content={"type": "ai", "content": "the summary", "id": "summarizer"},
                metadata={"caller": "middleware:summarize"},
            ),
        ]
    )
    items = (await history.history_page(store, "categories"))["data"]
    assert [item["id"] for item in items] == ["sent-back"]


async def test_a_later_marker_does_not_count_the_earlier_summary_as_condensed(store):
    await journal_agent_thread(store, "compacted-twice")
    markers = (await history.history_page(store, "compacted-twice", markers_only=True))["data"]
    assert len(markers) >= 2
    first, second = markers[0], markers[1]
    assert first["condensed_count"] == first["replaced_count"]
    assert second["condensed_count"] == second["replaced_count"] - 1
    items = (await history.history_page(store, "compacted-twice", limit=500))["data"]
    # Every message a marker counts is one the history shows before it.
    shown_before = {i["id"] for i in items[: items.index(second)] if i["type"] != "summary_marker"}
    record = next(
        r for r in await store.list_timeline("compacted-twice", categories=("middleware",), limit=10)
        if r.seq == second["seq"]
    )
    changes = record.content["changes"]
    condensed = [i for i in changes["replaced_message_ids"] if i not in changes["previous_summary_ids"]]
    assert len(condensed) == second["condensed_count"] and set(condensed) <= shown_before
    assert changes["previous_summary_ids"] == [first["summary_message_id"]]


async def test_the_designs_reader_finds_every_marker_with_its_count_and_summary(store):
    await journal_agent_thread(store, "read-as-designed")
    ours = (await history.history_page(store, "read-as-designed", markers_only=True))["data"]
    records = await store.list_timeline("read-as-designed", categories=("message", "middleware"), limit=500)
    designed = [i for i in design_history(r.to_dict() for r in records) if i["type"] == "summary_marker"]
    assert len(ours) >= 2
    assert [(m["id"], m["replaced_count"], m["summary"]) for m in designed] == [
        (m["id"], m["replaced_count"], m["summary"]) for m in ours
    ]
    for record in records:
        if record.event_type == "middleware:summarize":
            assert record.content["role"] == "system"
            assert {k: record.metadata[k] for k in ("replaced_count", "preserved_count", "condensed_count")} == {
                k: record.content["changes"][k] for k in ("replaced_count", "preserved_count", "condensed_count")
            }


async def test_a_marker_of_deerflows_design_alone_shows_its_count_and_summary(store):
    await store.put_batch([
        make_event(thread_id="designed", run_id="r", event_type="middleware:summarize", category="middleware",
                   content={"role": "system", "content": "What came before."}, metadata={"replaced_count": 4}),
    ])
    (marker,) = (await history.history_page(store, "designed", markers_only=True))["data"]
    assert (marker["replaced_count"], marker["condensed_count"], marker["summary"]) == (4, 4, "What came before.")
    assert marker["preserved_count"] is None and marker["replaced_message_ids"] == []
