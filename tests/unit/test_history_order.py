"""Holes filled later: backfilled records show in conversation order, and paging stays exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from journal_bridge.capture.backfill import backfill_thread
from journal_bridge.model.envelope import make_event
from journal_bridge.projection import history
from journal_bridge.store import open_store

THREAD = "thread-with-holes"
TEXTS = [f"message {n}" for n in range(1, 11)]
JOURNALED_LIVE = {0, 1, 4, 5, 8}  # m1, m2, m5, m6, m9: what the bridge saw


def _message(n: int) -> dict:
    kind = "human" if n % 2 == 0 else "ai"
    return {"type": kind, "id": f"m{n + 1}", "content": TEXTS[n]}


class _Threads:
    """Checkpoint history of a thread that gained one message per checkpoint."""

    def __init__(self) -> None:
        self.states = [
            {
                "values": {"messages": [_message(i) for i in range(n)]},
                "checkpoint": {"checkpoint_id": f"c{n}", "checkpoint_ns": ""},
                "parent_checkpoint": {"checkpoint_id": f"c{n - 1}"} if n else None,
                "metadata": {"run_id": f"run-{n // 2}", "step": n},
                "created_at": "2026-11-30T00:00:00+00:00",
                "tasks": [],
                "next": [],
            }
            for n in range(len(TEXTS) + 1)
        ]

    async def get(self, thread_id):
        return {"thread_id": thread_id, "status": "idle"}

    async def get_history(self, thread_id, *, limit, before=None):
        newest_first = list(reversed(self.states))
        if before is not None:
            ids = [s["checkpoint"]["checkpoint_id"] for s in newest_first]
            newest_first = newest_first[ids.index(before["checkpoint_id"]) + 1:]
        return newest_first[:limit]


class _Client:
    threads = _Threads()


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'journal.db'}" if request.param == "sqlite" else "memory://"
    async with open_store(url) as opened:
        for n in sorted(JOURNALED_LIVE):
            message = _message(n)
            await opened.put(
                thread_id=THREAD, run_id=f"run-{n // 2}", category="message",
                event_type="llm.human.input" if message["type"] == "human" else "llm.ai.response",
                content=message, source_key=f"message:{message['id']}",
            )
        yield opened


async def _whole(store) -> list[dict]:
    return (await history.history_page(store, THREAD, limit=500))["data"]


async def test_a_backfill_into_holes_shows_in_conversation_order(store):
    result = await backfill_thread(_Client(), store, THREAD)
    assert result.written == len(TEXTS) - len(JOURNALED_LIVE)
    items = await _whole(store)
    assert [i["content"] for i in items] == TEXTS
    # The filled records were appended: their seqs follow the live ones.
    assert [i["seq"] for i in items if i["id"] in {"m3", "m4"}] > [len(JOURNALED_LIVE)]


async def test_a_second_backfill_writes_nothing_and_keeps_the_order(store):
    await backfill_thread(_Client(), store, THREAD)
    again = await backfill_thread(_Client(), store, THREAD)
    assert again.written == 0
    assert [i["content"] for i in await _whole(store)] == TEXTS


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
async def test_paging_backwards_over_filled_holes_yields_the_whole_page(store, limit):
    await backfill_thread(_Client(), store, THREAD)
    pages, before = [], None
    while True:
        page = await history.history_page(store, THREAD, limit=limit, before_seq=before)
        assert len(page["data"]) <= limit
        pages.append(page["data"])
        if not page["has_more"]:
            assert page["next_before_seq"] is None
            break
        before = page["next_before_seq"]
    assert [i for page in reversed(pages) for i in page] == await _whole(store)


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
async def test_paging_forwards_over_filled_holes_yields_the_whole_page(store, limit):
    await backfill_thread(_Client(), store, THREAD)
    items, after = [], 0
    while True:
        page = await history.history_page(store, THREAD, limit=limit, after_seq=after)
        assert len(page["data"]) <= limit
        items += page["data"]
        if not page["has_more"]:
            break
        after = page["next_after_seq"]
    assert items == await _whole(store)


async def test_a_cursor_at_a_filled_record_continues_from_its_place(store):
    await backfill_thread(_Client(), store, THREAD)
    whole = await _whole(store)
    middle = next(i for i, item in enumerate(whole) if item["id"] == "m4")
    older = await history.history_page(store, THREAD, limit=2, before_seq=whole[middle]["seq"])
    assert older["data"] == whole[middle - 2: middle]
    newer = await history.history_page(store, THREAD, limit=3, after_seq=whole[middle]["seq"])
    assert newer["data"] == whole[middle + 1: middle + 4]


async def test_records_written_live_after_a_filled_hole_come_after_it(store):
    await backfill_thread(_Client(), store, THREAD)
    await store.put_batch([make_event(
        thread_id=THREAD, run_id="run-9", event_type="llm.human.input", category="message",
        content={"type": "human", "id": "m11", "content": "message 11"}, source_key="message:m11",
    )])
    assert [i["content"] for i in await _whole(store)] == [*TEXTS, "message 11"]


async def test_a_copy_of_a_thread_with_filled_holes_reads_the_same(store):
    from journal_bridge.delivery.thread_copy import copy_journal

    # A gap in the source's seqs before the filled holes: the copy numbers them anew.
    await store.put(thread_id=THREAD, run_id="gone", event_type="run.start", category="trace", content={})
    await store.delete_by_run(THREAD, "gone")
    await backfill_thread(_Client(), store, THREAD)
    copied = await copy_journal(store, THREAD, "the-copy")
    assert copied == len(await store.list_timeline(THREAD, categories=("message", "trace"), limit=500))
    original = await _whole(store)
    copy = (await history.history_page(store, "the-copy", limit=500))["data"]
    strip = lambda items: [{k: v for k, v in i.items() if k not in ("seq", "id")} for i in items]
    assert [i["content"] for i in copy] == TEXTS
    assert strip(copy) == strip(original)
    # Copying again adds nothing: the keys are in the copy already.
    assert await copy_journal(store, THREAD, "the-copy") == copied
    assert len((await history.history_page(store, "the-copy", limit=500))["data"]) == len(TEXTS)
