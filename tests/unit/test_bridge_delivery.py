"""Delivery from the bridge's queue into a real SQLite store."""

from __future__ import annotations

import sqlite3

import pytest

from journal_bridge.delivery.bridge import Bridge
from journal_bridge.model.envelope import make_event
from journal_bridge.store import open_store


def _record(thread: str, n: int, event_type: str = "llm.human.input"):
    return make_event(
        thread_id=thread,
        run_id="r1",
        event_type=event_type,
        category="message",
        content={"type": "human", "content": f"m{n}", "id": f"{thread}-{n}"},
        source_key=f"message:{thread}-{n}",
    )


def _no_server():
    raise AssertionError("delivery never talks to a server")


@pytest.fixture
async def poisoned_store(tmp_path):
    """A journal whose database refuses one kind of record, as a broken row would."""
    path = tmp_path / "journal.db"
    async with open_store(f"sqlite:///{path}") as store:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse_poison BEFORE INSERT ON journal_events"
                " WHEN NEW.event_type = 'poison' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        yield store


async def test_one_record_the_store_refuses_is_dropped_and_counted_the_rest_are_written(poisoned_store):
    bridge = Bridge(poisoned_store, _no_server, max_backoff=0.01)
    await bridge.start()
    await bridge.write([_record("t1", 1), _record("t1", 2, "poison"), _record("t1", 3), _record("t2", 1)])
    await bridge.drain()
    await bridge.write([_record("t2", 2)])
    await bridge.drain()
    await bridge.stop()

    assert bridge.stats.dropped == 1
    assert "poison" in bridge.stats.last_error or "dropped" in bridge.stats.last_error
    assert bridge.stats.records_written == 4
    t1 = [e.content["content"] for e in await poisoned_store.list_messages("t1")]
    t2 = [e.content["content"] for e in await poisoned_store.list_messages("t2")]
    assert t1 == ["m1", "m3"] and t2 == ["m1", "m2"]
    assert bridge.health()["status"] == "degraded"


async def test_writing_the_same_records_twice_keeps_one_of_each(tmp_path):
    async with open_store(f"sqlite:///{tmp_path / 'journal.db'}") as store:
        bridge = Bridge(store, _no_server)
        await bridge.start()
        records = [_record("t1", n) for n in range(5)]
        await bridge.write(records)
        await bridge.write(records[2:])
        await bridge.drain()
        await bridge.stop()
        stored = await store.list_messages("t1")
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5]
    assert bridge.stats.dropped == 0


@pytest.mark.parametrize(
    "url,shown",
    [
        ("postgresql://user:secret@db:5432/journal?password=s3cret&sslmode=require", "postgresql://db:5432/journal"),
        ("postgres://user@db/journal", "postgres://db/journal"),
        ("sqlite:////var/lib/journal.db?busy_timeout=1", "sqlite:////var/lib/journal.db"),
    ],
)
def test_health_never_shows_store_credentials(url, shown):
    from journal_bridge.server import redact_url

    assert redact_url(url) == shown


async def test_the_bridge_remembers_the_newest_runs_handed_to_it():
    def unreachable():
        raise ConnectionError("no server here")

    bridge = Bridge(None, unreachable, join_retries=0)
    await bridge.start()
    handed = [(f"t{n % 7}", f"r{n}") for n in range(4096 + 3)]
    for thread_id, run_id in handed:
        bridge.observe(thread_id, run_id)
    await bridge.wait_for_runs()
    # Handed over again: remembered, so not read a second time.
    bridge.observe(*handed[-1])
    await bridge.wait_for_runs()
    await bridge.stop()

    assert bridge.stats.runs_observed == len(handed)
    assert bridge.stats.runs_failed == len(handed), "each run was tried once"
    assert [bridge.knows(*key) for key in handed[:4]] == [False, False, False, True]
    assert all(bridge.knows(*key) for key in handed[-4096:])
    assert not bridge.knows("t0", "r-never-handed")
