"""The behaviour every RunEventStore backend must have, as a pytest suite.

A backend's test module subclasses `RunEventStoreConformance` and provides the
`store_url` fixture (plus `store_options` if it needs any); the URL's scheme
must be registered (`journal_bridge.store.register_backend`). Each test gets a
fresh, empty store; a backend whose storage outlives one store object (a file,
a database) subclasses `SharedStorageConformance` to also run the multi-writer
tests, whose writer processes import `backend_modules` first (the modules that
register the backend):

    from journal_bridge.store.conformance import SharedStorageConformance

    class TestMyStore(SharedStorageConformance):
        backend_modules = ("my_package.journal_store",)

        @pytest.fixture
        def store_url(self, tmp_path):
            return f"mystore://{tmp_path}"

A backend is done when this suite passes. It needs pytest and pytest-asyncio
(`asyncio_mode = "auto"`), which the package itself does not depend on.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from journal_bridge.model.envelope import (
    ERROR,
    LLM_AI_RESPONSE,
    LLM_HUMAN_INPUT,
    LLM_TOOL_RESULT,
    MESSAGE,
    MIDDLEWARE,
    MIDDLEWARE_SUMMARIZE,
    OUTPUTS,
    RUN_END,
    RUN_ERROR,
    RUN_START,
    TRACE,
    RunEvent,
    StoredRecord,
    make_event,
    stored_seq,
)
from journal_bridge.store import (
    InvalidEvent,
    RunEventStore,
    StoreUnavailable,
    open_store,
)
from journal_bridge.store.base import supports

THREAD = "thread-1"


def event(
    thread_id: str = THREAD,
    run_id: str = "run-1",
    event_type: str = LLM_AI_RESPONSE,
    category: str | None = None,
    content: object = "hello",
    **kwargs: Any,
) -> RunEvent:
    return make_event(
        thread_id=thread_id,
        run_id=run_id,
        event_type=event_type,
        category=category,
        content=content,
        **kwargs,
    )


def seqs(events: Sequence[StoredRecord]) -> list[int]:
    return [stored_seq(e) for e in events]


def as_events(records: list[Any]) -> list[RunEvent]:
    """Records in the `RunEvent` form, whichever form a method returned them in."""
    return [r if isinstance(r, RunEvent) else r.to_event() for r in records]


async def put(
    store: RunEventStore, event_type: str, category: str, **fields: Any
) -> Any:
    """`store.put` of one event of THREAD's run `r`."""
    return await store.put(
        thread_id=THREAD, run_id="r", event_type=event_type, category=category, **fields
    )


async def seed_mixed_thread(store: RunEventStore, runs: int = 3) -> list[RunEvent]:
    """Runs of: start, human, ai, tool, ai, (marker on the second run), end."""
    batch: list[RunEvent] = []
    for r in range(runs):
        run_id = f"run-{r}"
        batch.append(event(run_id=run_id, event_type=RUN_START, content={"run": r}))
        batch.append(event(run_id=run_id, event_type=LLM_HUMAN_INPUT, content=f"q{r}"))
        batch.append(
            event(run_id=run_id, event_type=LLM_AI_RESPONSE, content=f"call{r}")
        )
        batch.append(
            event(run_id=run_id, event_type=LLM_TOOL_RESULT, content=f"tool{r}")
        )
        if r == 1:
            batch.append(
                event(run_id=run_id, event_type=MIDDLEWARE_SUMMARIZE, content={"n": 3})
            )
        batch.append(event(run_id=run_id, event_type=LLM_AI_RESPONSE, content=f"a{r}"))
        batch.append(event(run_id=run_id, event_type=RUN_END, content=None))
    return await store.put_batch(batch)


