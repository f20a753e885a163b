"""Test agents that compact their context the ways summarization middleware does.

- `upstream`: langchain's own `SummarizationMiddleware`, which announces
  nothing: the summary is a message in `messages`;
- `state_key`: like current deer-flow's middleware, it replaces `messages`
  with the kept tail and keeps the summary in a state key of its own
  (`summary_text`), announcing nothing; `state_key_repeating` writes the same
  summary at every compaction, as a summarizer may;
- `named_summary`: like deer-flow's middleware before it kept a state key, the
  summary is a `HumanMessage(name="summary")` without `lc_source`, written by a
  summarizer call tagged `middleware:summarize`; beside it a title generator
  like deer-flow's TitleMiddleware calls the model tagged `middleware:title`
  and keeps its answer in `title`.

Both compact at 6 messages and keep the last 2, with the offline model.
"""

from __future__ import annotations

import uuid
from typing import Any, NotRequired

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.messages import HumanMessage, RemoveMessage
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

    def __init__(self, repeating: bool = False) -> None:
        super().__init__()
        self.repeating = repeating

    def before_model(self, state: SummaryState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < TRIGGER:
            return None
        condensed, kept = messages[:-KEEP], messages[-KEEP:]
        earlier = state.get("summary_text")
        text = " / ".join(str(m.content)[:40] for m in condensed)
        summary = f"{earlier} | {text}" if earlier else text
        if self.repeating:
            summary = "The user adds numbers and asks about the weather."
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
state_key_repeating = create_agent(model, tools=[add], middleware=[StateKeySummarization(repeating=True)])


class NamedSummarization(AgentMiddleware):
    """Compacts `messages` to a `HumanMessage(name="summary")` and the kept tail, its summary
    written by a model call tagged `middleware:summarize`."""

    async def abefore_model(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < TRIGGER:
            return None
        condensed, kept = messages[:-KEEP], messages[-KEEP:]
        prompt = "Summarize: " + " / ".join(str(m.content)[:40] for m in condensed)
        answer = await model.ainvoke(prompt, config={"tags": ["middleware:summarize", "nostream"]})
        summary = HumanMessage(f"Here is a summary of the conversation to date:\n\n{answer.content}",
                               name="summary", id=str(uuid.uuid4()))
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept]}

    def before_model(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        raise NotImplementedError("async only")


class TitleState(AgentState):
    title: NotRequired[str]


class TitleGeneration(AgentMiddleware[TitleState]):
    """Names the thread once, from a model call tagged `middleware:title` whose answer is no message."""

    state_schema = TitleState

    async def aafter_model(self, state: TitleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        if state.get("title"):
            return None
        answer = await model.ainvoke("Generate a concise title for this conversation.",
                                     config={"tags": ["middleware:title", "nostream"]})
        return {"title": str(answer.content)[:60]}

    def after_model(self, state: TitleState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        raise NotImplementedError("async only")


named_summary = create_agent(model, tools=[add], middleware=[NamedSummarization(), TitleGeneration()])
