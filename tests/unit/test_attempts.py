"""A run the runtime executed again: the history holds the attempt that went on, read live or backfilled."""

from __future__ import annotations

import json
from types import SimpleNamespace

from journal_bridge.capture.backfill import backfill_thread
from journal_bridge.delivery.bridge import Bridge
from journal_bridge.mapping.attempts import frame_attempt, run_message_ids
from journal_bridge.mapping.capture_setting import Capture
from journal_bridge.mapping.reader import RunSource
from journal_bridge.model import records
from journal_bridge.projection import history
from journal_bridge.store import open_store

THREAD, RUN, EARLIER = "t-attempts", "r2", "r1"
STATE = Capture("state", ("values", "custom"), ("custom",))


def _human(i):
    return {"type": "human", "content": i, "id": i}


def _ai(i):
    return {"type": "ai", "content": i, "id": i}


def _checkpoint(cid, parent, run_id, attempt, messages, *, step, nxt=("model",)):
    return {
        "checkpoint": {"checkpoint_id": cid, "checkpoint_ns": ""},
        "parent_checkpoint": {"checkpoint_id": parent} if parent else None,
        "metadata": {"run_id": run_id, "run_attempt": attempt, "step": step, "source": "loop"},
        "values": {"messages": messages},
        "created_at": f"2026-12-01T00:00:{step:02d}+00:00",
        "next": list(nxt),
        "tasks": [{"name": n} for n in nxt],
    }


def _tool(i):
    return {"type": "tool", "content": i, "id": i, "tool_call_id": f"call-{i}"}


# The thread's checkpoints, newest first: r1 answered; r2's first attempt checkpointed its
# input and a tool call, ran the tool (its writes saved, its checkpoint not), answered and
# died; its second attempt took the tool's writes over and answered anew. `h2`, `c2` and
# `t2` are r2's in either attempt; `a2-killed` in none.
HISTORY = [
    _checkpoint("c7", "c6", RUN, 2, [_human("h1"), _ai("a1"), _human("h2"), _ai("c2"), _tool("t2"), _ai("a2")], step=7, nxt=()),
    _checkpoint("c6", "c5", RUN, 2, [_human("h1"), _ai("a1"), _human("h2"), _ai("c2"), _tool("t2")], step=6),
    _checkpoint("c5", "c4", RUN, 1, [_human("h1"), _ai("a1"), _human("h2"), _ai("c2")], step=5, nxt=("tools",)),
    _checkpoint("c4", "c3", RUN, 1, [_human("h1"), _ai("a1"), _human("h2")], step=4),
    _checkpoint("c3", "c2", RUN, 1, [_human("h1"), _ai("a1")], step=3, nxt=("__start__",)),
    _checkpoint("c2", "c1", EARLIER, 1, [_human("h1"), _ai("a1")], step=2, nxt=()),
    _checkpoint("c1", None, EARLIER, 1, [_human("h1")], step=1),
]

_BEFORE = [_human("h1"), _ai("a1")]
# What the run's resumable stream replays: both attempts, one after the other.
ATTEMPTS = [
    ("metadata", {"run_id": RUN, "attempt": 1}),
    ("values", {"messages": _BEFORE}),
    ("values", {"messages": [*_BEFORE, _human("h2")]}),
    ("values", {"messages": [*_BEFORE, _human("h2"), _ai("c2")]}),
    ("values", {"messages": [*_BEFORE, _human("h2"), _ai("c2"), _tool("t2")]}),
    ("values", {"messages": [*_BEFORE, _human("h2"), _ai("c2"), _tool("t2"), _ai("a2-killed")]}),
    ("metadata", {"run_id": RUN, "attempt": 2}),
    ("values", {"messages": [*_BEFORE, _human("h2"), _ai("c2"), _tool("t2")]}),
    ("values", {"messages": [*_BEFORE, _human("h2"), _ai("c2"), _tool("t2"), _ai("a2")]}),
]
HISTORY_SHOWN = ["h1", "a1", "h2", "c2", "t2", "a2"]


