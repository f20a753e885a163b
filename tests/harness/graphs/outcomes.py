"""A test agent whose runs end in every way a run can end.

The bundled agent's offline model and tools, plus three that decide how a run
ends (the offline model calls a tool whose name, or last word of it, is in the
request):

- `fail`: raises `ToolFailure` with a message naming the reason ("fail because disk");
- `block`: waits until the run is cancelled ("block until Tuesday");
- `ask_human`: pauses the run with `interrupt({"question": ...})` and returns
  what the resume sends ("ask the human about Rome").
"""

from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.types import interrupt

from graphs.offline_model import make_chat_model


class ToolFailure(RuntimeError):
    """What the `fail` tool raises."""


@tool
def fail(reason: str) -> str:
    """Fail with the given reason."""
    raise ToolFailure(f"the tool failed: {reason}")


@tool
async def block(topic: str) -> str:
    """Wait until the run is cancelled."""
    await asyncio.Event().wait()
    return topic


@tool
def ask_human(question: str) -> str:
    """Ask the human and return their answer."""
    answer = interrupt({"question": question})
    return f"The human answered: {answer}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


graph = create_agent(make_chat_model(), tools=[add, fail, block, ask_human])
