"""A journaled conversation with a compaction in the middle, for the history tests.

Not a test module of its own: the history, route, viewer, CLI and benchmark
code import `seed_conversation` to write the same records through a real store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Self

from journal_bridge.model.envelope import SUMMARIZER_CALLER, make_event

THREAD_ID = "thread-history"
SCRIPT_TEXT = (
    "<script>window.__journalInjected = true; alert('x')</script><b>not bold</b>"
)
SUMMARY_TEXT = "The user asked about the weather in Paris and Rome; the tool answered."
_START = datetime(2025, 1, 2, 9, 0, tzinfo=UTC)


def _human(n: int, text: str) -> dict[str, Any]:
    return {
        "type": "human",
        "content": text,
        "id": f"h{n}",
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }


def _ai(
    n: int, text: str, tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "type": "ai",
        "content": text,
        "id": f"a{n}",
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
        "tool_calls": tool_calls or [],
        "invalid_tool_calls": [],
    }


def _tool(n: int, text: str, call_id: str) -> dict[str, Any]:
    return {
        "type": "tool",
        "content": text,
        "id": f"t{n}",
        "name": "get_weather",
        "tool_call_id": call_id,
        "additional_kwargs": {},
        "response_metadata": {},
        "status": "success",
    }


def _turn(run_id: str, n: int, city: str) -> list[tuple[str, str, Any, dict[str, Any]]]:
    call = {
        "name": "get_weather",
        "args": {"city": city},
        "id": f"call-{n}",
        "type": "tool_call",
    }
    return [
        ("run.start", run_id, {"input": "..."}, {}),
        ("llm.human.input", run_id, _human(n, f"What is the weather in {city}?"), {}),
        ("llm.ai.response", run_id, _ai(n, "", [call]), {"caller": "agent"}),
        ("llm.tool.result", run_id, _tool(n, f"Sunny in {city}, 21C", f"call-{n}"), {}),
        (
            "llm.ai.response",
            run_id,
            _ai(n + 100, f"It is sunny in {city}."),
            {"caller": "agent"},
        ),
        ("run.end", run_id, {"messages": "..."}, {}),
    ]


def conversation_records(thread_id: str = THREAD_ID) -> list[dict[str, Any]]:
    """Record arguments in append order: two turns, a compaction, two more turns."""
    rows: list[tuple[str, str, Any, dict[str, Any]]] = []
    rows += _turn("run-1", 1, "Paris")
    rows += _turn("run-2", 2, "Rome")
    rows += [
        ("run.start", "run-3", {"input": "..."}, {}),
        ("llm.human.input", "run-3", _human(3, SCRIPT_TEXT), {}),
        # The summarizer's own model call: journaled under `trace`, as the
        # mapper writes it, never shown.
        (
            "llm.ai.response",
            "run-3",
            _ai(900, SUMMARY_TEXT),
            {"caller": "middleware:summarize"},
        ),
        (
            "middleware:summarize",
            "run-3",
            {
                "name": "TrackingSummarizationMiddleware",
                "hook": "before_model",
                "action": "summarize",
                "changes": {
                    "replaced_count": 8,
                    "preserved_count": 1,
                    "replaced_message_ids": [
                        "h1",
                        "a1",
                        "t1",
                        "a101",
                        "h2",
                        "a2",
                        "t2",
                        "a102",
                    ],
                    "preserved_message_ids": ["h3"],
                    "summary_message_id": "summary-1",
                    "summary": SUMMARY_TEXT,
                    "tokens_before": 900,
                    "tokens_after": 120,
                },
            },
            {
                "langgraph_step": 1,
                "langgraph_node": "SummarizationMiddleware.before_model",
            },
        ),
        (
            "llm.ai.response",
            "run-3",
            _ai(3, "That text is shown as it was typed."),
            {"caller": "agent"},
        ),
        ("run.end", "run-3", {"messages": "..."}, {}),
    ]
    rows += _turn("run-4", 4, "Oslo")
    rows += _turn("run-5", 5, "Lima")
    return [
        {
            "thread_id": thread_id,
            "run_id": run_id,
            "event_type": event_type,
            "category": "trace" if metadata.get("caller") == SUMMARIZER_CALLER else None,
            "content": content,
            "metadata": metadata,
            "created_at": _START + timedelta(seconds=i),
        }
        for i, (event_type, run_id, content, metadata) in enumerate(rows)
    ]


async def seed_conversation(store: Any, thread_id: str = THREAD_ID) -> list[Any]:
    """Append the conversation through `store.put_batch`; return the stored records."""
    events = [make_event(**record) for record in conversation_records(thread_id)]
    return await store.put_batch(events)


def expected_items(records: list[Any]) -> list[tuple[int, str]]:
    """(seq, type) of every item the projection must show, derived independently."""
    shown = []
    for record in records:
        if record.event_type == "middleware:summarize":
            shown.append((record.seq, "summary_marker"))
        elif record.category == "message":
            shown.append((record.seq, record.content["type"]))
    return shown


def journal_app(store_url: str, prefix: str | None = None):
    """A Starlette app serving `journal_routes` over the store at `store_url`.

    Its lifespan opens the store and sets `app.state.journal_store`, the same
    contract the plugin's server app follows.
    """
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette

    from journal_bridge.store import open_store
    from journal_bridge.web.routes import journal_routes

    @asynccontextmanager
    async def lifespan(app):
        async with open_store(store_url) as store:
            app.state.journal_store = store
            yield

    return Starlette(routes=journal_routes(prefix), lifespan=lifespan)


class ServedApp:
    """An ASGI app served by a real uvicorn on a free port, in a background thread."""

    def __init__(self, app: Any) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._app = app
        self._server: Any = None
        self._thread: Any = None

    def __enter__(self) -> Self:
        import threading
        import time

        import uvicorn

        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)


def seed_file(store_url: str, thread_id: str = THREAD_ID) -> list[Any]:
    """`seed_conversation` for synchronous callers."""
    import asyncio

    from journal_bridge.store import open_store

    async def seed() -> list[Any]:
        async with open_store(store_url) as store:
            return await seed_conversation(store, thread_id)

    return asyncio.run(seed())


AGENT_TURNS = ["hello", "add 2 and 3", "weather in Paris", "add 4 and 5", "weather in Rome"]


async def journal_agent_thread(
    store: Any, thread_id: str, turns: list[str] = AGENT_TURNS
) -> list[Any]:
    """Run a real agent that compacts every few messages (in-process, through
    `astream_events` v2, serialised as the server sends it) and journal its runs
    the way the bridge does; return the stored records. These turns compact
    more than once, so a later compaction also replaces an earlier summary."""
    import json
    import uuid

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from graphs.agent import SYSTEM_PROMPT, TOOLS
    from graphs.offline_model import OfflineChatModel
    from journal_bridge.mapping.events_mapper import map_parts
    from journal_bridge.tracking import TrackingSummarizationMiddleware

    def dump(value: Any) -> Any:
        return value.model_dump(mode="json") if hasattr(value, "model_dump") else str(value)

    model = OfflineChatModel()
    graph = create_agent(
        model,
        tools=TOOLS,
        middleware=[
            TrackingSummarizationMiddleware(model, trigger=("messages", 6), keep=("messages", 2))
        ],
        system_prompt=SYSTEM_PROMPT,
        checkpointer=InMemorySaver(),
    )
    stored = []
    for text in turns:
        run_id = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread_id}, "run_id": run_id}
        parts = [
            ("events", json.loads(json.dumps(event, default=dump)))
            async for event in graph.astream_events(
                {"messages": [{"role": "user", "content": text}]}, config, version="v2"
            )
        ]
        stored += await store.put_batch(map_parts(thread_id, run_id, parts))
    return stored


def seed_agent_file(store_url: str, thread_id: str) -> list[Any]:
    """`journal_agent_thread` for synchronous callers."""
    import asyncio

    from journal_bridge.store import open_store

    async def seed() -> list[Any]:
        async with open_store(store_url) as store:
            return await journal_agent_thread(store, thread_id)

    return asyncio.run(seed())


BRANCHED_THREAD = "thread-branched"


def branched_records() -> list[Any]:
    """Two turns whose second answer was regenerated: runs a, b and c, the fork before c."""
    from journal_bridge.model import records
    from journal_bridge.model.envelope import make_event

    def message(run: str, kind: str, event_type: str, message_id: str, text: str) -> Any:
        return make_event(thread_id=BRANCHED_THREAD, run_id=run, event_type=event_type,
                          content={"type": kind, "id": message_id, "content": text})

    def ends(run: str) -> Any:
        return make_event(thread_id=BRANCHED_THREAD, run_id=run, event_type="run.end", content={})

    # The checkpoint that holds the second question, written by run b.
    checkpoint = {"values": {"messages": [{"id": "h1"}, {"id": "a1"}, {"id": "h2"}]},
                  "metadata": {"run_id": "run-b"}, "next": ["model"], "created_at": "2026-12-01T00:00:00+00:00"}
    return [
        message("run-a", "human", "llm.human.input", "h1", "first question"),
        message("run-a", "ai", "llm.ai.response", "a1", "first answer"),
        ends("run-a"),
        message("run-b", "human", "llm.human.input", "h2", "second question"),
        message("run-b", "ai", "llm.ai.response", "a2", "the answer that was regenerated"),
        ends("run-b"),
        records.fork(BRANCHED_THREAD, "run-c", {"checkpoint_id": "cp-h2"}, checkpoint),
        message("run-c", "ai", "llm.ai.response", "c2", "the regenerated answer"),
        ends("run-c"),
    ]