class _Server:
    def __init__(self) -> None:
        self.history_reads = 0
        self.runs = SimpleNamespace(join_stream=self._join, get=self._run)
        self.threads = SimpleNamespace(get=self._thread, get_history=self._history, get_state=self._state)
        self.assistants = None

    def _join(self, thread_id, run_id, params=None, last_event_id=None):
        self.join_params = params

        async def replay():
            for index, (event, data) in enumerate(ATTEMPTS, 1):
                yield SimpleNamespace(event=event, data=data, id=str(index))

        return replay()

    async def _run(self, thread_id, run_id):
        return {"run_id": run_id, "status": "success", "assistant_id": None, "kwargs": {}}

    async def _thread(self, thread_id):
        return {"thread_id": thread_id, "status": "idle", "metadata": {}}

    async def _history(self, thread_id, limit=10, before=None, **_):
        self.history_reads += 1
        start = 0 if before is None else next(i for i, s in enumerate(HISTORY) if s["checkpoint"] == before) + 1
        return HISTORY[start : start + limit]

    async def _state(self, thread_id, checkpoint_id=None, **_):
        return HISTORY[0]


def test_a_frame_names_its_attempt():
    assert frame_attempt({"run_id": RUN, "attempt": 2}) == 2
    assert frame_attempt({"run_id": RUN}) is None
    assert frame_attempt({"attempt": True}) is None and frame_attempt("x") is None


def test_a_runs_messages_are_those_its_checkpoints_hold_whichever_attempt_wrote_them():
    assert run_message_ids(HISTORY, RUN) == {"h2", "c2", "t2", "a2"}
    assert run_message_ids(HISTORY[2:], RUN) == {"h2", "c2"}
    assert run_message_ids(HISTORY, EARLIER) == {"h1", "a1"}
    later = _checkpoint("c7", "c6", "r3", 1, [], step=7)
    assert run_message_ids([later, *HISTORY], RUN) == {"h2", "c2", "t2", "a2"}, "a later run's checkpoints are passed over"
    assert run_message_ids(HISTORY, "r9") == set()


async def _journal_of_the_killed_attempt(store) -> None:
    """What the killed attempt's reader journaled before it died with its process."""
    for event in ATTEMPTS[2:6]:
        for message in event[1]["messages"][2:]:
            draft = records.conversation_message(message, f"message:{message['id']}", 0)
            await store.put_batch([records.record(THREAD, RUN, draft)])


async def _items(store) -> list[str]:
    return [i["id"] for i in (await history.history_page(store, THREAD, limit=500))["data"]]


async def test_a_reader_of_both_attempts_journals_the_second_as_the_run(tmp_path):
    server = _Server()
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        await store.put_batch([records.record(THREAD, EARLIER, records.conversation_message(m, f"message:{m['id']}", 0))
                               for m in (_human("h1"), _ai("a1"))])
        bridge = Bridge(store, lambda: server)
        await bridge.start()
        bridge.observe(THREAD, RUN, RunSource(STATE, run={"assistant_id": None, "kwargs": {"input": {"messages": [_human("h2")]}}}))
        await bridge.wait_for_runs()
        await bridge.stop()
        assert await _items(store) == HISTORY_SHOWN
        # A join that names its modes gets `metadata` frames only if it names them too.
        assert "metadata" in json.loads(server.join_params["stream_mode"])
        assert [r.event_type for r in await store.list_events(THREAD, RUN)].count("middleware:summarize") == 0, \
            "what the killed attempt held past its checkpoint is no compaction"
        ids = [r.content.get("id") for r in await store.list_events(THREAD, RUN) if r.category == "message"]
        assert "a2-killed" in ids, "the killed attempt stays in the journal"
        # A backfill afterwards adds nothing and no second fork.
        result = await backfill_thread(server, store, THREAD)
        assert result.written == 0, result
        assert await _items(store) == HISTORY_SHOWN


async def test_a_run_executed_again_and_ended_unseen_is_backfilled_as_one_attempt(tmp_path):
    server = _Server()
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        await store.put_batch([records.record(THREAD, EARLIER, records.conversation_message(m, f"message:{m['id']}", 0))
                               for m in (_human("h1"), _ai("a1"))])
        await _journal_of_the_killed_attempt(store)
        assert await _items(store) == ["h1", "a1", "h2", "c2", "t2", "a2-killed"]

        result = await backfill_thread(server, store, THREAD)
        assert await _items(store) == HISTORY_SHOWN
        assert result.superseded == 1 and result.written == 1, result  # the answer, after the fork
        again = await backfill_thread(server, store, THREAD)
        assert again.written == 0 and again.superseded == 0, again
        assert await _items(store) == HISTORY_SHOWN


