"""Test agents that compact their context the ways summarization middleware does.

- `upstream`: langchain's own `SummarizationMiddleware`, which announces
  nothing: the summary is a message in `messages`;
- `state_key`: like current deer-flow's middleware, it replaces `messages`
  with the kept tail and keeps the summary in a state key of its own
  (`summary_text`), announcing nothing.

Both compact at 6 messages and keep the last 2, with the offline model.
"""

from __future__ import annotations

from typing import Any, NotRequired

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.messages import RemoveMessage
from langchain_core.tools import tool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from graphs.offline_model import make_chat_model

TRIGGER, KEEP = 6, 2


class SummaryState(AgentState):
    summary_text: NotRequired[str]


class StateKeySummarization(AgentMiddleware[SummaryState]):
    """Compacts `messages` to its tail and keeps the summary in `summary_text`."""

    state_schema = SummaryState

    def before_model(self, state: SummaryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < TRIGGER:
            return None
        condensed, kept = messages[:-KEEP], messages[-KEEP:]
        earlier = state.get("summary_text")
        text = " / ".join(str(m.content)[:40] for m in condensed)
        summary = f"{earlier} | {text}" if earlier else text
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept], "summary_text": summary}

    async def abefore_model(self, state: SummaryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


model = make_chat_model()

upstream = create_agent(
    model, tools=[add], middleware=[SummarizationMiddleware(model, trigger=("messages", TRIGGER), keep=("messages", KEEP))]
)
state_key = create_agent(model, tools=[add], middleware=[StateKeySummarization()])
