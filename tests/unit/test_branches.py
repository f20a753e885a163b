"""Branches of a journal, read from real stores: which records a branch holds, and paging over forks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journal_bridge.model import records
from journal_bridge.model.envelope import make_event
from journal_bridge.projection import branches, history
from journal_bridge.store import open_store

THREAD = "forked"


class _Journal:
    """Writes a thread's journal run by run, forks included, as the bridge would."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.state: list[str] = []  # the message ids of the thread's head
        self.run_of: dict[str, str] = {}

    def run(self, run_id: str, *texts: str) -> None:
        self.events.append(make_event(thread_id=THREAD, run_id=run_id, event_type="run.start", content={}))
        for text in texts:
            kind = "human" if text.startswith("q") else "ai"
            event_type = "llm.human.input" if kind == "human" else "llm.ai.response"
            self.events.append(make_event(thread_id=THREAD, run_id=run_id, event_type=event_type,
                                          content={"type": kind, "id": text, "content": text}))
            self.state.append(text)
            self.run_of[text] = run_id
        self.events.append(make_event(thread_id=THREAD, run_id=run_id, event_type="run.end", content={}))

    def fork(self, run_id: str, after: str, *texts: str) -> None:
        """Run `run_id` from the checkpoint whose newest message is `after`."""
        kept = self.state[: self.state.index(after) + 1]
        checkpoint = {"values": {"messages": [{"id": i} for i in kept]}, "metadata": {"run_id": self.run_of[after]},
                      "next": ["model"], "created_at": "2026-12-01T00:00:00+00:00"}
        self.events.append(records.fork(THREAD, run_id, {"checkpoint_id": f"cp-{after}"}, checkpoint))
        self.state = kept
        self.run(run_id, *texts)


def _scenario() -> tuple[_Journal, list[str]]:
    journal = _Journal()
    journal.run("r1", "q1", "a1")
    journal.run("r2", "q2", "a2")
    journal.run("r3", "q3", "a3")
    journal.fork("r4", "q3", "a3-again")          # regenerate
    journal.fork("r5", "a1", "q2-edited", "a2b")  # edit the second question
    journal.run("r6", "q3b", "a3b")
    journal.fork("r7", "a2b", "q3c", "a3c")       # a fork of the fork
    journal.run("r8", "q4", "a4")
    rolled = journal.state[:]
    journal.run("r9", "q5", "a5-partial")
    journal.events.append(records.rollback(THREAD, "r9"))
    journal.state = rolled
    journal.run("r10", "q5b", "a5b")
    return journal, journal.state


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'journal.db'}" if request.param == "sqlite" else "memory://"
    async with open_store(url) as opened:
        yield opened


async def _seed(store) -> list[str]:
    journal, expected = _scenario()
    await store.put_batch(journal.events)
    return expected


async def test_the_history_is_the_branch_the_thread_is_on(store):
    expected = await _seed(store)
    assert expected == ["q1", "a1", "q2-edited", "a2b", "q3c", "a3c", "q4", "a4", "q5b", "a5b"]
    page = await history.history_page(store, THREAD, limit=500)
    assert [i["id"] for i in page["data"]] == expected


@pytest.mark.parametrize("run_id", ["r3", "r4", "r6", "r9"])
async def test_every_abandoned_run_reads_as_the_branch_it_ends(store, run_id):
    await _seed(store)
    ends = {
        "r3": ["q1", "a1", "q2", "a2", "q3", "a3"],
        "r4": ["q1", "a1", "q2", "a2", "q3", "a3-again"],
        "r6": ["q1", "a1", "q2-edited", "a2b", "q3b", "a3b"],
        "r9": ["q1", "a1", "q2-edited", "a2b", "q3c", "a3c", "q4", "a4", "q5", "a5-partial"],
    }
    page = await history.history_page(store, THREAD, limit=500, run_id=run_id)
    assert [i["id"] for i in page["data"]] == ends[run_id]


async def _paged_both_ways(store, limit: int) -> tuple[list[str], list[str]]:
    """The ids of the thread's history read page by page from the newest back,
    and from the start forward; every page backward holds 1 to `limit` items."""
    backward, before = [], None
    while True:
        page = await history.history_page(store, THREAD, limit=limit, before_seq=before)
        assert 0 < len(page["data"]) <= limit
        backward = page["data"] + backward
        if not page["has_more"]:
            break
        before = page["next_before_seq"]
    forward, after = [], 0
    while True:
        page = await history.history_page(store, THREAD, limit=limit, after_seq=after)
        forward += page["data"]
        if not page["has_more"]:
            break
        after = page["next_after_seq"]
    return [i["id"] for i in backward], [i["id"] for i in forward]


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
async def test_paging_either_way_over_forks_yields_the_branch_once(store, limit):
    expected = await _seed(store)
    backward, forward = await _paged_both_ways(store, limit)
    assert backward == forward == expected