async def test_a_backfill_of_a_journal_with_hidden_calls_writes_no_fork(tmp_path):
    """Records the checkpoints never hold by design (the summarizer's calls) are no attempt."""
    server = _Server()
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        hidden = records.model_call({"type": "ai", "content": "summary", "id": "s1"}, "llm:s1", "middleware:summarize", 1)
        await store.put_batch([records.record(THREAD, RUN, hidden)])
        for message in (_human("h1"), _ai("a1"), _human("h2"), _ai("c2"), _tool("t2"), _ai("a2")):
            await store.put_batch([records.record(THREAD, RUN if message["id"] not in ("h1", "a1") else EARLIER,
                                                  records.conversation_message(message, f"message:{message['id']}", 0))])
        result = await backfill_thread(server, store, THREAD)
        assert result.superseded == 0 and result.written == 0, result


async def test_a_run_executed_once_keeps_the_messages_no_checkpoint_holds(tmp_path):
    """A run that checkpoints only at its end, compacting on the way, journaled messages
    no checkpoint holds: one attempt, nothing superseded, nothing hidden."""
    server = _Server()
    once = [{**state, "metadata": {**state["metadata"], "run_attempt": 1}} for state in HISTORY]
    server._history = lambda thread_id, limit=10, before=None, **_: _page(once, limit, before)
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        await store.put_batch([records.record(THREAD, EARLIER, records.conversation_message(m, f"message:{m['id']}", 0))
                               for m in (_human("h1"), _ai("a1"))])
        await _journal_of_the_killed_attempt(store)
        server.threads.get_history = server._history
        result = await backfill_thread(server, store, THREAD)
        assert result.superseded == 0, result
        assert await _items(store) == ["h1", "a1", "h2", "c2", "t2", "a2-killed", "a2"]


async def _page(states, limit, before):
    start = 0 if before is None else next(i for i, s in enumerate(states) if s["checkpoint"] == before) + 1
    return states[start : start + limit]


async def test_a_run_that_ended_and_was_executed_anew_is_superseded_by_its_end(tmp_path):
    """The in-memory runtime executes anew a run that was running when it last saved its
    state, though the run had ended since: attempt 1 again, and a journaled end whose
    last message the thread's checkpoints never held."""
    server = _Server()
    once = [{**state, "metadata": {**state["metadata"], "run_attempt": 1}} for state in HISTORY]
    server.threads.get_history = lambda thread_id, limit=10, before=None, **_: _page(once, limit, before)
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        await store.put_batch([records.record(THREAD, EARLIER, records.conversation_message(m, f"message:{m['id']}", 0))
                               for m in (_human("h1"), _ai("a1"))])
        await _journal_of_the_killed_attempt(store)
        ended = {"messages": [*_BEFORE, _human("h2"), _ai("c2"), _tool("t2"), _ai("a2-killed")]}
        await store.put_batch([records.record(THREAD, RUN, records.run_end(ended))])
        result = await backfill_thread(server, store, THREAD)
        assert result.superseded == 1, result
        assert await _items(store) == HISTORY_SHOWN


async def test_a_run_a_restart_lost_leaves_the_history(tmp_path):
    """The in-memory runtime restarted from a state saved before a run was made: the
    server has neither the run nor its messages; a run on another branch is kept."""
    from tests.harness.sdk_errors import run_not_found

    server = _Server()
    found = server.runs.get

    async def get(thread_id, run_id):
        if run_id == "r-lost":
            raise run_not_found(thread_id, run_id)
        return await found(thread_id, run_id)

    server.runs.get = get
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        for run_id, message in (("r-lost", _human("lost-q")), ("r-lost", _ai("lost-a")), ("r-other-branch", _ai("b-a"))):
            await store.put_batch([records.record(THREAD, run_id, records.conversation_message(message, f"message:{message['id']}", 0))])
        result = await backfill_thread(server, store, THREAD)
        assert result.superseded == 1, result
        items = await _items(store)
        assert "lost-q" not in items and "lost-a" not in items and "b-a" in items, items
        assert (await backfill_thread(server, store, THREAD)).superseded == 0
