"""History endpoint latency: the newest page of a small thread vs a very large one.

    python3 tasks.py bench history [--requests N] [--large N]

Seeds two threads into one SQLite journal (1,000 and 100,000 records: turns of
human input, tool call, tool result and answer, run records, and a compaction
marker every 50 turns), then times `GET /journal/threads/{id}/messages` for
the newest page through the real routes (httpx over ASGI, store opened by the
app's lifespan). Reading the newest page must not depend on thread length:
the target is a p50 and p99 ratio (large / small) of at most 1.5.

Then the branch-aware read: two more threads of the large size whose
conversation was regenerated 10 and 100 times (spread evenly), read the same
way, side by side with the large thread without forks (today's linear read);
the target is a ratio (forked / linear) of at most 1.5 for both. The cut of a
fork, once found, is remembered by the process: the first read of each forked
thread (nothing remembered) is printed as well.

Then the same pages through `journal_bridge.client` (langgraph-sdk's HTTP
stack, over a real uvicorn on loopback): the newest page, a page before a
cursor in the middle of the large thread and a page after one, as a client
application sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from starlette.applications import Starlette

from journal_bridge.model.envelope import make_event
from journal_bridge.model.records import BRANCHES_RUN_ID, FORK_EVENT
from journal_bridge.projection import branches, history
from journal_bridge.store import open_store
from journal_bridge.web.routes import journal_routes

TARGET_RATIO = 1.5
FORKS = (10, 100)


def _turn(thread_id: str, n: int) -> list:
    run_id = f"run-{n}"
    call = {
        "name": "lookup",
        "args": {"q": f"question {n}"},
        "id": f"call-{n}",
        "type": "tool_call",
    }
    rows = [
        ("run.start", {"input": n}),
        (
            "llm.human.input",
            {"type": "human", "content": f"question {n}", "id": f"h{n}"},
        ),
        (
            "llm.ai.response",
            {"type": "ai", "content": "", "id": f"a{n}", "tool_calls": [call]},
        ),
        (
            "llm.tool.result",
            {
                "type": "tool",
                "content": f"answer {n}",
                "id": f"t{n}",
                "name": "lookup",
                "tool_call_id": f"call-{n}",
            },
        ),
        (
            "llm.ai.response",
            {
                "type": "ai",
                "content": f"The answer is {n}.",
                "id": f"b{n}",
                "tool_calls": [],
            },
        ),
        ("run.end", {"messages": n}),
    ]
    if n % 50 == 49:
        rows.insert(
            2,
            (
                "middleware:summarize",
                {
                    "name": "TrackingSummarizationMiddleware",
                    "hook": "before_model",
                    "action": "summarize",
                    "changes": {
                        "replaced_count": 150,
                        "preserved_count": 2,
                        "summary_message_id": f"s{n}",
                        "summary": f"summary up to turn {n}",
                    },
                },
            ),
        )
    return [
        make_event(
            thread_id=thread_id, run_id=run_id, event_type=event_type, content=content
        )
        for event_type, content in rows
    ]


def _regenerated(thread_id: str, n: int) -> list:
    """Turn `n` answered again from the checkpoint that holds its question."""
    run_id = f"run-{n}-again"
    fork = {
        "run_id": run_id, "checkpoint_id": f"cp-{n}", "checkpoint_run_id": f"run-{n}", "known": True,
        "finished": False, "message_ids": [f"b{n - 1}", f"h{n}"], "message_count": 2 * n + 1,
    }
    rows = [
        (BRANCHES_RUN_ID, FORK_EVENT, "trace", fork),
        (run_id, "run.start", None, {"input": None}),
        (run_id, "llm.ai.response", None, {"type": "ai", "content": f"Again: {n}.", "id": f"r{n}", "tool_calls": []}),
        (run_id, "run.end", None, {"messages": n}),
    ]
    return [
        make_event(thread_id=thread_id, run_id=run, event_type=kind, category=category, content=content)
        for run, kind, category, content in rows
    ]


async def _seed(store, thread_id: str, records: int, forks: int = 0) -> int:
    batch, n, written = [], 0, 0
    # Forks spread evenly over the turns the thread has room for, every one of them placed.
    turns = (records - forks * len(_regenerated(thread_id, 1))) // len(_turn(thread_id, 1))
    every = max(turns // (forks + 1), 1) if forks else 0
    while written + len(batch) < records:
        batch.extend(_turn(thread_id, n))
        if every and n % every == every - 1 and n // every < forks:
            batch.extend(_regenerated(thread_id, n))
        n += 1
        if len(batch) >= 2000:
            written += len(await store.put_batch(batch))
            batch = []
    batch = batch[: records - written]
    if batch:
        written += len(await store.put_batch(batch))
    return written


async def _measure(
    client: httpx.AsyncClient, thread_id: str, requests: int
) -> list[float]:
    url = f"/journal/threads/{thread_id}/messages"
    for _ in range(20):  # warm caches and connections
        (await client.get(url)).raise_for_status()
    timings = []
    # As timeit does: collector pauses belong to the process, not to the route.
    gc.collect()
    gc.disable()
    try:
        for _ in range(requests):
            start = time.perf_counter()
            response = await client.get(url)
            timings.append(time.perf_counter() - start)
            response.raise_for_status()
            assert len(response.json()["data"]) == 50
    finally:
        gc.enable()
    return timings


async def _timed_pages(cases: dict[str, Callable[[], Awaitable[dict]]], rounds: int) -> dict[str, list[float]]:
    """Seconds per read of each case, the cases interleaved round by round after a warm-up,
    with the garbage collector held off; every read must give a page of 50."""
    for _ in range(20):
        for read in cases.values():
            await read()
    timings: dict[str, list[float]] = {name: [] for name in cases}
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, read in cases.items():
                start = time.perf_counter()
                page = await read()
                timings[name].append(time.perf_counter() - start)
                assert len(page["data"]) == 50
    finally:
        gc.enable()
    return timings


async def _measure_client(store_url: str, requests: int, large: int) -> None:
    """Page latency through the journal client against uvicorn, on the large thread."""
    from journal_bridge.client import get_journal_client
    from tests.harness.seed import ServedApp, journal_app

    with ServedApp(journal_app(store_url)) as served:
        async with get_journal_client(url=served.url, api_key=None) as journal:
            middle = large // 2
            cases = {
                "newest page": lambda: journal.page("thread-large", limit=50),
                "before_seq (middle)": lambda: journal.page("thread-large", limit=50, before_seq=middle),
                "after_seq (middle)": lambda: journal.page("thread-large", limit=50, after_seq=middle),
            }
            timings = await _timed_pages(cases, max(requests // 10, 10))
    for name, values in timings.items():
        print(
            f"client ({large:,} records, uvicorn): {name:<20} p50 {_p(values, 50):6.2f} ms  "
            f"p99 {_p(values, 99):6.2f} ms"
        )


def _p(timings: list[float], q: float) -> float:
    return statistics.quantiles(timings, n=100, method="inclusive")[int(q) - 1] * 1000


async def run(requests: int, small: int, large: int) -> int:
    with tempfile.TemporaryDirectory(prefix="journal-bridge-bench-") as tmp:
        store_url = f"sqlite:///{Path(tmp) / 'journal.db'}"
        start = time.perf_counter()
        async with open_store(store_url) as store:
            sizes = {
                "small": await _seed(store, "thread-small", small),
                "large": await _seed(store, "thread-large", large),
                **{f"fork-{n}": await _seed(store, f"thread-fork-{n}", large, n) for n in FORKS},
            }
            for n in FORKS:
                found = len(await branches.read_forks(store, f"thread-fork-{n}"))
                assert found == n, f"thread-fork-{n} has {found} forks"
        print(
            f"seeded {sum(sizes.values()):,} records ({', '.join(f'{k} {v:,}' for k, v in sizes.items())}) in "
            f"{time.perf_counter() - start:.1f}s ({store_url})"
        )

        @asynccontextmanager
        async def lifespan(app):
            async with open_store(store_url) as opened:
                app.state.journal_store = opened
                yield

        app = Starlette(routes=journal_routes("/journal"), lifespan=lifespan)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://bench"
            ) as client:
                results = {}
                names = ["small", "large", *(f"fork-{n}" for n in FORKS)]
                cold = {}
                for name in names[2:]:
                    branches._REMEMBERED.clear()
                    start = time.perf_counter()
                    (await client.get(f"/journal/threads/thread-{name}/messages")).raise_for_status()
                    cold[name] = (time.perf_counter() - start) * 1000
                # Interleave rounds so drift in machine load hits every side alike.
                timings = {name: [] for name in names}
                for _ in range(10):
                    for name in names:
                        timings[name] += await _measure(
                            client, f"thread-{name}", requests // 10
                        )
                for name in names:
                    results[name] = (_p(timings[name], 50), _p(timings[name], 99))
                    print(
                        f"{name:>5} thread ({sizes[name]:>7,} records): newest page of 50 "
                        f"p50 {results[name][0]:6.2f} ms  p99 {results[name][1]:6.2f} ms"
                    )
                for name in names[2:]:
                    print(f"first read of thread-{name} (no cut remembered): {cold[name]:6.2f} ms")
        linear = await _measure_projection(store_url, requests)
        await _measure_client(store_url, requests, sizes["large"])
    _ratio("large/small", results["large"], results["small"])
    for n in FORKS:
        _ratio(f"route, {n} forks/no forks", results[f"fork-{n}"], results["large"])
    for name in ("no forks", *(f"{n} forks" for n in FORKS)):
        _ratio(f"projection, {name}/linear read", linear[name], linear["linear read"])
    return 0


async def _measure_projection(store_url: str, requests: int) -> dict[str, tuple[float, float]]:
    """The newest page of 50 as the projection reads it, side by side with the
    linear read it did before branches (no fork lookup), interleaved."""
    async with open_store(store_url) as store:
        # The thread does not change while it is read: its last seq, read once, bounds every page.
        ceiling = await store.last_seq("thread-large")
        linear = history._PageQuery(history.TIMELINE_CATEGORIES, history.project, 50, None, None, ceiling)
        cases = {
            "linear read": lambda: history._page(store, "thread-large", linear),
            "no forks": lambda: history.history_page(store, "thread-large", limit=50),
            **{f"{n} forks": (lambda n=n: history.history_page(store, f"thread-fork-{n}", limit=50)) for n in FORKS},
        }
        timings = await _timed_pages(cases, requests)
    out = {name: (_p(values, 50), _p(values, 99)) for name, values in timings.items()}
    for name, (p50, p99) in out.items():
        print(f"projection, large thread, {name:<12}: newest page of 50 p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")
    return out


def _ratio(name: str, over: tuple[float, float], under: tuple[float, float]) -> None:
    p50_ratio, p99_ratio = over[0] / under[0], over[1] / under[1]
    verdict = "ok" if max(p50_ratio, p99_ratio) <= TARGET_RATIO else "ABOVE TARGET"
    print(f"ratio {name}: p50 {p50_ratio:.2f}  p99 {p99_ratio:.2f}  (target <= {TARGET_RATIO}) {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    args = parser.parse_args()
    return asyncio.run(run(args.requests, args.small, args.large))


if __name__ == "__main__":
    sys.exit(main())
