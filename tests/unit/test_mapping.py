"""Stream parts of `astream_events(version="v2")` become journal records.

The parts are captured from the bundled agent itself (compiled in-process, run
through `astream_events`), so the shapes are the real ones, then serialised to
JSON the way the server sends them.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Annotated

import pytest
from langchain_core.tools import InjectedToolCallId
from langgraph.types import Command
from langgraph.checkpoint.memory import InMemorySaver

from journal_bridge.mapping.events_mapper import RunMapper, map_parts
from journal_bridge.model.records import is_hidden


def _graph():
    from langchain.agents import create_agent

    from graphs.agent import SYSTEM_PROMPT, TOOLS
    from graphs.offline_model import OfflineChatModel
    from journal_bridge.tracking import TrackingSummarizationMiddleware

    model = OfflineChatModel()
    return create_agent(
        model,
        tools=TOOLS,
        middleware=[TrackingSummarizationMiddleware(model, trigger=("messages", 6), keep=("messages", 2))],
        system_prompt=SYSTEM_PROMPT,
        checkpointer=InMemorySaver(),
    )


async def _capture(graph, thread_id: str, text: str) -> tuple[str, list[tuple[str, dict]]]:
    run_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}, "run_id": run_id}
    return run_id, await server_parts(graph, {"messages": [{"role": "user", "content": text}]}, config)


async def _conversation_of(graph, text: str) -> tuple[str, list, list[dict]]:
    """One run of `graph` on a new thread, mapped: the thread, its records, and the
    messages of its conversation (the hidden calls left out)."""
    thread_id = str(uuid.uuid4())
    run_id, parts = await _capture(graph, thread_id, text)
    records = map_parts(thread_id, run_id, parts)
    return thread_id, records, [r.content for r in records if r.category == "message" and not is_hidden(r.metadata)]


async def server_parts(graph, run_input, config, modes=("values",)) -> list[tuple[str, dict]]:
    """The parts a server sends for a run streamed with `events` and `modes`: the
    root's own stream as parts of those modes, every other callback an `events` part."""
    parts = []
    run_id = config["run_id"]
    async for event in graph.astream_events(run_input, config, version="v2", stream_mode=list(modes)):
        if event["event"] == "on_chain_stream" and str(event["run_id"]) == run_id:
            mode, chunk = event["data"]["chunk"]
            parts.append((mode, json.loads(json.dumps(chunk, default=_dump))))
        else:
            parts.append(("events", json.loads(json.dumps(event, default=_dump))))
    return parts


