"""Agents built with real harnesses from PyPI, each compacting its context its own way.

Every graph runs on `ScriptedToolModel` (labelled with the graph's id, for the
summarizer log), and `TURNS[graph]` is a 12-turn conversation that makes it use
its tools and compact several times:

- `deepagent`: deepagents' `create_deep_agent`, with its own summarization
  middleware at 10 messages keeping 4 (it keeps `messages` and records the
  compaction in the private key `_summarization_event`); the model plans with
  `write_todos` (langchain's `TodoListMiddleware`: deepagents 0.7 has none), delegates with `task` to the general-purpose sub-agent and
  writes, reads and lists files;
- `supervisor_last`, `supervisor_full`: langgraph-supervisor's
  `create_supervisor` over two `create_agent` workers (`math`, `weather`) that
  compact with langchain's `SummarizationMiddleware` at 16 messages keeping 4;
  `output_mode` `last_message` and `full_history`; the supervisor hands off
  with `transfer_to_*`;
- `swarm`: langgraph-swarm's `create_swarm` of `alice` and `bob`, `create_agent`s
  with handoff tools and the same summarization;
- `langmem_overwrite`, `langmem_side`: langmem's `SummarizationNode` before the
  model in a `StateGraph`, writing back to `messages` (the running summary as a
  `SystemMessage`) or to its default `summarized_messages`, which the model reads;
- `agent_node`: a `create_agent` with summarization as a node of a parent
  `StateGraph`;
- `command_tool`: a `create_agent` with summarization whose `note` tool returns
  `Command(update={"messages": [ToolMessage(...)]})` through `InjectedToolCallId`.
"""

from __future__ import annotations

from typing import Annotated, Any

from importlib.util import find_spec

from langchain.agents import create_agent
from langchain.agents.middleware import TodoListMiddleware
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.messages import AnyMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from langgraph_supervisor import create_supervisor
from langgraph_swarm import create_handoff_tool, create_swarm
from langmem.short_term import SummarizationNode

from tests.harness.graphs.scripted_model import ScriptedToolModel


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 degrees in {city}."


@tool
def note(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
    """Keep a note for later."""
    return Command(update={"messages": [ToolMessage(f"Noted: {text}", tool_call_id=tool_call_id)]})


def _summarization(model: ScriptedToolModel, trigger: int, keep: int) -> SummarizationMiddleware:
    return SummarizationMiddleware(model, trigger=("messages", trigger), keep=("messages", keep))


# --- deepagents ----------------------------------------------------------------

# deepagents 0.7 needs langchain 1.4.7 or newer: not installed on the oldest version set.
DEEPAGENTS = find_spec("deepagents") is not None


def _deepagent() -> Any:
    from deepagents import create_deep_agent
    from deepagents.backends import StateBackend
    from deepagents.middleware.summarization import SummarizationMiddleware as DeepAgentsSummarization

    model = ScriptedToolModel(graph="deepagent")
    backend = StateBackend()
    return create_deep_agent(
        model,
        backend=backend,
        middleware=[
            # deepagents 0.7 has no planning tool of its own: langchain's `write_todos`.
            TodoListMiddleware(),
            # Replaces the default summarization middleware (same name), with a low trigger.
            DeepAgentsSummarization(model, backend=backend, trigger=("messages", 10), keep=("messages", 4)),
        ],
    )


# --- langgraph-supervisor ------------------------------------------------------

def _supervisor(graph: str, output_mode: str) -> Any:
    model = ScriptedToolModel(graph=graph)
    workers = [
        create_agent(model, tools=[add], name="math", middleware=[_summarization(model, 16, 4)]),
        create_agent(model, tools=[get_weather], name="weather", middleware=[_summarization(model, 16, 4)]),
    ]
    return create_supervisor(workers, model=model, output_mode=output_mode).compile()


# --- langgraph-swarm -----------------------------------------------------------

def _swarm() -> Any:
    model = ScriptedToolModel(graph="swarm")
    alice = create_agent(model, tools=[add, create_handoff_tool(agent_name="bob")], name="alice",
                         middleware=[_summarization(model, 30, 4)])
    bob = create_agent(model, tools=[get_weather, create_handoff_tool(agent_name="alice")], name="bob",
                       middleware=[_summarization(model, 30, 4)])
    return create_swarm([alice, bob], default_active_agent="alice").compile()


# --- langmem -------------------------------------------------------------------

class LangmemState(MessagesState):
    context: dict[str, Any]
    summarized_messages: list[AnyMessage]


def _langmem(graph: str, output_messages_key: str) -> Any:
    model = ScriptedToolModel(graph=graph)
    tools = [add, get_weather]
    bound = model.bind_tools(tools)
    reads = output_messages_key

    async def agent(state: LangmemState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state[reads])]}

    builder = StateGraph(LangmemState)
    builder.add_node("summarize", SummarizationNode(
        model=model, max_tokens=120, max_tokens_before_summary=120, max_summary_tokens=40,
        output_messages_key=output_messages_key,
    ))
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "summarize")
    return builder.compile()