class RunEventStoreConformance:
    shared_storage = False
    # Modules a writer process imports before opening the store (see the module doc).
    backend_modules: tuple[str, ...] = ()

    @pytest.fixture
    def store_url(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    def store_options(self) -> dict[str, object]:
        return {}

    @pytest.fixture
    async def store(self, store_url: str, store_options: dict[str, object]):
        async with open_store(store_url, **store_options) as opened:
            yield opened

    # -- seq assignment ----------------------------------------------------------

    async def test_first_event_of_a_thread_gets_seq_1(self, store):
        stored = await put(store, RUN_START, TRACE)
        assert stored.seq == 1
        assert await store.last_seq(THREAD) == 1

    async def test_seq_is_contiguous_across_puts_and_batches(self, store):
        first = await put(store, "a", TRACE)
        batch = await store.put_batch([event(content=i) for i in range(5)])
        last = await put(store, "b", TRACE)
        assert [first.seq, *seqs(batch), last.seq] == list(range(1, 8))

    async def test_each_thread_has_its_own_seq(self, store):
        stored = await store.put_batch(
            [event(thread_id=t, content=i) for i in range(3) for t in ("a", "b")]
        )
        assert [(e.thread_id, e.seq) for e in stored] == [
            ("a", 1),
            ("b", 1),
            ("a", 2),
            ("b", 2),
            ("a", 3),
            ("b", 3),
        ]

    async def test_seq_given_by_the_caller_is_ignored(self, store):
        from dataclasses import replace

        stored = await store.put_batch([replace(event(), seq=42)])
        assert stored[0].seq == 1

    async def test_put_returns_the_event_as_stored(self, store):
        created = datetime(
            2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2))
        )
        given: dict[str, Any] = {
            "thread_id": THREAD,
            "run_id": "run-9",
            "event_type": LLM_AI_RESPONSE,
            "category": MESSAGE,
            "content": {"type": "ai", "content": "hi"},
            "metadata": {"caller": "agent"},
            "created_at": created,
            "source_key": "k1",
        }
        stored = await store.put(**given)
        assert stored.to_event() == RunEvent(**given, seq=1)
        (read,) = await store.list_messages(THREAD)
        assert read.to_event() == stored.to_event()

    async def test_put_defaults_content_metadata_and_created_at(self, store):
        before = datetime.now(UTC)
        stored = await put(store, RUN_START, TRACE)
        assert (
            stored.content == "" and stored.metadata == {} and stored.source_key is None
        )
        assert stored.created_at.tzinfo is not None and stored.created_at >= before

    async def test_put_batch_returns_events_in_input_order(self, store):
        stored = await store.put_batch(
            [
                event(thread_id=t, content=f"{t}{i}")
                for t, i in [("x", 0), ("y", 0), ("x", 1)]
            ]
        )
        assert [e.content for e in stored] == ["x0", "y0", "x1"]
        assert seqs(stored) == [1, 1, 2]

    async def test_a_large_batch_over_two_threads_is_stored_whole_in_order(self, store):
        # 250 records of 10 columns: more parameters than SQLite before 3.32
        # takes in one statement.
        batch = [
            event(thread_id=t, content=f"{t}{i}", source_key=f"{t}-{i}")
            for i in range(125)
            for t in ("x", "y")
        ]
        stored = await store.put_batch(batch)
        assert [e.content for e in stored] == [e.content for e in batch]
        for thread_id in ("x", "y"):
            events = await store.list_events(thread_id, "run-1", limit=500)
            assert [e.seq for e in events] == list(range(1, 126))
            assert [e.content for e in events] == [f"{thread_id}{i}" for i in range(125)]
            assert await store.last_seq(thread_id) == 125
        again = await store.put_batch(batch[:3])
        assert [(e.thread_id, e.seq) for e in again] == [("x", 1), ("y", 1), ("x", 2)]
        assert await store.last_seq("x") == 125

    async def test_empty_batch_writes_nothing(self, store):
        assert await store.put_batch([]) == []
        assert await store.list_threads() == []

    # -- content and metadata ----------------------------------------------------

    @pytest.mark.parametrize(
        "content",
        [
            "plain text",
            "",
            '{"looks": "like json"}',
            "123",
            "null",
            {"type": "ai", "content": "hi", "nested": {"list": [1, 2.5, None, True]}},
            {},
            [1, "two", {"three": 3}],
            [],
            0,
            -7,
            2**53 + 1,
            3.14159,
            1e-300,
            True,
            False,
            None,
            "unicode: ünïcødé 中文 🎉 \u2028 \t\n",
            {"ключ": "значение", "emoji": "🙂"},
        ],
        ids=repr,
    )
    async def test_content_round_trips_exactly(self, store, content):
        stored = await put(store, LLM_HUMAN_INPUT, MESSAGE, content=content)
        (read,) = await store.list_messages(THREAD)
        for got in (stored.content, read.content):
            assert got == content
            assert type(got) is type(content)
        assert "content_coerced" not in read.metadata

    async def test_content_that_is_not_json_is_stored_as_its_text(self, store):
        class Opaque:
            def __str__(self) -> str:
                return "<opaque thing>"

        stored = await put(store, RUN_END, OUTPUTS, content=Opaque())
        (read,) = await store.list_events(THREAD, "r")
        for got in (stored, read):
            assert got.content == "<opaque thing>"
            assert got.metadata["content_coerced"] is True

    async def test_content_with_nan_is_stored_as_its_text(self, store):
        stored = await put(store, RUN_END, OUTPUTS, content={"x": math.nan})
        assert stored.content == "{'x': nan}"
        assert stored.metadata["content_coerced"] is True

    async def test_nul_characters_become_replacement_characters(self, store):
        stored = await put(
            store,
            LLM_TOOL_RESULT,
            MESSAGE,
            content={"out": "bin\x00ary", "k\x00": ["\x00"]},
            metadata={"note": "a\x00b"},
        )
        (read,) = await store.list_messages(THREAD)
        assert read == stored
        assert read.content == {"out": "bin\ufffdary", "k\ufffd": ["\ufffd"]}
        assert read.metadata == {"note": "a\ufffdb", "content_sanitized": True}

    async def test_a_literal_backslash_u0000_is_not_a_nul(self, store):
        await store.put_batch([event(content="\\u0000 is how JSON writes NUL")])
        (read,) = await store.list_messages(THREAD)
        assert read.content == "\\u0000 is how JSON writes NUL"
        assert "content_sanitized" not in read.metadata

    async def test_metadata_round_trips(self, store):
        metadata = {
            "caller": "agent",
            "usage": {"input_tokens": 3, "output_tokens": 4},
            "x": [1, None],
        }
        await put(store, LLM_AI_RESPONSE, MESSAGE, metadata=metadata)
        (read,) = await store.list_messages(THREAD)
        assert read.metadata == metadata

    async def test_created_at_round_trips_as_the_same_instant(self, store):
        created = datetime(
            2024, 6, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5))
        )
        await store.put_batch([event(created_at=created)])
        (read,) = await store.list_messages(THREAD)
        assert read.created_at == created
        assert read.created_at.utcoffset() is not None

    async def test_stored_event_survives_the_json_envelope(self, store):
        (stored,) = await store.put_batch(
            [event(content={"a": [1, 2]}, source_key="k")]
        )
        envelope = json.loads(json.dumps(stored.to_dict()))
        assert RunEvent.from_dict(envelope) == stored

    # -- truncation --------------------------------------------------------------

    @pytest.fixture
    async def small_store(self, store_url: str, store_options: dict[str, object]):
        async with open_store(
            store_url, **{**store_options, "max_content_bytes": 1000}
        ) as opened:
            yield opened

    async def test_long_text_is_truncated_to_a_prefix_with_its_original_size(
        self, small_store
    ):
        text = "é" * 5000
        stored = await put(
            small_store,
            LLM_AI_RESPONSE,
            MESSAGE,
            content=text,
            metadata={"caller": "agent"},
        )
        (read,) = await small_store.list_messages(THREAD)
        for got in (stored, read):
            assert text.startswith(got.content) and len(got.content) > 100
            assert len(json.dumps(got.content, ensure_ascii=False).encode()) <= 1000
            assert got.metadata == {
                "caller": "agent",
                "truncated": True,
                "original_size": len(json.dumps(text, ensure_ascii=False).encode()),
            }

    async def test_large_json_is_truncated_to_a_prefix_of_its_json_text(
        self, small_store
    ):
        content = {"items": [{"n": i, "text": "x" * 20} for i in range(200)]}
        full = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        stored = await put(small_store, LLM_TOOL_RESULT, MESSAGE, content=content)
        (read,) = await small_store.list_messages(THREAD)
        assert read == stored
        assert isinstance(read.content, str) and full.startswith(read.content)
        assert read.metadata["truncated"] is True
        assert read.metadata["original_size"] == len(full.encode())

    async def test_content_at_the_limit_is_kept_whole(self, small_store):
        text = "a" * 998  # 1000 bytes with its quotes
        stored = await put(small_store, LLM_AI_RESPONSE, MESSAGE, content=text)
        assert stored.content == text and "truncated" not in stored.metadata

    # -- validation --------------------------------------------------------------

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("thread_id", ""),
            ("thread_id", None),
            ("run_id", ""),
            ("run_id", 5),
            ("event_type", ""),
            ("event_type", "e" * 33),
            ("category", ""),
            ("category", "c" * 17),
            ("metadata", ["not", "a", "dict"]),
            ("created_at", datetime(2025, 1, 1)),
            ("created_at", "2025-01-01T00:00:00+00:00"),
            ("seq", 0),
            ("seq", "1"),
            ("source_key", ""),
            ("thread_id", "a\x00b"),
            ("source_key", "k\x00"),
        ],
    )
    async def test_invalid_event_is_rejected_naming_the_field(
        self, store, field, value
    ):
        from dataclasses import replace

        bad = replace(event(), **{field: value})
        with pytest.raises(InvalidEvent, match=field):
            await store.put_batch([bad])
        assert await store.last_seq(THREAD) == 0

    async def test_put_rejects_a_long_event_type(self, store):
        with pytest.raises(InvalidEvent, match="event_type"):
            await put(store, "x" * 40, TRACE)

    async def test_limits_are_inclusive(self, store):
        stored = await store.put_batch([event(event_type="e" * 32, category="c" * 16)])
        assert stored[0].seq == 1

    async def test_a_batch_with_one_invalid_event_writes_nothing(self, store):
        from dataclasses import replace

        await store.put_batch([event(thread_id="other")])
        batch = [event(content=i) for i in range(5)]
        batch.insert(3, replace(event(), category=""))
        batch.append(event(thread_id="other"))
        with pytest.raises(InvalidEvent, match="category"):
            await store.put_batch(batch)
        assert await store.last_seq(THREAD) == 0
        assert await store.last_seq("other") == 1
        assert await store.list_messages(THREAD) == []

    # -- idempotency -------------------------------------------------------------

    async def test_reappending_a_source_key_returns_the_original_record(self, store):
        first = await store.put_batch([event(content="original", source_key="msg-1")])
        await store.put_batch([event(content="later")])
        again = await store.put(
            thread_id=THREAD,
            run_id="run-2",
            event_type=LLM_AI_RESPONSE,
            category=MESSAGE,
            content="retry",
            source_key="msg-1",
        )
        assert again.to_event() == first[0]
        assert await store.last_seq(THREAD) == 2
        assert [e.content for e in await store.list_messages(THREAD)] == [
            "original",
            "later",
        ]

    async def test_a_batch_mixing_stored_and_new_keys_assigns_seq_only_to_new(
        self, store
    ):
        await store.put_batch(
            [event(content=f"m{i}", source_key=f"k{i}") for i in range(3)]
        )
        stored = await store.put_batch(
            [
                event(content="new-a", source_key="k9"),
                event(content="dup", source_key="k1"),
                event(content="new-b"),
                event(content="dup", source_key="k0"),
            ]
        )
        assert [(e.seq, e.content) for e in stored] == [
            (4, "new-a"),
            (2, "m1"),
            (5, "new-b"),
            (1, "m0"),
        ]
        assert await store.last_seq(THREAD) == 5
        assert seqs(await store.list_messages(THREAD)) == [1, 2, 3, 4, 5]

    async def test_duplicates_within_a_batch_collapse_to_the_first(self, store):
        stored = await store.put_batch(
            [
                event(content="a", source_key="same"),
                event(content="b"),
                event(content="a-again", source_key="same"),
            ]
        )
        assert [(e.seq, e.content) for e in stored] == [(1, "a"), (2, "b"), (1, "a")]
        assert await store.count_messages(THREAD) == 2

    async def test_a_batch_of_only_known_keys_assigns_nothing(self, store):
        await store.put_batch([event(source_key="k")])
        threads_before = await store.list_threads()
        assert seqs(await store.put_batch([event(source_key="k")] * 3)) == [1, 1, 1]
        assert await store.last_seq(THREAD) == 1
        assert await store.list_threads() == threads_before

    async def test_source_keys_are_unique_per_thread_not_globally(self, store):
        stored = await store.put_batch(
            [event(thread_id="a", source_key="k"), event(thread_id="b", source_key="k")]
        )
        assert [(e.thread_id, e.seq) for e in stored] == [("a", 1), ("b", 1)]

    async def test_has_source_keys_reports_which_keys_are_stored(self, store):
        await store.put_batch([event(source_key=f"k{i}") for i in range(3)])
        await store.put_batch([event(thread_id="other", source_key="k7")])
        assert await store.has_source_keys(THREAD, ["k0", "k2", "k7", "nope"]) == {
            "k0",
            "k2",
        }
        assert await store.has_source_keys(THREAD, []) == set()
        assert await store.has_source_keys("unknown", ["k0"]) == set()

    async def test_many_source_keys_at_once(self, store):
        keys = [f"key-{i}" for i in range(1200)]
        await store.put_batch([event(source_key=k) for k in keys])
        assert await store.has_source_keys(THREAD, keys + ["missing"]) == set(keys)
        again = await store.put_batch([event(source_key=k) for k in keys])
        assert seqs(again) == list(range(1, 1201))

    # -- list_messages / list_timeline -------------------------------------------

    async def test_latest_messages_span_several_runs(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        messages = [e for e in stored if e.category == MESSAGE]
        page = as_events(await store.list_messages(THREAD, limit=6))
        assert page == messages[-6:]
        assert {e.run_id for e in page} == {"run-1", "run-2"}

    async def test_messages_skip_other_categories_interleaved(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        page = as_events(await store.list_messages(THREAD, limit=100))
        assert page == [e for e in stored if e.category == MESSAGE]
        assert seqs(page) == sorted(seqs(page))

    async def test_limit_larger_than_the_thread_returns_everything(self, store):
        stored = await store.put_batch([event(content=i) for i in range(4)])
        assert as_events(await store.list_messages(THREAD, limit=1000)) == stored
        assert as_events(await store.list_messages(THREAD, limit=1000, after_seq=0)) == stored
        assert as_events(await store.list_messages(THREAD, limit=1000, before_seq=5)) == stored

    @pytest.mark.parametrize(
        ("side", "at", "limit", "wanted"),
        [
            pytest.param(
                "before_seq", 7, 3, slice(4, 7), id="before_seq-the_last_limit_below_it"
            ),
            pytest.param(
                "after_seq", 2, 4, slice(3, 7), id="after_seq-the_first_limit_above_it"
            ),
        ],
    )
    async def test_seq_cursor_pages_from_it(self, store, side, at, limit, wanted):
        await seed_mixed_thread(store, runs=3)
        all_messages = as_events(await store.list_messages(THREAD, limit=100))
        cursor = all_messages[at].seq
        page = as_events(
            await store.list_messages(THREAD, limit=limit, **{side: cursor})
        )
        assert page == all_messages[wanted]

    async def test_cursor_on_a_non_message_seq_works(self, store):
        stored = await seed_mixed_thread(store, runs=2)
        run_end = next(e for e in stored if e.event_type == RUN_END)
        messages = [e for e in stored if e.category == MESSAGE]
        below = [e for e in messages if stored_seq(e) < stored_seq(run_end)]
        above = [e for e in messages if stored_seq(e) > stored_seq(run_end)]
        assert (
            as_events(await store.list_messages(THREAD, limit=2, before_seq=run_end.seq))
            == below[-2:]
        )
        assert (
            as_events(await store.list_messages(THREAD, limit=2, after_seq=run_end.seq))
            == above[:2]
        )

    async def test_before_seq_1_is_empty(self, store):
        await store.put_batch([event(content=i) for i in range(3)])
        assert await store.list_messages(THREAD, before_seq=1) == []
        assert await store.list_messages(THREAD, before_seq=0) == []

    async def test_after_the_last_seq_is_empty(self, store):
        stored = await store.put_batch([event(content=i) for i in range(3)])
        assert await store.list_messages(THREAD, after_seq=stored[-1].seq) == []
        assert await store.list_messages(THREAD, after_seq=10_000) == []

    async def test_cursors_beyond_the_range_clamp(self, store):
        stored = await store.put_batch([event(content=i) for i in range(5)])
        assert (
            as_events(await store.list_messages(THREAD, limit=2, before_seq=10_000)) == stored[-2:]
        )
        assert as_events(await store.list_messages(THREAD, limit=2, after_seq=-10)) == stored[:2]

    async def test_cursor_in_a_gap_left_by_a_deleted_run(self, store):
        stored = await store.put_batch(
            [
                event(run_id=r, content=f"{r}{i}")
                for r in ("a", "b", "c")
                for i in range(2)
            ]
        )
        await store.delete_by_run(THREAD, "b")
        gap = stored[2].seq  # first event of the deleted run
        assert (
            as_events(await store.list_messages(THREAD, limit=10, before_seq=gap + 1))
            == stored[:2]
        )
        assert as_events(await store.list_messages(THREAD, limit=10, after_seq=gap)) == stored[4:]

    async def test_paging_backward_visits_every_message_once(self, store):
        await seed_mixed_thread(store, runs=5)
        expected = await store.list_messages(THREAD, limit=1000)
        collected: list[RunEvent] = []
        page = await store.list_messages(THREAD, limit=4)
        while page:
            collected[:0] = page
            page = await store.list_messages(THREAD, limit=4, before_seq=page[0].seq)
        assert collected == expected

    async def test_paging_forward_visits_every_message_once(self, store):
        await seed_mixed_thread(store, runs=5)
        expected = await store.list_messages(THREAD, limit=1000)
        collected: list[RunEvent] = []
        cursor = 0
        while page := await store.list_messages(THREAD, limit=3, after_seq=cursor):
            collected += page
            cursor = page[-1].seq
        assert collected == expected

    async def test_both_cursors_bound_the_page_from_both_sides(self, store):
        stored = await store.put_batch([event(content=i) for i in range(10)])
        window = stored[2:7]  # seqs 3..7: above 2, below 8
        for method in (store.list_messages, store.list_timeline):
            assert as_events(
                await method(THREAD, limit=100, after_seq=2, before_seq=8)
            ) == window
            # the first `limit` of the range, as after_seq alone pages
            assert as_events(
                await method(THREAD, limit=2, after_seq=2, before_seq=8)
            ) == window[:2]
            assert await method(THREAD, after_seq=5, before_seq=6) == []
            assert await method(THREAD, after_seq=7, before_seq=3) == []

    @pytest.mark.parametrize("limit", [0, -1])
    async def test_limit_below_1_is_an_error(self, store, limit):
        with pytest.raises(ValueError, match="limit"):
            await store.list_messages(THREAD, limit=limit)

    async def test_unknown_thread_has_no_messages(self, store):
        assert await store.list_messages("nobody") == []
        assert await store.list_timeline("nobody") == []
        assert await store.list_events("nobody", "run") == []

    async def test_timeline_merges_messages_and_markers_in_seq_order(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        expected = [e for e in stored if e.category in (MESSAGE, MIDDLEWARE)]
        assert await store.list_timeline(THREAD, limit=100) == expected
        marker = next(e for e in expected if e.category == MIDDLEWARE)
        index = expected.index(marker)
        assert (
            await store.list_timeline(THREAD, limit=3, before_seq=stored_seq(marker) + 1)
            == (expected[index - 2 : index + 1])
        )
        assert (
            await store.list_timeline(THREAD, limit=2, after_seq=stored_seq(marker) - 1)
            == (expected[index : index + 2])
        )

    async def test_timeline_latest_page_when_one_category_dominates(self, store):
        batch = [event(event_type=MIDDLEWARE_SUMMARIZE, content="m0")]
        batch += [event(content=f"msg{i}") for i in range(20)]
        batch += [event(event_type=MIDDLEWARE_SUMMARIZE, content="m1")]
        stored = await store.put_batch(batch)
        assert await store.list_timeline(THREAD, limit=5) == stored[-5:]
        assert await store.list_timeline(THREAD, limit=5, after_seq=0) == stored[:5]

    async def test_timeline_with_chosen_categories(self, store):
        stored = await seed_mixed_thread(store, runs=2)
        page = await store.list_timeline(THREAD, categories=(TRACE, OUTPUTS), limit=100)
        assert page == [e for e in stored if e.category in (TRACE, OUTPUTS)]
        assert await store.list_timeline(THREAD, categories=(), limit=10) == []

    # -- list_events -------------------------------------------------------------

    async def test_list_events_returns_one_run_in_seq_order(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        assert as_events(await store.list_events(THREAD, "run-1")) == [
            e for e in stored if e.run_id == "run-1"
        ]

    async def test_list_events_filters_types_before_the_limit(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        await store.put_batch(
            [event(run_id="run-2", event_type=RUN_ERROR, category=ERROR)]
        )
        wanted = [
            e for e in stored if e.run_id == "run-2" and e.event_type == LLM_AI_RESPONSE
        ]
        page = as_events(await store.list_events(
            THREAD, "run-2", event_types=[LLM_AI_RESPONSE], limit=2
        ))
        assert page == wanted and len(page) == 2
        page = as_events(await store.list_events(
            THREAD, "run-2", event_types=[RUN_ERROR, RUN_START], limit=10
        ))
        assert [e.event_type for e in page] == [RUN_START, RUN_ERROR]

    async def test_list_events_limit_and_after_seq(self, store):
        stored = await seed_mixed_thread(store, runs=2)
        run = [e for e in stored if e.run_id == "run-0"]
        assert as_events(await store.list_events(THREAD, "run-0", limit=2)) == run[:2]
        assert (
            as_events(await store.list_events(THREAD, "run-0", after_seq=run[1].seq, limit=2))
            == run[2:4]
        )
        assert as_events(await store.list_events(THREAD, "run-0", event_types=[])) == []

    # -- counts, threads ---------------------------------------------------------

    async def test_count_messages_counts_only_messages(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        assert await store.count_messages(THREAD) == sum(
            e.category == MESSAGE for e in stored
        )
        assert await store.count_messages("nobody") == 0

    async def test_last_seq_and_has_thread(self, store):
        assert await store.last_seq(THREAD) == 0
        assert not await store.has_thread(THREAD)
        await store.put_batch([event(), event()])
        assert await store.last_seq(THREAD) == 2
        assert await store.has_thread(THREAD)
        assert not await store.has_thread("other")

    async def test_list_threads_most_recently_updated_first(self, store):
        for thread_id in ("a", "b", "c"):
            await store.put_batch([event(thread_id=thread_id)])
        await store.put_batch([event(thread_id="a"), event(thread_id="a")])
        threads = await store.list_threads()
        assert [t["thread_id"] for t in threads] == ["a", "c", "b"]
        first = threads[0]
        assert set(first) == {"thread_id", "last_seq", "event_count", "updated_at"}
        assert (first["last_seq"], first["event_count"]) == (3, 3)
        assert datetime.fromisoformat(first["updated_at"]).tzinfo is not None
        assert [t["thread_id"] for t in await store.list_threads(limit=2)] == ["a", "c"]

    # -- optional: fill_owner ----------------------------------------------------

    async def test_fill_owner_gives_only_records_without_an_owner_that_owner(self, store):
        if not supports(store, "fill_owner"):
            with pytest.raises(NotImplementedError):
                await store.fill_owner("t", "bob")
            return
        await store.put_batch([
            event(thread_id="t", content={"type": "human", "content": "one"}),
            event(thread_id="t", content={"type": "human", "content": "two"}),
            event(thread_id="t", content={"type": "human", "content": "three"}, user_id="alice"),
            event(thread_id="other", content={"type": "human", "content": "four"}),
        ])
        assert await store.fill_owner("t", "bob") == 2
        assert [r.user_id for r in await store.list_messages("t")] == ["bob", "bob", "alice"]
        assert [r.content["content"] for r in await store.list_messages("t", user_id="bob")] == ["one", "two"]
        assert [r.user_id for r in await store.list_messages("other")] == [None]
        assert await store.fill_owner("t", "carol") == 0
        with pytest.raises(ValueError, match="user_id"):
            await store.fill_owner("t", "")

    # -- optional: search_threads ------------------------------------------------

    async def _search_fixture(self, store):
        def message(thread_id, content):
            return event(thread_id=thread_id, event_type=LLM_HUMAN_INPUT,
                         content={"type": "human", "content": content})

        await store.put_batch([message("paris", "What is the weather in Paris?")])
        await store.put_batch([message("blocks", [{"type": "text", "text": 'He said "Zürich" 100%'}])])
        await store.put_batch([message("bare", "Tea in Zürich")])
        await store.put_batch([event(thread_id="trace-only", event_type=RUN_START,
                                     content={"input": "Paris"})])
        await store.put_batch([message("other", "nothing here 100 percent")])

    async def test_search_threads_finds_message_text_in_any_ascii_case(self, store):
        if not supports(store, "search_threads"):
            with pytest.raises(NotImplementedError):
                await store.search_threads("paris")
            return
        await self._search_fixture(store)
        assert [t["thread_id"] for t in await store.search_threads("PARIS")] == ["paris"]
        found = await store.search_threads("zürich")
        assert [t["thread_id"] for t in found] == ["bare", "blocks"]
        assert set(found[0]) == {"thread_id", "last_seq", "event_count", "updated_at"}
        assert [t["thread_id"] for t in await store.search_threads('"Zürich" 100%')] == ["blocks"]
        assert [t["thread_id"] for t in await store.search_threads("100%")] == ["blocks"]
        assert await store.search_threads("_") == []
        assert [t["thread_id"] for t in await store.search_threads("zürich", limit=1)] == ["bare"]

    async def test_list_threads_omits_deleted_threads(self, store):
        await store.put_batch([event(thread_id="a"), event(thread_id="b", run_id="x")])
        await store.delete_by_thread("a")
        await store.delete_by_run("b", "x")
        assert await store.list_threads() == []

    # -- deletes -----------------------------------------------------------------

    async def test_delete_by_run_removes_that_run_only(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        run_1 = [e for e in stored if e.run_id == "run-1"]
        assert await store.delete_by_run(THREAD, "run-1") == len(run_1)
        assert await store.list_events(THREAD, "run-1") == []
        remaining = await store.list_timeline(
            THREAD, categories=(MESSAGE, TRACE), limit=100
        )
        assert remaining == [
            e for e in stored if e.run_id != "run-1" and e.category in (MESSAGE, TRACE)
        ]
        (thread,) = await store.list_threads()
        assert thread["event_count"] == len(stored) - len(run_1)
        assert await store.delete_by_run(THREAD, "run-1") == 0
        assert await store.delete_by_run("nobody", "run-1") == 0

    async def test_seq_is_not_reused_after_deleting_the_last_run(self, store):
        await store.put_batch([event(run_id="a"), event(run_id="b"), event(run_id="b")])
        await store.delete_by_run(THREAD, "b")
        (stored,) = await store.put_batch([event(run_id="c")])
        assert stored.seq == 4
        assert await store.last_seq(THREAD) == 4

    async def test_delete_by_run_frees_its_source_keys(self, store):
        await store.put_batch([event(run_id="a", source_key="k")])
        await store.delete_by_run(THREAD, "a")
        assert await store.has_source_keys(THREAD, ["k"]) == set()
        (stored,) = await store.put_batch([event(run_id="b", source_key="k")])
        assert stored.seq == 2

    async def test_delete_by_thread_forgets_the_thread(self, store):
        await store.put_batch([event(content=i, source_key=f"k{i}") for i in range(4)])
        await store.put_batch([event(thread_id="other")])
        assert await store.delete_by_thread(THREAD) == 4
        assert not await store.has_thread(THREAD)
        assert await store.last_seq(THREAD) == 0
        assert await store.list_messages(THREAD) == []
        assert await store.has_source_keys(THREAD, ["k0"]) == set()
        (again,) = await store.put_batch([event(source_key="k0")])
        assert again.seq == 1
        assert await store.last_seq("other") == 1
        assert await store.delete_by_thread("nobody") == 0

    # -- concurrency -------------------------------------------------------------

    async def test_concurrent_tasks_get_contiguous_seqs(self, store):
        async def writer(w: int) -> list[RunEvent]:
            out: list[RunEvent] = []
            for i in range(10):
                if i % 2:
                    out += await store.put_batch(
                        [event(run_id=f"w{w}", content=[w, i, j]) for j in range(3)]
                    )
                else:
                    out.append(
                        await store.put(
                            thread_id=THREAD,
                            run_id=f"w{w}",
                            event_type=LLM_AI_RESPONSE,
                            category=MESSAGE,
                            content=[w, i],
                        )
                    )
            return out

        results = await asyncio.gather(*(writer(w) for w in range(12)))
        total = sum(len(r) for r in results)
        assert sorted(stored_seq(e) for r in results for e in r) == list(range(1, total + 1))
        for written in results:  # each writer's own events in the order it wrote them
            assert seqs(written) == sorted(seqs(written))
        assert seqs(await store.list_messages(THREAD, limit=total)) == list(
            range(1, total + 1)
        )

    async def test_concurrent_duplicates_are_stored_once(self, store):
        results = await asyncio.gather(
            *(
                store.put_batch([event(source_key=f"k{i % 5}", content=i)])
                for i in range(40)
            )
        )
        assert await store.count_messages(THREAD) == 5
        by_key: dict[str | None, set[int | None]] = {}
        for (stored,) in results:
            by_key.setdefault(stored.source_key, set()).add(stored.seq)
        assert all(len(s) == 1 for s in by_key.values())

    async def test_readers_never_see_half_a_batch(
        self, store, store_url, store_options
    ):
        batch_size, batches = 40, 15
        done = asyncio.Event()
        observed: list[int] = []

        async def reader(reading_store: RunEventStore) -> None:
            while not done.is_set():
                page = await reading_store.list_timeline(THREAD, limit=10_000)
                observed.append(len(page))
                await asyncio.sleep(0)

        async def writer() -> None:
            for b in range(batches):
                await store.put_batch(
                    [event(run_id=f"r{b}", content=[b, i]) for i in range(batch_size)]
                )
                await asyncio.sleep(0)
            done.set()

        if self.shared_storage:
            async with open_store(store_url, **store_options) as other:
                await asyncio.gather(writer(), reader(store), reader(other))
        else:
            await asyncio.gather(writer(), reader(store))
        assert observed and all(n % batch_size == 0 for n in observed)

    # -- deer-flow's RunEventStore: dict records ---------------------------------

    async def test_put_returns_a_plain_json_dict_with_the_assigned_seq(self, store):
        await store.put_batch([event()])
        record = await put(
            store,
            LLM_HUMAN_INPUT,
            MESSAGE,
            content={"type": "human", "content": "hi"},
            created_at="2025-05-06T07:08:09+00:00",
        )
        assert isinstance(record, dict)
        assert json.loads(json.dumps(record)) == {
            "thread_id": THREAD,
            "run_id": "r",
            "seq": 2,
            "event_type": LLM_HUMAN_INPUT,
            "category": MESSAGE,
            "content": {"type": "human", "content": "hi"},
            "metadata": {},
            "created_at": "2025-05-06T07:08:09+00:00",
        }

    async def test_put_batch_of_dicts_returns_dicts_in_input_order(self, store):
        records = await store.put_batch(
            [
                {"thread_id": "x", "run_id": "r", "event_type": "a", "category": TRACE},
                {
                    "thread_id": "y",
                    "run_id": "r",
                    "event_type": LLM_AI_RESPONSE,
                    "category": MESSAGE,
                    "content": "answer",
                    "metadata": {"caller": "agent"},
                    "created_at": "2025-01-01T00:00:00",  # no offset: UTC
                },
                {"thread_id": "x", "run_id": "r", "event_type": "b", "category": TRACE},
            ]
        )
        assert all(type(r) is not RunEvent and isinstance(r, dict) for r in records)
        assert [(r["thread_id"], r["seq"], r["event_type"]) for r in records] == [
            ("x", 1, "a"),
            ("y", 1, LLM_AI_RESPONSE),
            ("x", 2, "b"),
        ]
        assert records[0]["content"] == "" and records[0]["metadata"] == {}
        assert records[1].created_at == datetime(2025, 1, 1, tzinfo=UTC)
        (read,) = await store.list_messages("y")
        assert read.to_event() == records[1].to_event()

    async def test_put_batch_answers_each_event_in_its_own_form(self, store):
        stored = await store.put_batch(
            [event(content="object"), {**event(content="dict").to_dict(), "seq": 99}]
        )
        assert isinstance(stored[0], RunEvent) and not isinstance(stored[1], RunEvent)
        assert seqs(stored) == [1, 2]

    async def test_a_record_read_back_can_be_written_to_another_thread(self, store):
        await store.put_batch([event(content={"a": 1}, metadata={"m": 2})])
        (record,) = await store.list_messages(THREAD)
        (copy,) = await store.put_batch([{**record, "thread_id": "copy"}])
        assert (copy["thread_id"], copy["seq"]) == ("copy", 1)
        assert (copy.content, copy.metadata) == ({"a": 1}, {"m": 2})

    async def test_a_dict_missing_a_required_field_is_rejected(self, store):
        with pytest.raises(InvalidEvent, match="run_id"):
            await store.put_batch([{"thread_id": THREAD, "event_type": "a", "category": TRACE}])
        with pytest.raises(InvalidEvent, match="created_at"):
            await store.put_batch([{**event().to_dict(), "created_at": "yesterday"}])
        assert await store.last_seq(THREAD) == 0

    async def test_records_read_as_run_events_too(self, store):
        stored = await put(store, RUN_START, TRACE)
        (read,) = await store.list_events(THREAD, "r")
        for record in (stored, read):
            assert (record.seq, record.run_id, record.category) == (1, "r", TRACE)
            assert record.created_at.tzinfo is not None
            assert record.to_dict() == dict(record)
            assert type(record.to_dict()) is dict

    # -- deer-flow's RunEventStore: list_messages_by_run -------------------------

    async def test_list_messages_by_run_keeps_one_runs_messages(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        expected = [e for e in stored if e.run_id == "run-1" and e.category == MESSAGE]
        page = await store.list_messages_by_run(THREAD, "run-1")
        assert as_events(page) == expected
        assert await store.list_messages_by_run(THREAD, "nobody") == []
        assert await store.list_messages_by_run("nobody", "run-1") == []

    async def test_list_messages_by_run_pages_both_ways_and_with_both_cursors(
        self, store
    ):
        stored = await store.put_batch(
            [event(run_id=("a" if i % 3 else "b"), content=i) for i in range(15)]
        )
        run_a = [e for e in stored if e.run_id == "a"]  # 10 records
        by_run = store.list_messages_by_run
        assert as_events(await by_run(THREAD, "a", limit=3)) == run_a[-3:]
        assert as_events(
            await by_run(THREAD, "a", limit=3, before_seq=run_a[5].seq)
        ) == run_a[2:5]
        assert as_events(
            await by_run(THREAD, "a", limit=3, after_seq=run_a[5].seq)
        ) == run_a[6:9]
        assert as_events(
            await by_run(
                THREAD, "a", limit=100, after_seq=run_a[1].seq, before_seq=run_a[6].seq
            )
        ) == run_a[2:6]
        assert as_events(
            await by_run(
                THREAD, "a", limit=2, after_seq=run_a[1].seq, before_seq=run_a[6].seq
            )
        ) == run_a[2:4]

    # -- deer-flow's RunEventStore: list_events filters --------------------------

    async def test_list_events_filters_by_task_id_before_the_limit(self, store):
        batch = []
        for i in range(12):
            task = ("t-1", "t-2", None)[i % 3]
            metadata = {} if task is None else {"task_id": task}
            batch.append(event(event_type=RUN_START, category=TRACE, content=i, metadata=metadata))
        stored = await store.put_batch(batch)
        await store.put_batch([event(run_id="other", metadata={"task_id": "t-1"})])
        task_1 = [e for e in stored if e.metadata.get("task_id") == "t-1"]
        page = await store.list_events(THREAD, "run-1", task_id="t-1", limit=2)
        assert as_events(page) == task_1[:2]
        page = await store.list_events(
            THREAD, "run-1", task_id="t-1", after_seq=task_1[1].seq
        )
        assert as_events(page) == task_1[2:]
        assert await store.list_events(THREAD, "run-1", task_id="t-9") == []

    async def test_task_id_matches_only_the_same_string(self, store):
        await store.put_batch(
            [
                event(metadata={"task_id": 7}),
                event(metadata={"task_id": "7"}),
                event(metadata={"task_id": ["7"]}),
                event(metadata={"task": "7"}),
            ]
        )
        page = await store.list_events(THREAD, "run-1", task_id="7")
        assert seqs(page) == [2]

    async def test_list_events_combines_event_types_task_id_and_cursor(self, store):
        stored = await store.put_batch(
            [
                event(event_type=etype, category=cat, metadata={"task_id": task}, content=i)
                for i, (etype, cat, task) in enumerate(
                    [
                        (RUN_START, TRACE, "a"),
                        (LLM_AI_RESPONSE, MESSAGE, "a"),
                        (LLM_AI_RESPONSE, MESSAGE, "b"),
                        (LLM_TOOL_RESULT, MESSAGE, "a"),
                        (LLM_AI_RESPONSE, MESSAGE, "a"),
                        (LLM_AI_RESPONSE, MESSAGE, "a"),
                    ]
                )
            ]
        )
        page = await store.list_events(
            THREAD,
            "run-1",
            event_types=[LLM_AI_RESPONSE],
            task_id="a",
            after_seq=stored[1].seq,
            limit=1,
        )
        assert as_events(page) == [stored[4]]

    # -- deer-flow's RunEventStore: put_if_absent --------------------------------

    async def test_put_if_absent_writes_once_per_run_and_event_type(self, store: RunEventStore) -> None:
        first, created = await store.put_if_absent(
            thread_id=THREAD, run_id="r", event_type=RUN_END, category=OUTPUTS, content="done"
        )
        assert created and first["seq"] == 1 and isinstance(first, dict)
        again, created = await store.put_if_absent(
            thread_id=THREAD, run_id="r", event_type=RUN_END, category=OUTPUTS, content="retry"
        )
        assert not created
        assert again.to_event() == first.to_event() and again.content == "done"
        assert await store.last_seq(THREAD) == 1

    async def test_put_if_absent_is_scoped_to_the_run_and_the_event_type(self, store):
        await store.put_if_absent(
            thread_id=THREAD, run_id="r", event_type=RUN_END, category=OUTPUTS
        )
        results = [
            await store.put_if_absent(
                thread_id=thread_id, run_id=run_id, event_type=event_type, category=OUTPUTS
            )
            for thread_id, run_id, event_type in [
                (THREAD, "other-run", RUN_END),
                (THREAD, "r", RUN_ERROR),
                ("other-thread", "r", RUN_END),
            ]
        ]
        assert [created for _, created in results] == [True, True, True]
        assert [r["seq"] for r, _ in results] == [2, 3, 1]

    async def test_put_if_absent_finds_an_event_an_ordinary_put_wrote(self, store):
        stored = await store.put_batch(
            [event(run_id="r", event_type=RUN_END, category=OUTPUTS, content=n) for n in "ab"]
        )
        found, created = await store.put_if_absent(
            thread_id=THREAD, run_id="r", event_type=RUN_END, category=OUTPUTS, content="c"
        )
        assert not created and found.to_event() == stored[0]

    async def test_put_if_absent_takes_the_next_seq_and_counts(self, store):
        await store.put_batch([event(), event()])
        record, created = await store.put_if_absent(
            thread_id=THREAD, run_id="r", event_type=LLM_AI_RESPONSE, category=MESSAGE
        )
        assert created and record["seq"] == 3
        assert await store.count_messages(THREAD) == 3
        (stored,) = await store.put_batch([event()])
        assert stored.seq == 4

    async def test_concurrent_put_if_absent_creates_one_record(self, store):
        async def attempt(n: int):
            if n % 2:
                await store.put_batch([event(run_id=f"noise-{n}")])
            return await store.put_if_absent(
                thread_id=THREAD, run_id="r", event_type=RUN_END, category=OUTPUTS, content=n
            )

        results = await asyncio.gather(*(attempt(n) for n in range(20)))
        assert sum(created for _, created in results) == 1
        assert len({record["seq"] for record, _ in results}) == 1
        assert len(await store.list_events(THREAD, "r")) == 1

    async def test_put_if_absent_rejects_an_invalid_event(self, store):
        with pytest.raises(InvalidEvent, match="category"):
            await store.put_if_absent(
                thread_id=THREAD, run_id="r", event_type=RUN_END, category=""
            )
        assert await store.last_seq(THREAD) == 0

    # -- deer-flow's RunEventStore: get_last_visible_ai_seq_by_run ---------------

    async def test_last_visible_ai_seq_skips_middleware_calls_and_other_messages(
        self, store
    ):
        stored = await store.put_batch(
            [
                event(run_id="a", event_type=LLM_HUMAN_INPUT),
                event(run_id="a", event_type=LLM_AI_RESPONSE, metadata={"caller": "agent"}),
                event(run_id="a", event_type=LLM_TOOL_RESULT),
                event(run_id="a", event_type=LLM_AI_RESPONSE, metadata={"caller": "middleware:summarize"}),
                event(run_id="b", event_type=LLM_AI_RESPONSE),
                event(run_id="b", event_type="ai_message", category=MESSAGE),
                event(run_id="b", event_type=LLM_AI_RESPONSE, category=TRACE),
                event(run_id="c", event_type=LLM_HUMAN_INPUT),
                event(run_id="d", event_type=LLM_AI_RESPONSE, metadata={"caller": "Middleware:x"}),
            ]
        )
        assert await store.get_last_visible_ai_seq_by_run(
            THREAD, {"a", "b", "c", "d", "nobody"}
        ) == {"a": stored[1].seq, "b": stored[5].seq, "d": stored[8].seq}
        assert await store.get_last_visible_ai_seq_by_run(THREAD, set()) == {}
        assert await store.get_last_visible_ai_seq_by_run("nobody", {"a"}) == {}

    async def test_last_visible_ai_seq_follows_deletes(self, store):
        await store.put_batch([event(run_id="a"), event(run_id="b"), event(run_id="a")])
        await store.delete_by_run(THREAD, "a")
        assert await store.get_last_visible_ai_seq_by_run(THREAD, ["a", "b"]) == {"b": 2}

    # -- deer-flow's RunEventStore: counts after deletes -------------------------

    async def test_count_messages_follows_appends_and_deletes(self, store):
        stored = await seed_mixed_thread(store, runs=3)
        messages = [e for e in stored if e.category == MESSAGE]
        await store.delete_by_run(THREAD, "run-1")
        remaining = [e for e in messages if e.run_id != "run-1"]
        assert await store.count_messages(THREAD) == len(remaining)
        await store.put_batch([event(run_id="run-9"), event(run_id="run-9", event_type=RUN_END)])
        assert await store.count_messages(THREAD) == len(remaining) + 1
        await store.delete_by_run(THREAD, "run-1")  # nothing left to delete
        assert await store.count_messages(THREAD) == len(remaining) + 1
        await store.delete_by_thread(THREAD)
        assert await store.count_messages(THREAD) == 0
        await store.put_batch([event()])
        assert await store.count_messages(THREAD) == 1

    # -- deer-flow's RunEventStore: user scoping ---------------------------------

    @pytest.fixture
    async def two_users(self, store) -> list[RunEvent]:
        """Alternating records of alice and bob (and one of nobody) in runs r1, r2."""
        batch = [
            event(run_id=f"r{1 + i // 4}", content=i, user_id=("alice", "bob")[i % 2])
            for i in range(8)
        ]
        batch.append(event(run_id="r1", content="anonymous"))
        batch.append(
            event(run_id="r1", event_type=RUN_START, category=TRACE, user_id="alice")
        )
        return await store.put_batch(batch)

    async def test_records_keep_the_user_who_wrote_them(self, store, two_users):
        page = await store.list_messages(THREAD, limit=100)
        assert [r.get("user_id") for r in page] == ["alice", "bob"] * 4 + [None]
        record = await put(store, RUN_START, TRACE, user_id="carol")
        assert record["user_id"] == "carol"

    async def test_reads_filter_by_user(self, store, two_users):
        alice = [e for e in two_users if e.user_id == "alice"]
        alice_messages = [e for e in alice if e.category == MESSAGE]
        assert as_events(
            await store.list_messages(THREAD, limit=100, user_id="alice")
        ) == alice_messages
        assert as_events(
            await store.list_messages(THREAD, limit=2, before_seq=alice_messages[-1].seq, user_id="alice")
        ) == alice_messages[1:3]
        assert as_events(
            await store.list_messages_by_run(THREAD, "r1", user_id="alice")
        ) == [e for e in alice_messages if e.run_id == "r1"]
        assert as_events(await store.list_events(THREAD, "r1", user_id="alice")) == [
            e for e in alice if e.run_id == "r1"
        ]
        assert await store.count_messages(THREAD, user_id="alice") == 4
        assert await store.count_messages(THREAD, user_id="nobody") == 0
        assert await store.count_messages(THREAD) == 9
        assert await store.get_last_visible_ai_seq_by_run(
            THREAD, {"r1", "r2"}, user_id="bob"
        ) == {"r1": two_users[3].seq, "r2": two_users[7].seq}

    async def test_deletes_filter_by_user(self, store, two_users):
        assert await store.delete_by_run(THREAD, "r1", user_id="bob") == 2
        assert [r.get("user_id") for r in await store.list_events(THREAD, "r1")] == [
            "alice", "alice", None, "alice",
        ]
        assert await store.delete_by_thread(THREAD, user_id="alice") == 5
        assert await store.count_messages(THREAD) == 3
        # the thread and its seq counter stay while other users' records remain
        assert await store.has_thread(THREAD)
        (later,) = await store.put_batch([event()])
        assert later.seq == len(two_users) + 1
        (thread,) = await store.list_threads()
        assert thread["event_count"] == 4

    async def test_a_user_id_must_be_text(self, store):
        with pytest.raises(ValueError, match="user_id"):
            await store.list_messages(THREAD, user_id=5)
        with pytest.raises(InvalidEvent, match="user_id"):
            await store.put_batch([event(user_id="")])

    # -- lifecycle ---------------------------------------------------------------

    async def test_ping_answers_on_an_open_store(self, store):
        await store.ping()

    async def test_a_closed_store_is_unavailable(self, store_url, store_options):
        opened = await open_store(store_url, **store_options)
        await opened.close()
        with pytest.raises(StoreUnavailable, match="closed"):
            await opened.ping()
        with pytest.raises(StoreUnavailable, match="closed"):
            await opened.put_batch([event()])
        with pytest.raises(StoreUnavailable, match="closed"):
            await opened.list_messages(THREAD)
        await opened.close()  # idempotent


    # -- reader claims (optional: `claim_run`, `release_run`) ------------------------

    async def test_a_claim_is_held_until_released(self, store):
        if not supports(store, "claim_run"):
            pytest.skip("the store does not claim runs")
        assert await store.claim_run("r1")
        assert await store.claim_run("r1"), "claiming a run it holds again answers True"
        assert await store.claim_run("r2")
        await store.release_run("r1")
        await store.release_run("r1")  # nothing held: nothing to do
        await store.release_run("never-claimed")
        assert await store.claim_run("r1")


class SharedStorageConformance(RunEventStoreConformance):
    """The multi-writer behaviour of a backend whose storage outlives one store
    object (a file, a database): several store objects and several processes
    writing the same thread share one sequence."""

    shared_storage = True


    async def test_two_stores_on_the_same_storage_share_one_sequence(
        self, store, store_url, store_options
    ):
        async with open_store(store_url, **store_options) as other:

            async def write(target: RunEventStore, tag: str) -> None:
                for i in range(20):
                    await target.put_batch(
                        [
                            event(run_id=tag, content=[tag, i, j])
                            for j in range(1 + i % 3)
                        ]
                    )

            await asyncio.gather(write(store, "a"), write(other, "b"))
            total = await other.last_seq(THREAD)
            assert seqs(await store.list_messages(THREAD, limit=1000)) == list(
                range(1, total + 1)
            )
            assert total == 2 * sum(1 + i % 3 for i in range(20))

    async def test_put_if_absent_from_two_stores_creates_one_record(
        self, store, store_url, store_options
    ):
        async with open_store(store_url, **store_options) as other:
            results = await asyncio.gather(
                *(
                    target.put_if_absent(
                        thread_id=THREAD, run_id="r", event_type=RUN_END, category=OUTPUTS
                    )
                    for _ in range(10)
                    for target in (store, other)
                )
            )
        assert sum(created for _, created in results) == 1
        assert len(await store.list_events(THREAD, "r")) == 1

    async def test_count_messages_is_shared_between_stores(
        self, store, store_url, store_options
    ):
        async with open_store(store_url, **store_options) as other:
            await store.put_batch([event(run_id="a"), event(run_id="b")])
            await other.put_batch([event(run_id="a"), event(run_id="b", event_type=RUN_START)])
            await other.delete_by_run(THREAD, "a")
            assert await store.count_messages(THREAD) == 1

    async def test_separate_processes_get_contiguous_seqs(
        self, store, store_url, store_options, tmp_path
    ):
        writers, batches = 4, 25
        barrier = tmp_path / "barrier"
        barrier.mkdir()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                __name__,
                ",".join(self.backend_modules),
                store_url,
                json.dumps(store_options),
                THREAD,
                str(w),
                str(batches),
                str(barrier),
                env=env,
            )
            for w in range(writers)
        ]
        try:
            deadline = time.monotonic() + 120
            while len(list(barrier.glob("ready-*"))) < writers:
                exited = [p.returncode for p in procs if p.returncode is not None]
                assert not exited, f"a writer process exited early: {exited}"
                assert time.monotonic() < deadline, "writer processes did not start"
                await asyncio.sleep(0.05)
            (barrier / "go").touch()
            codes = await asyncio.wait_for(
                asyncio.gather(*(p.wait() for p in procs)), timeout=120
            )
            assert codes == [0] * writers
        finally:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    await p.wait()
        per_writer = sum(1 + b % 3 for b in range(batches))
        total = writers * per_writer
        stored = await store.list_messages(THREAD, limit=10_000)
        assert seqs(stored) == list(range(1, total + 1))
        assert await store.last_seq(THREAD) == total
        for w in range(writers):
            mine = [e for e in stored if e.run_id == f"run-{w}"]
            # each process's events in the order it wrote them
            assert [(e.content["batch"], e.content["item"]) for e in mine] == [
                (b, i) for b in range(batches) for i in range(1 + b % 3)
            ]


    async def test_a_run_has_one_claimant_among_stores(self, store, store_url, store_options):
        if not supports(store, "claim_run"):
            pytest.skip("the store does not claim runs")
        async with open_store(store_url, **store_options) as other:
            assert await store.claim_run("r1")
            assert not await other.claim_run("r1")
            assert await other.claim_run("r2")
            assert not await store.claim_run("r2")
            await store.release_run("r1")
            assert await other.claim_run("r1")
            await other.release_run("r1")
            await other.release_run("r2")
            assert await store.claim_run("r2")

    async def test_closing_a_store_releases_its_claims(self, store, store_url, store_options):
        if not supports(store, "claim_run"):
            pytest.skip("the store does not claim runs")
        other = await open_store(store_url, **store_options).__aenter__()
        assert await other.claim_run("r1")
        assert not await store.claim_run("r1")
        await other.close()
        assert await store.claim_run("r1")

    async def test_a_killed_processs_claims_are_taken_over(
        self, store, store_url, store_options, tmp_path
    ):
        if not supports(store, "claim_run"):
            pytest.skip("the store does not claim runs")
        ready = tmp_path / "claimed"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", __name__, "claim", ",".join(self.backend_modules),
            store_url, json.dumps(store_options), "r1", str(ready), env=env,
        )
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                assert proc.returncode is None, "the claiming process exited early"
                assert time.monotonic() < deadline, "the claiming process did not claim"
                await asyncio.sleep(0.05)
            assert not await store.claim_run("r1")
            assert await store.claim_run("r2")
        finally:
            proc.kill()
            await proc.wait()
        # Its claim went with it (PostgreSQL notices the closed connection at once).
        deadline = time.monotonic() + 10
        while not await store.claim_run("r1"):
            assert time.monotonic() < deadline, "the killed process's claim outlived it"
            await asyncio.sleep(0.1)


async def _claim_and_wait(url: str, options: dict[str, object], run_id: str, ready: Path) -> None:
    """The process of `test_a_killed_processs_claims_are_taken_over`: claims, says so, waits to be killed."""
    async with open_store(url, **options) as store:
        assert await store.claim_run(run_id)
        ready.touch()
        await asyncio.sleep(600)


async def _append_as_writer(
    url: str, options: dict[str, object], thread_id: str, writer: str, batches: int, barrier: Path
) -> None:
    """One writer process of `test_separate_processes_get_contiguous_seqs`.

    Creates BARRIER/ready-WRITER once the store is open, then waits for
    BARRIER/go so that all writers contend for the thread at the same moment.
    """
    async with open_store(url, **options) as store:
        (barrier / f"ready-{writer}").touch()
        while not (barrier / "go").exists():
            await asyncio.sleep(0.005)
        for batch in range(batches):
            await store.put_batch(
                [
                    make_event(
                        thread_id=thread_id,
                        run_id=f"run-{writer}",
                        event_type=LLM_AI_RESPONSE,
                        content={"writer": writer, "batch": batch, "item": item},
                        source_key=f"{writer}:{batch}:{item}",
                    )
                    for item in range(1 + batch % 3)
                ]
            )


if __name__ == "__main__":
    # python -m journal_bridge.store.conformance MODULES URL OPTIONS_JSON THREAD_ID WRITER BATCHES BARRIER_DIR
    # python -m journal_bridge.store.conformance claim MODULES URL OPTIONS_JSON RUN_ID READY_FILE
    import importlib

    if sys.argv[1] == "claim":
        modules, url, options, run_id, ready = sys.argv[2:7]
        for module in filter(None, modules.split(",")):
            importlib.import_module(module)
        asyncio.run(_claim_and_wait(url, json.loads(options), run_id, Path(ready)))
        sys.exit(0)
    modules, url, options, thread_id, writer, batches, barrier = sys.argv[1:8]
    for module in filter(None, modules.split(",")):
        importlib.import_module(module)
    asyncio.run(_append_as_writer(url, json.loads(options), thread_id, writer, int(batches), Path(barrier)))