async def test_the_versions_at_each_fork_point_are_marked(store):
    await _seed(store)
    items = (await history.history_page(store, THREAD, limit=500))["data"]
    marked = {i["id"]: (i["branch"]["index"], i["branch"]["count"]) for i in items if "branch" in i}
    # q2-edited is the second version after a1; q3c the second after a2b. The rollback is no version.
    assert marked == {"q2-edited": (2, 2), "q3c": (2, 2)}
    original = (await history.history_page(store, THREAD, limit=500, run_id="r3"))["data"]
    marked = {i["id"]: (i["branch"]["index"], i["branch"]["count"]) for i in original if "branch" in i}
    assert marked == {"q2": (1, 2), "a3": (1, 2)}


async def test_a_journal_without_forks_is_read_as_before(store):
    journal = _Journal()
    journal.run("r1", "q1", "a1")
    await store.put_batch(journal.events)
    assert await branches.branch_of(store, THREAD) is None


class _WritesDuringRead:
    """The store, with a regenerate's fork and records landing while a page is
    being read: right after the page looks for the thread's newest fork."""

    def __init__(self, store, events) -> None:
        self._store, self._events = store, events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list_timeline(self, thread_id: str, **query: Any):
        page = await self._store.list_timeline(thread_id, **query)
        if query.get("run_id") == records.BRANCHES_RUN_ID and self._events:
            events, self._events = self._events, []
            await self._store.put_batch(events)
        return page


@pytest.mark.parametrize("cursor", ["after_seq", "newest"])
async def test_a_page_read_while_a_regenerate_lands_shows_none_of_it_or_all_of_it_marked(store, cursor):
    journal = _Journal()
    journal.run("r1", "q1", "a1")
    journal.run("r2", "q2", "a2")
    await store.put_batch(journal.events)
    last_seq = await store.last_seq(THREAD)
    written = len(journal.events)
    journal.fork("r3", "q2", "a2-again")
    landing = journal.events[written:]
    reading = _WritesDuringRead(store, landing)
    query = {"after_seq": last_seq} if cursor == "after_seq" else {}
    first = (await history.history_page(reading, THREAD, limit=50, **query))["data"]
    assert not reading._events, "the regenerate landed during the read"
    # As of the moment the page was asked for: the regenerate had not happened.
    assert "a2-again" not in [i["id"] for i in first]
    if cursor == "newest":
        assert [i["id"] for i in first] == ["q1", "a1", "q2", "a2"]
    # The next page has the regenerated answer, marked as the second version.
    after = first[-1]["seq"] if first else last_seq
    polled = (await history.history_page(store, THREAD, limit=50, after_seq=after))["data"]
    assert [(i["id"], i.get("branch", {}).get("index")) for i in polled] == [("a2-again", 2)]


def _executed_again(fork_at: str) -> _Journal:
    """r2's worker dies after its tool call and a half-written answer; the runtime
    executes it again from its last checkpoint (q2, c2). Then r3, and a regenerate
    of r3 when `fork_at` says so."""
    journal = _Journal()
    journal.run("r1", "q1", "a1")
    journal.events.append(make_event(thread_id=THREAD, run_id="r2", event_type="run.start", content={}))
    for text, kind in (("q2", "human"), ("c2", "ai"), ("a2-killed", "ai")):
        event_type = "llm.ai.response" if kind == "ai" else "llm.human.input"
        journal.events.append(make_event(thread_id=THREAD, run_id="r2", event_type=event_type,
                                         content={"type": kind, "id": text, "content": text}))
    journal.events.append(records.superseded_attempt(THREAD, "r2", 2, ["q2", "c2"]))
    journal.state = ["q1", "a1", "q2", "c2"]
    journal.run_of.update({"q2": "r2", "c2": "r2"})
    journal.run("r2", "a2")
    journal.run("r3", "q3", "a3")
    if fork_at:
        journal.fork("r4", fork_at, "a3-again")
    return journal


@pytest.mark.parametrize("fork_at", ["", "q3", "c2"])
async def test_a_run_executed_again_shows_one_attempt(store, fork_at):
    journal = _executed_again(fork_at)
    await store.put_batch(journal.events)
    expected = {"": ["q1", "a1", "q2", "c2", "a2", "q3", "a3"],
                "q3": ["q1", "a1", "q2", "c2", "a2", "q3", "a3-again"],
                "c2": ["q1", "a1", "q2", "c2", "a3-again"]}[fork_at]
    for limit in (500, 2):
        backward, forward = await _paged_both_ways(store, limit)
        assert backward == forward == expected
    # A run executed again is no version anybody chose; the killed attempt's records stay in the journal.
    items = (await history.history_page(store, THREAD, limit=500))["data"]
    marked = [i["id"] for i in items if "branch" in i]
    assert marked == ({"": [], "q3": ["a3-again"], "c2": ["a3-again"]}[fork_at])
    kept = await store.list_events(THREAD, "r2", limit=50)
    assert "a2-killed" in [r.content.get("id") for r in kept]
    # Written again (a live reader and a backfill both saw the attempt), it is one fork.
    await store.put_batch([records.superseded_attempt(THREAD, "r2", 2, ["q2", "c2"])])
    assert len(await branches.read_forks(store, THREAD)) == (2 if fork_at else 1)
