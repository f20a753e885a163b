"""Branches: which records of a thread's journal lie on the branch a reader asks for.

A thread is a tree of checkpoints: a regenerate, an edit, a fork from a
checkpoint or a state update from an earlier checkpoint goes on from there
instead of the thread's head. The journal stays append-only -- every run ever
made stays readable -- and each such run or update has a `journal.fork`
record (run `journal-bridge:branches`, written before the run's own records)
naming the checkpoint, the run that wrote it and its newest message ids.

The branch that ends at a place of the journal (its end by default: the
thread's current branch) is found walking back. The records after the newest
fork at or below that place lie on it (the fork's run and the runs that went
on from its end); before them the branch goes on at the fork's *cut*: the last
record that lies on the fork's checkpoint. Between the cut and the fork lie
abandoned branches. So a branch is a few seq ranges, found newest first and
only as deep as a reader pages.

The cut of a fork is the newest record below it, of the checkpoint's run (or,
failing that, of any run), whose message id -- or a marker's summary id -- is
among the checkpoint's newest message ids; when the checkpoint comes after
that record's run ended, the run's outcome records that follow it are on the
branch too. A fork whose checkpoint the server could not read, or whose
messages the journal never held, abandons nothing; one from a checkpoint with
no messages abandons everything before it. A message a state update changed
in place shows in its new version only.

A run the runtime executed again after its worker died has a fork of its
own (`records.superseded_attempt`): it moves no cut, and the run's message
records below it leave the branch unless the thread's checkpoints hold their
message (`kept_message_ids`): what a killed attempt journaled past its last
checkpoint. The completing attempt's records lie above it.

A journal without forks is one branch, as before forks were recorded:
journals written before then read as they always did.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from journal_bridge.model import records
from journal_bridge.model.errors import RunNotFound
from journal_bridge.model.envelope import ERROR, MESSAGE, MIDDLEWARE, OUTPUTS, TRACE, StoredRecord, stored_seq
from journal_bridge.model.records import BRANCHES_RUN_ID, FORK_EVENT
from journal_bridge.model.shapes import JournalBranchAlternative, JournalHistoryItem
from journal_bridge.store.base import RunEventStore

__all__ = ["Branch", "Fork", "annotate_forks", "branch_of", "forget_thread", "read_forks"]

_PAGE = 500
_ENDINGS = frozenset({ERROR, OUTPUTS})
_MAX_REMEMBERED = 10_000
_K = TypeVar("_K", bound=tuple[object, ...])
_V = TypeVar("_V")


class _Remembered:
    """What never changes once found, per store: a fork's cut and the first item
    after a seq (the journal is append-only, and a fork's run writes right after it)."""

    def __init__(self) -> None:
        self.cuts: OrderedDict[tuple[str, int, str | None], int] = OrderedDict()
        self.firsts: OrderedDict[tuple[str, int], tuple[int, str]] = OrderedDict()

    def keep(self, cache: OrderedDict[_K, _V], key: _K, value: _V) -> _V:
        cache[key] = value
        while len(cache) > _MAX_REMEMBERED:
            cache.popitem(last=False)
        return value


_REMEMBERED: weakref.WeakKeyDictionary[RunEventStore, _Remembered] = weakref.WeakKeyDictionary()


def _remembered(store: RunEventStore) -> _Remembered:
    if store not in _REMEMBERED:
        _REMEMBERED[store] = _Remembered()
    return _REMEMBERED[store]


def forget_thread(thread_id: str) -> None:
    """Drop what is remembered of a deleted thread: a thread made again with its id starts anew."""
    for remembered in list(_REMEMBERED.values()):
        _forget(remembered.cuts, thread_id)
        _forget(remembered.firsts, thread_id)


def _forget(cache: OrderedDict[_K, _V], thread_id: str) -> None:
    for key in [key for key in cache if key[0] == thread_id]:
        del cache[key]


@dataclass(frozen=True)
class Fork:
    """One `journal.fork` record, read."""

    seq: int
    run_id: str | None
    checkpoint_id: str | None
    checkpoint_run_id: str | None
    known: bool
    finished: bool
    message_ids: tuple[str, ...]
    message_count: int
    edited: frozenset[str]
    rolled_back_run_id: str | None = None
    attempt: int | None = None  # a run executed again: the attempt that superseded the earlier ones
    kept: frozenset[str] = frozenset()

    @classmethod
    def of(cls, record: StoredRecord) -> Fork:
        content: dict[str, object] = record.content if isinstance(record.content, dict) else {}
        ids, edited, count = content.get("message_ids"), content.get("edited_message_ids"), content.get("message_count")
        ids = ids if isinstance(ids, list) else []
        edited = edited if isinstance(edited, list) else []
        attempt, kept = content.get("attempt"), content.get("kept_message_ids")
        kept = kept if isinstance(kept, list) else []
        return cls(
            seq=int(record.seq or 0),
            run_id=_text(content.get("run_id")),
            checkpoint_id=_text(content.get("checkpoint_id")),
            checkpoint_run_id=_text(content.get("checkpoint_run_id")),
            known=bool(content.get("known")),
            finished=bool(content.get("finished")),
            message_ids=tuple(str(i) for i in ids),
            message_count=count if isinstance(count, int) else len(ids),
            edited=frozenset(str(i) for i in edited),
            rolled_back_run_id=_text(content.get("rolled_back_run_id")),
            attempt=attempt if isinstance(attempt, int) and content.get("superseded_run_id") else None,
            kept=frozenset(str(i) for i in kept),
        )


def _text(value: object) -> str | None:
    """A fork record's id field: its text, None when it has none."""
    return None if value is None else str(value)


async def latest_fork(store: RunEventStore, thread_id: str, at_or_below: int | None = None) -> Fork | None:
    """The newest fork at or below a seq (None: of all): one indexed read of one record."""
    page = await store.list_timeline(
        thread_id, categories=(TRACE,), run_id=BRANCHES_RUN_ID, limit=1,
        **({} if at_or_below is None else {"before_seq": at_or_below + 1}),
    )
    return Fork.of(page[-1]) if page else None


async def read_forks(store: RunEventStore, thread_id: str, *, after_seq: int = 0) -> list[Fork]:
    """The thread's forks above `after_seq`, oldest first: one indexed read per 500."""
    forks: list[Fork] = []
    after = after_seq
    while True:
        page = await store.list_events(thread_id, BRANCHES_RUN_ID, event_types=[FORK_EVENT], limit=_PAGE, after_seq=after)
        forks.extend(Fork.of(record) for record in page)
        if len(page) < _PAGE:
            return forks
        after = stored_seq(page[-1])


def identity(record: StoredRecord) -> str | None:
    """The message id a record stands for: a message's id, a marker's summary id."""
    content = record.content if isinstance(record.content, dict) else {}
    if record.category == MESSAGE:
        value = content.get("id")
    elif record.category == MIDDLEWARE:
        value = (content.get("changes") or {}).get("summary_message_id") if isinstance(content.get("changes"), dict) else None
    else:
        value = None
    return str(value) if value else None


class Branch:
    """The seq ranges of one branch, newest first, found as far as asked.

    `top` is the highest seq on the branch (None: the journal's end).
    """

    def __init__(self, store: RunEventStore, thread_id: str, top: int | None = None, *, newest: Fork | None = None) -> None:
        self._store = store
        self._thread_id = thread_id
        self._pos: int | None = top
        self._newest = newest  # the newest fork, when the caller read it already
        self._done = False
        self.ranges: list[tuple[int, int | None]] = []  # (low, high), high None: no bound
        # (fork seq, ids): a message of these ids below the fork shows in its newer version only.
        self._edited: list[tuple[int, frozenset[str]]] = []
        # (fork seq, run, kept ids): the run's message records below the fork show only if kept.
        self._superseded: list[tuple[int, str, frozenset[str]]] = []
        self.chain: list[Fork] = []  # the forks the branch went through, newest first

    async def _extend(self) -> bool:
        """Find the next lower range; False when the branch has no more."""
        if self._done:
            return False
        pos = self._pos
        fork: Fork | None
        if self._newest is not None and pos is None:
            fork, self._newest = self._newest, None
        else:
            fork = await latest_fork(self._store, self._thread_id, pos)
        if fork is None:
            self.ranges.append((1, pos))
            self._done = True
            return True
        self.ranges.append((fork.seq + 1, pos))
        if fork.attempt is not None:
            # A run executed again: no cut, the branch goes on below; its earlier attempts' records are sifted.
            self._superseded.append((fork.seq, str(fork.run_id), fork.kept))
            self._pos = fork.seq - 1
            if self._pos < 1:
                self._done = True
            return True
        self.chain.append(fork)
        if fork.edited:
            self._edited.append((fork.seq, fork.edited))
        cut = await self.cut(fork)
        if cut < 1:
            self._done = True
        self._pos = cut
        return True

    async def range_below(self, before: int | None) -> tuple[int, int | None] | None:
        """The on-branch range holding the newest seqs below `before` (None: the newest),
        clipped to them: `(low, high)`, high inclusive and None for no bound."""
        i = 0
        while True:
            while i >= len(self.ranges):
                if not await self._extend():
                    return None
            low, high = self.ranges[i]
            if before is not None:
                if before <= low:
                    i += 1
                    continue
                high = before - 1 if high is None else min(high, before - 1)
            return low, high

    async def extend_to(self, seq: int) -> None:
        """Find the ranges down to `seq`, so `contains` can tell it."""
        while not self._done and (not self.ranges or self.ranges[-1][0] > seq):
            await self._extend()

    async def all_ranges(self) -> list[tuple[int, int | None]]:
        while await self._extend():
            pass
        return self.ranges

    def visible(self, record: StoredRecord) -> bool:
        """Whether an on-branch record shows (not replaced by a state update's version)."""
        if record.category != MESSAGE or not (self._edited or self._superseded):
            return True
        message_id = identity(record)
        seq = stored_seq(record)
        if any(seq < since and record.run_id == run_id and message_id not in kept
               for since, run_id, kept in self._superseded):
            return False
        return not any(seq < since and message_id in ids for since, ids in self._edited)

    def contains(self, seq: int) -> bool:
        """Whether `seq` lies in a range found so far."""
        return any(seq >= low and (high is None or seq <= high) for low, high in self.ranges)

    async def cut(self, fork: Fork) -> int:
        """The seq of the last record on the fork's checkpoint (0: none)."""
        remembered = _remembered(self._store)
        key = (self._thread_id, fork.seq, fork.checkpoint_id)
        if key in remembered.cuts:
            return remembered.cuts[key]
        return remembered.keep(remembered.cuts, key, await self.find_cut(fork))

    async def first_after(self, seq: int) -> tuple[int, str] | None:
        """`(seq, run_id)` of the first message or marker above `seq`: the first
        item after a fork point, or of a fork's own branch."""
        remembered = _remembered(self._store)
        key = (self._thread_id, seq)
        if key in remembered.firsts:
            return remembered.firsts[key]
        found = await self._store.list_timeline(
            self._thread_id, categories=(MESSAGE, MIDDLEWARE), limit=1, after_seq=seq
        )
        if not found:
            return None  # nothing yet: asked again next time
        return remembered.keep(remembered.firsts, key, (stored_seq(found[0]), found[0].run_id))

    async def find_cut(self, fork: Fork) -> int:
        """`cut`, found now (not remembered)."""
        if fork.rolled_back_run_id:
            # The branch goes on from before the rolled back run's first record.
            first = await self._store.list_events(self._thread_id, str(fork.rolled_back_run_id), limit=1)
            return stored_seq(first[0]) - 1 if first and stored_seq(first[0]) < fork.seq else fork.seq - 1
        if not fork.known:
            return fork.seq - 1
        if fork.message_count == 0:
            return 0
        wanted = set(fork.message_ids)
        if fork.checkpoint_run_id:
            records = await self._run_records(str(fork.checkpoint_run_id), 0, fork.seq)
            hits = [r for r in records if identity(r) in wanted]
            if hits:
                return await self._with_ending(hits[-1], fork) if fork.finished else stored_seq(hits[-1])
        hit = await self._scan_back(wanted, fork.seq)
        if hit is None:
            return fork.seq - 1
        return await self._with_ending(hit, fork)

    async def _with_ending(self, hit: StoredRecord, fork: Fork) -> int:
        """The cut after `hit`, its run's outcome records below the fork included."""
        cut = stored_seq(hit)
        for record in await self._run_records(hit.run_id, cut, fork.seq):
            if record.category in (MESSAGE, MIDDLEWARE):
                break
            if record.category in _ENDINGS:
                cut = stored_seq(record)
        return cut

    async def _run_records(self, run_id: str, after: int, below: int) -> list[StoredRecord]:
        out: list[StoredRecord] = []
        while True:
            page = await self._store.list_events(self._thread_id, run_id, limit=_PAGE, after_seq=after)
            out.extend(r for r in page if stored_seq(r) < below)
            if len(page) < _PAGE or stored_seq(page[-1]) >= below:
                return out
            after = stored_seq(page[-1])

    async def _scan_back(self, wanted: set[str], below: int) -> StoredRecord | None:
        cursor = below
        while True:
            page = await self._store.list_timeline(
                self._thread_id, categories=(MESSAGE, MIDDLEWARE), limit=_PAGE, before_seq=cursor
            )
            for record in reversed(page):
                if identity(record) in wanted:
                    return record
            if len(page) < _PAGE:
                return None
            cursor = stored_seq(page[0])


async def branch_of(
    store: RunEventStore,
    thread_id: str,
    *,
    run_id: str | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    ceiling: int | None = None,
) -> Branch | None:
    """The branch to read: the thread's current one; the one ending with run
    `run_id`'s last record; or the one as of a checkpoint (`checkpoint`: its
    state, as `threads.get_state` returns it). None for a journal without forks
    read at its end.

    `ceiling`: the journal as of that seq (None: as it is now); a reader that
    reads up to a seq sees the forks up to it, and none written since.

    `LookupError` when `run_id` has no record in the thread.
    """
    if ceiling is None:
        ceiling = await store.last_seq(thread_id)
    if checkpoint is not None:
        # Where a run going on from the checkpoint now would fork.
        here = Fork.of(dataclasses.replace(
            records.fork(thread_id, None, {"checkpoint_id": (checkpoint.get("checkpoint") or {}).get("checkpoint_id")}, checkpoint),
            seq=ceiling + 1,
        ))
        top = await Branch(store, thread_id).find_cut(here)
        return Branch(store, thread_id, top=top)
    if run_id is None:
        newest = await latest_fork(store, thread_id, ceiling)
        return Branch(store, thread_id, newest=newest) if newest is not None else None
    last = None
    after = 0
    while True:
        page = await store.list_events(thread_id, run_id, limit=_PAGE, after_seq=after)
        if page:
            last = stored_seq(page[-1])
        if len(page) < _PAGE:
            break
        after = stored_seq(page[-1])
    if last is None:
        raise RunNotFound(f"run {run_id!r} has no record in thread {thread_id!r}")
    return Branch(store, thread_id, top=min(last, ceiling))


async def annotate_forks(
    store: RunEventStore, thread_id: str, branch: Branch, items: list[JournalHistoryItem]
) -> None:
    """Mark the first item after each fork point on the page with the versions
    there, in its `branch` (the `JournalBranchPoint` schema in
    `journal_bridge.web.openapi`): the original continuation first, then each
    fork from the same checkpoint in the order they were made, each by its first
    item's run and seq; `index` (from 1) is the place of the version shown.

    The fork points are those the branch went through and those of later forks
    whose original continuation is on the page."""
    if not items:
        return
    by_seq = {item["seq"]: item for item in items}
    forks = {fork.seq: fork for fork in branch.chain}
    for fork in await read_forks(store, thread_id, after_seq=min(by_seq)):
        forks.setdefault(fork.seq, fork)
    done: set[str | None] = set()
    for fork in sorted(forks.values(), key=lambda f: f.seq):
        # A rollback is no version anybody chose: nothing to switch to.
        if not fork.known or fork.rolled_back_run_id or fork.attempt is not None or fork.checkpoint_id in done:
            continue
        done.add(fork.checkpoint_id)
        cut = await branch.cut(fork)
        original = await branch.first_after(cut)
        # An item to mark is on the branch: the original continuation's first, or a fork's
        # this page knows of (the branch went through it, or it came after the page's first item).
        firsts = [original] + [await branch.first_after(f.seq) for f in forks.values() if f.checkpoint_id == fork.checkpoint_id]
        if not any(first is not None and first[0] in by_seq for first in firsts):
            continue
        siblings = [f for f in await read_forks(store, thread_id, after_seq=cut)
                    if f.checkpoint_id == fork.checkpoint_id and f.known and not f.rolled_back_run_id
                    and f.attempt is None]
        alternatives: list[JournalBranchAlternative] = []
        if original is not None and original[0] < siblings[0].seq:
            alternatives.append({"run_id": original[1], "seq": original[0]})
        for sibling in siblings:
            first = await branch.first_after(sibling.seq)
            alternatives.append({"run_id": sibling.run_id, "seq": first[0] if first else None})
        for index, alternative in enumerate(alternatives, 1):
            seq = alternative["seq"]
            item = by_seq.get(seq) if seq is not None else None
            if item is not None and "branch" not in item and branch.contains(item["seq"]):
                item["branch"] = {
                    "checkpoint_id": fork.checkpoint_id,
                    "index": index,
                    "count": len(alternatives),
                    "alternatives": alternatives,
                }
