"""A graph whose runs make the runtime drop a client's stream, on request.

The runtimes hand a run's frames to each subscriber of the run (the client's
stream) and keep them for replay when the run is resumable. A runtime's join
ends its client's stream when it has waited half a second without a frame and
finds the run over: frames that never reached the subscriber are lost to that
client, as they are when langgraph-runtime-pg's Redis pub/sub delivers another
process's frames after the run's status changed. This graph stops the delivery
to subscribers, in the process that executes the run (the runtime's stream
manager, in-memory or the Redis one), so the drop is not left to timing:

- "hold ...": the run waits until another run of its thread has a subscriber
  (a stream created behind it, `multitask_strategy="enqueue"`), and stops
  every delivery to that subscriber: its client gets nothing of that run, not
  even the `metadata` frame, and the runtime ends its stream once the run is over;
- "cut ...": the run stops the delivery to its own subscribers once its first
  `values` frame was handed to them: its client gets `metadata` and the input's
  state, not the answer;
- anything else: a plain answer.

Every run answers with one AI message; the runtime keeps every frame of a
resumable run whatever happens to its subscribers.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph

_WAIT_SECONDS = 60.0


def _stream_manager() -> Any:
    edition = os.environ.get("LANGGRAPH_RUNTIME_EDITION", "inmem")
    module = "langgraph_runtime_inmem.inmem_stream" if edition == "inmem" else f"langgraph_runtime_{edition}.redis_stream"
    return importlib.import_module(module).get_stream_manager()


def _subscribers(thread_id: str) -> dict[uuid.UUID, list[asyncio.Queue]]:
    return _stream_manager().queues.get(uuid.UUID(thread_id), {})


def _stop_delivery(queue: asyncio.Queue, keep: Callable[[Any], bool] = lambda _message: False) -> None:
    """From now on `queue` gets only the frames `keep` answers True for."""
    original = queue.put

    async def put(message: Any) -> None:
        if keep(message):
            await original(message)

    queue.put = put  # type: ignore[method-assign]


def _until_first_values(thread_id: str, run_id: uuid.UUID) -> Callable[[Any], bool]:
    """Whether a frame is one of the run's frames up to its first `values` one, as the
    runtime keeps them (each kept before it is handed to the subscribers)."""
    from langgraph_api.utils.stream_codec import decode_stream_message

    kept = _stream_manager().message_stores[uuid.UUID(thread_id)][run_id]

    def keep(message: Any) -> bool:
        for stored in kept:
            mode = decode_stream_message(stored.data, channel=stored.topic).event_bytes
            if stored is message:
                return True
            if mode == b"values":
                return False
        return False

    return keep


async def _hold(thread_id: str, own_run: uuid.UUID) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _WAIT_SECONDS
    while loop.time() < deadline:
        others = {run: queues for run, queues in _subscribers(thread_id).items() if run != own_run and queues}
        if others:
            for queues in others.values():
                for queue in queues:
                    _stop_delivery(queue)
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("no other run of the thread subscribed")


def _text(state: MessagesState) -> str:
    content = state["messages"][-1].content if state["messages"] else ""
    return content if isinstance(content, str) else str(content)


async def answer(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
    configurable = config.get("configurable", {})
    thread_id, run_id = str(configurable["thread_id"]), uuid.UUID(str(configurable["run_id"]))
    text = _text(state)
    if text.startswith("hold"):
        await _hold(thread_id, run_id)
    return {"messages": [AIMessage(f"the answer to: {text}", id=f"answer-{run_id}")]}


async def cut(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
    """Before the answer: a run asked to "cut" keeps its subscribers to its frames
    up to the input's `values` (its `metadata` first)."""
    if _text(state).startswith("cut"):
        run_id = uuid.UUID(str(config.get("configurable", {})["run_id"]))
        thread_id = str(config.get("configurable", {})["thread_id"])
        keep = _until_first_values(thread_id, run_id)
        for queue in _subscribers(thread_id).get(run_id, []):
            _stop_delivery(queue, keep)
    return {}


builder = StateGraph(MessagesState)
builder.add_node("cut", cut)
builder.add_node("answer", answer)
builder.add_edge(START, "cut")
builder.add_edge("cut", "answer")
builder.add_edge("answer", END)
graph = builder.compile()
