"""History endpoint latency: the newest page of a small thread vs a very large one.

    .venv/bin/python benchmarks/history.py [--requests N] [--large N]

Seeds two threads into one SQLite journal (1,000 and 100,000 records: turns of
human input, tool call, tool result and answer, run records, and a compaction
marker every 50 turns), then times `GET /journal/threads/{id}/messages` for
the newest page through the real routes (httpx over ASGI, store opened by the
app's lifespan). Reading the newest page must not depend on thread length:
the target is a p50 and p99 ratio (large / small) of at most 1.5.

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
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from starlette.applications import Starlette

from journal_bridge.model.envelope import make_event
from journal_bridge.web.routes import journal_routes
from journal_bridge.store import open_store

TARGET_RATIO = 1.5


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


async def _seed(store, thread_id: str, records: int) -> int:
    batch, n, written = [], 0, 0
    while written + len(batch) < records:
        batch.extend(_turn(thread_id, n))
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


async def _measure_client(store_url: str, requests: int, large: int) -> None:
    """Page latency through the journal client against uvicorn, on the large thread."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from seed import ServedApp, journal_app

    from journal_bridge.client import get_journal_client

    with ServedApp(journal_app(store_url)) as served:
        async with get_journal_client(url=served.url, api_key=None) as journal:
            middle = large // 2
            cases = {
                "newest page": lambda: journal.page("thread-large", limit=50),
                "before_seq (middle)": lambda: journal.page("thread-large", limit=50, before_seq=middle),
                "after_seq (middle)": lambda: journal.page("thread-large", limit=50, after_seq=middle),
            }
            for _ in range(20):
                for fetch in cases.values():
                    await fetch()
            timings: dict[str, list[float]] = {name: [] for name in cases}
            gc.collect()
            gc.disable()
            try:
                for _ in range(max(requests // 10, 10)):
                    for name, fetch in cases.items():
                        start = time.perf_counter()
                        page = await fetch()
                        timings[name].append(time.perf_counter() - start)
                        assert len(page["data"]) == 50
            finally:
                gc.enable()
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
            }
        print(
            f"seeded {sizes['small']:,} + {sizes['large']:,} records in "
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
                # Interleave rounds so drift in machine load hits both sides alike.
                timings = {"small": [], "large": []}
                for _ in range(10):
                    for name in ("small", "large"):
                        timings[name] += await _measure(
                            client, f"thread-{name}", requests // 10
                        )
                for name in ("small", "large"):
                    results[name] = (_p(timings[name], 50), _p(timings[name], 99))
                    print(
                        f"{name:>5} thread ({sizes[name]:>7,} records): newest page of 50 "
                        f"p50 {results[name][0]:6.2f} ms  p99 {results[name][1]:6.2f} ms"
                    )
        await _measure_client(store_url, requests, sizes["large"])
    p50_ratio = results["large"][0] / results["small"][0]
    p99_ratio = results["large"][1] / results["small"][1]
    verdict = "ok" if max(p50_ratio, p99_ratio) <= TARGET_RATIO else "ABOVE TARGET"
    print(
        f"ratio large/small: p50 {p50_ratio:.2f}  p99 {p99_ratio:.2f}  "
        f"(target <= {TARGET_RATIO}) {verdict}"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--large", type=int, default=100_000)
    args = parser.parse_args()
    return asyncio.run(run(args.requests, args.small, args.large))


if __name__ == "__main__":
    sys.exit(main())