# --- create_agent inside a parent graph, and a tool returning a Command ----------

def _agent_node() -> Any:
    model = ScriptedToolModel(graph="agent_node")
    inner = create_agent(model, tools=[add, get_weather], name="assistant", middleware=[_summarization(model, 20, 3)])
    builder = StateGraph(MessagesState)
    builder.add_node("assistant", inner)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", END)
    return builder.compile()


def _command_tool() -> Any:
    model = ScriptedToolModel(graph="command_tool")
    return create_agent(model, tools=[add, note], middleware=[_summarization(model, 8, 3)])


deepagent = _deepagent() if DEEPAGENTS else None
supervisor_last = _supervisor("supervisor_last", "last_message")
supervisor_full = _supervisor("supervisor_full", "full_history")
swarm = _swarm()
langmem_overwrite = _langmem("langmem_overwrite", "messages")
langmem_side = _langmem("langmem_side", "summarized_messages")
agent_node = _agent_node()
command_tool = _command_tool()

_SUPERVISED = [
    "hello, who is there?",
    "math: add 2 and 3",
    "weather: get weather in Paris",
    "math: add 40 and 2",
    "weather: get weather in Oslo",
    "what have we done so far?",
    "math: add 7 and 8",
    "weather: get weather in Lima",
    "math: add 10 and 11",
    "weather: get weather in Rome",
    "math: add 1 and 1",
    "thanks, goodbye",
]
_PLAIN = [
    "hello there",
    "add 2 and 3",
    "get weather in Paris",
    "tell me something short",
    "add 40 and 2",
    "get weather in Oslo",
    "how many turns so far?",
    "add 7 and 8",
    "get weather in Lima",
    "say something short",
    "add 10 and 11",
    "thanks, goodbye",
]

# Each graph's conversation: 12 human turns.
TURNS: dict[str, list[str]] = {
    "deepagent": [
        "write todos: book flights, pick a hotel, pack bags",
        "write file /notes/trip.md with the plan",
        "read file /notes/trip.md",
        "task: name three sights in Lisbon",
        "ls /notes",
        "write todos: confirm flights, pay the hotel",
        "how is it going?",
        "task: suggest a dinner place near the river",
        "write file /notes/dinner.md with the choice",
        "read file /notes/dinner.md",
        "write todos: all done",
        "thanks, goodbye",
    ],
    "supervisor_last": _SUPERVISED,
    "supervisor_full": _SUPERVISED,
    "swarm": [
        "hello alice",
        "add 2 and 3",
        "ask bob to get weather in Paris",
        "get weather in Oslo",
        "ask alice to add 40 and 2",
        "add 7 and 8",
        "ask bob to get weather in Lima",
        "how are you?",
        "ask alice to add 10 and 11",
        "ask bob to get weather in Rome",
        "get weather in Quito",
        "thanks, goodbye",
    ],
    "langmem_overwrite": _PLAIN,
    "langmem_side": _PLAIN,
    "agent_node": _PLAIN,
    "command_tool": [
        "hello there",
        "note: buy milk",
        "add 2 and 3",
        "note: call the bank",
        "what did I ask you?",
        "add 40 and 2",
        "note: water the plants",
        "add 7 and 8",
        "note: book a table",
        "tell me something short",
        "add 10 and 11",
        "thanks, goodbye",
    ],
}
GRAPHS = list(TURNS)
