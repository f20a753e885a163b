"""A test agent whose summarization announces a compaction as deer-flow's does.

`MinimalSummarizationMiddleware` is upstream `SummarizationMiddleware` plus
one `adispatch_custom_event("summarization", {"summary", "replaced_count"})`
when it compacts: no ids, no other field, and nothing on the `custom` stream.
It compacts at 6 messages and keeps the last 2.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.callbacks.manager import (
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.runtime import Runtime

from graphs.offline_model import make_chat_model


def _announcement(state: Any, update: dict[str, Any]) -> dict[str, Any]:
    # The update is [remove all, the summary, *the kept messages].
    summary, kept = update["messages"][1], update["messages"][2:]
    return {"summary": summary.content, "replaced_count": len(state["messages"]) - len(kept)}


class MinimalSummarizationMiddleware(SummarizationMiddleware):
    # `create_agent` injects `config` into both hooks from the sync hook's signature.
    def before_model(self, state: Any, runtime: Runtime[Any], config: RunnableConfig) -> dict[str, Any] | None:  # type: ignore[override]
        update = super().before_model(state, runtime)
        if update is not None:
            dispatch_custom_event("summarization", _announcement(state, update), config=config)
        return update

    async def abefore_model(self, state: Any, runtime: Runtime[Any], config: RunnableConfig) -> dict[str, Any] | None:  # type: ignore[override]
        update = await super().abefore_model(state, runtime)
        if update is not None:
            await adispatch_custom_event("summarization", _announcement(state, update), config=config)
        return update


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


model = make_chat_model()

graph = create_agent(
    model,
    tools=[add],
    middleware=[MinimalSummarizationMiddleware(model, trigger=("messages", 6), keep=("messages", 2))],
)