def _dump(value):
    """As the server's JSON encoder writes what is not JSON: models by their dump, dataclasses (a `Command`) by their fields."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


@pytest.fixture
async def conversation():
    graph = _graph()
    thread_id = str(uuid.uuid4())
    runs = []
    for text in ["hello", "add 2 and 3", "weather in Paris", "one more"]:
        runs.append(await _capture(graph, thread_id, text))
    return thread_id, runs


async def test_a_turn_maps_to_start_input_answer_and_end(conversation):
    thread_id, runs = conversation
    run_id, parts = runs[0]
    records = map_parts(thread_id, run_id, parts)
    assert [r.event_type for r in records] == ["run.start", "llm.human.input", "llm.ai.response", "run.end"]
    human, answer = records[1].content, records[2].content
    assert human["type"] == "human" and human["content"] == "hello" and human["id"]
    assert answer["type"] == "ai" and answer["id"].startswith("lc_run--")
    assert records[2].metadata == {
        "caller": "lead_agent",
        "usage": answer["usage_metadata"],
        "latency_ms": None,
        "llm_call_index": 1,
    }
    assert all(r.thread_id == thread_id and r.run_id == run_id for r in records)


async def test_tool_turn_keeps_call_and_result_in_order(conversation):
    thread_id, runs = conversation
    run_id, parts = runs[1]
    messages = [r.content for r in map_parts(thread_id, run_id, parts) if r.category == "message" and not is_hidden(r.metadata)]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"]


async def test_compaction_maps_to_a_marker_before_the_answer_and_hides_the_summarizer(conversation):
    thread_id, runs = conversation
    compacting = [
        map_parts(thread_id, run_id, parts)
        for run_id, parts in runs
        if any(p[1].get("event") == "on_custom_event" for p in parts)
    ]
    assert compacting, "the script should compact at least once"
    records = compacting[0]
    types = [r.event_type for r in records]
    marker_at = types.index("middleware:summarize")
    marker = records[marker_at]
    assert marker.category == "middleware"
    assert marker.content["action"] == "summarize" and marker.content["hook"] == "before_model"
    changes = marker.content["changes"]
    assert changes["replaced_count"] == len(changes["replaced_message_ids"]) > 0
    assert isinstance(changes["summary"], str) and changes["summary"]
    before = [r for r in records[:marker_at] if r.category == "message" and not is_hidden(r.metadata)]
    after = [r for r in records[marker_at + 1 :] if r.category == "message" and not is_hidden(r.metadata)]
    assert before[-1].event_type == "llm.human.input"
    assert after[0].event_type == "llm.ai.response"
    summarizer = [r for r in records if r.metadata.get("caller") == "middleware:summarize"]
    assert len(summarizer) == 1 and summarizer[0].category == "message" and is_hidden(summarizer[0].metadata)
    assert summarizer[0].metadata["llm_call_index"] == 1


async def test_replaying_a_stream_gives_the_same_keys(conversation):
    thread_id, runs = conversation
    run_id, parts = runs[1]
    first = [r.source_key for r in map_parts(thread_id, run_id, parts)]
    doubled = [part for part in parts for _ in range(2)]
    again = [r.source_key for r in map_parts(thread_id, run_id, doubled)]
    assert len(set(first)) == len(first)
    assert set(again) == set(first)


@pytest.mark.parametrize(
    "event,data",
    [
        ("events", "not an object"),
        ("events", {"no": "event name"}),
        ("events", {"event": "on_chat_model_end", "data": "oops"}),
        ("events", {"event": "on_chat_model_end", "run_id": "x", "data": {"output": 42}}),
    ],
)
def test_malformed_parts_are_counted_and_skipped(event, data):
    mapper = RunMapper("t", "r")
    assert mapper.feed(event, data) == []
    assert mapper.malformed == 1
    # The mapper keeps working after a bad part.
    records = mapper.feed("events", {"event": "on_chain_start", "run_id": "r", "name": "agent",
                                     "data": {"input": {"messages": [{"role": "user", "content": "hi"}]}}})
    assert [r.event_type for r in records] == ["run.start"]
    state = {"messages": [{"type": "human", "content": "hi", "id": "h-1"}]}
    assert [r.event_type for r in mapper.feed("values", state)] == ["llm.human.input"]
    assert mapper.malformed == 1


def test_unknown_events_and_modes_are_ignored():
    mapper = RunMapper("t", "r")
    assert mapper.feed("values", {"messages": []}) == []
    assert mapper.feed("events", {"event": "on_retriever_end", "run_id": "x", "data": {}}) == []
    assert mapper.feed("events", {"event": "on_custom_event", "name": "progress", "run_id": "x", "data": {}}) == []
    assert mapper.malformed == 0


def test_an_error_part_becomes_one_run_error():
    mapper = RunMapper("t", "r")
    first = mapper.feed("error", {"error": "ValueError", "message": "boom"})
    second = mapper.feed("events", {"event": "on_chain_error", "run_id": "r", "data": {"error": "boom"}})
    assert [r.event_type for r in first] == ["run.error"]
    assert (first[0].content, first[0].metadata) == ("boom", {"error_type": "ValueError"})
    assert second[0].source_key == first[0].source_key


def _tool_calling_model_graph():
    """A graph whose tool calls a model itself, and whose agent model is tagged `nostream`."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from graphs.offline_model import OfflineChatModel

    inner = OfflineChatModel()

    @tool
    async def ask_expert(question: str) -> str:
        """Ask another model."""
        answer = await inner.ainvoke(question)
        return f"the expert says: {answer.content}"

    model = OfflineChatModel().with_config(tags=["nostream"])
    return create_agent(model, tools=[ask_expert], checkpointer=InMemorySaver())


async def test_models_inside_tools_are_hidden_and_nostream_answers_stay_messages():
    graph = _tool_calling_model_graph()
    thread_id, records, messages = await _conversation_of(graph, "ask_expert question=why")
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[1]["tool_calls"][0]["name"] == "ask_expert"
    nested = [r for r in records if is_hidden(r.metadata) and r.event_type == "llm.ai.response"]
    assert len(nested) == 1 and nested[0].metadata["caller"] == "subagent:tools"
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert [m["id"] for m in messages] == [m.id for m in state.values["messages"]]


async def test_every_input_message_is_journaled_once_by_its_id():
    from langchain.agents import create_agent

    from graphs.offline_model import OfflineChatModel

    graph = create_agent(OfflineChatModel(), tools=[], checkpointer=InMemorySaver())
    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    first = [
        {"type": "human", "content": "what is 2 + 2", "id": "h-1"},
        {"type": "ai", "content": "4", "id": "a-1"},
        {"type": "human", "content": "and 3 + 3?"},
    ]
    records = []
    for run_input in (first, [{"type": "human", "content": "what is 2 + 2", "id": "h-1"}, "thanks"]):
        run_id = str(uuid.uuid4())
        parts = await server_parts(graph, {"messages": run_input}, {**config, "run_id": run_id})
        records += map_parts(thread_id, run_id, parts)
    messages = [r for r in records if r.category == "message" and not is_hidden(r.metadata)]
    assert [m.event_type for m in messages[:3]] == ["llm.human.input", "llm.ai.response", "llm.human.input"]
    assert messages[0].source_key == "message:h-1" and messages[1].source_key == "message:a-1"
    assert messages[2].content["id"], "the id the server assigned is read back from the state"
    keys = [m.source_key for m in messages]
    # The resent message replaced itself in the state: it is not new there, nor in the journal.
    assert keys.count("message:h-1") == 1
    state = await graph.aget_state(config)
    assert list(dict.fromkeys(m.content["id"] for m in messages)) == [m.id for m in state.values["messages"]]


async def test_a_long_threads_earlier_messages_are_not_journaled_again():
    from langchain.agents import create_agent

    from graphs.agent import TOOLS
    from graphs.offline_model import OfflineChatModel

    graph = create_agent(OfflineChatModel(), tools=TOOLS, checkpointer=InMemorySaver())
    thread_id = str(uuid.uuid4())
    config = {"configurable": {"thread_id": thread_id}}
    history = [{"type": "human" if i % 2 == 0 else "ai", "content": f"turn {i}", "id": f"m-{i}"} for i in range(300)]
    await graph.aupdate_state(config, {"messages": history})
    run_id = str(uuid.uuid4())
    parts = await server_parts(graph, {"messages": [{"role": "user", "content": "add 2 and 3"}]},
                               {**config, "run_id": run_id})
    records = map_parts(thread_id, run_id, parts)
    messages = [r for r in records if r.category == "message" and not is_hidden(r.metadata)]
    state = (await graph.aget_state(config)).values["messages"]
    assert [m.content["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    # The input and the tool's result got the ids the state gave them, the 300 before were not journaled.
    assert [m.content["id"] for m in messages] == [m.id for m in state[300:]]


def _agent_as_node_graph():
    """`create_agent` as a node of a parent graph, a title call tagged as middleware beside it,
    and a tool that answers with a `Command` updating the messages."""
    from langchain.agents import create_agent
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph

    from graphs.offline_model import OfflineChatModel

    @tool
    def remember(fact: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Remember a fact."""
        return Command(update={"messages": [ToolMessage(f"remembered {fact}", tool_call_id=tool_call_id)]})

    agent = create_agent(OfflineChatModel(), tools=[remember])
    titler = OfflineChatModel().with_config(tags=["middleware:title"])

    class State(MessagesState):
        title: str

    async def title(state: State) -> dict:
        answer = await titler.ainvoke("Generate a concise title for this conversation")
        return {"title": str(answer.content)[:40]}

    builder = StateGraph(State)
    builder.add_node("assistant", agent)
    builder.add_node("title", title)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", "title")
    return builder.compile(checkpointer=InMemorySaver())


async def test_what_a_sub_graph_agent_and_a_command_committed_is_the_conversation_and_a_tagged_call_is_hidden():
    graph = _agent_as_node_graph()
    thread_id, records, messages = await _conversation_of(graph, "remember fact=Paris")
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    # Every message the parent's state holds, in its order, each once, with its own id.
    assert [m["id"] for m in messages] == [m.id for m in state.values["messages"]]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[2]["content"] == "remembered Paris"
    hidden = [r for r in records if is_hidden(r.metadata)]
    assert [(r.event_type, r.metadata["caller"]) for r in hidden] == [("llm.ai.response", "middleware:title")]
    assert hidden[0].content["content"] and hidden[0].metadata["llm_call_index"] == 1
