"""TrackingSummarizationMiddleware, exercised through compiled `create_agent` graphs.

Every test builds a real agent (offline model, real tools, an `InMemorySaver`)
and drives it with `invoke`/`stream` or `ainvoke`/`astream`/`astream_events`;
hooks are never called directly.
"""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.agent import add, get_weather
from graphs.offline_model import OfflineChatModel
from journal_bridge import TrackingSummarizationMiddleware

MIDDLEWARE_NODE = "TrackingSummarizationMiddleware.before_model"


def make_agent(
    trigger: Any = ("messages", 6),
    keep: Any = ("messages", 2),
    *,
    middleware: list[AgentMiddleware] | None = None,
    summarization_class: type[SummarizationMiddleware] = TrackingSummarizationMiddleware,
):
    model = OfflineChatModel()
    summarization = summarization_class(model, trigger=trigger, keep=keep)
    return create_agent(
        model,
        tools=[add, get_weather],
        middleware=[*(middleware or []), summarization],
        system_prompt="Be brief.",
        checkpointer=InMemorySaver(),
    )


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": str(uuid.uuid4())}}


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class CustomEvents(BaseCallbackHandler):
    """Collects custom callback events, as a journal would."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))


def message_ids(graph, config) -> list[str]:
    return [m.id for m in graph.get_state(config).values["messages"]]


def compaction_states(graph, config, summary_message_id: str):
    """(messages before, messages after) the checkpoint step that stored the summary."""
    history = list(graph.get_state_history(config))  # newest first
    for newer, older in itertools.pairwise(history):
        if summary_message_id in {m.id for m in newer.values.get("messages", [])} and (
            summary_message_id not in {m.id for m in older.values.get("messages", [])}
        ):
            assert older.next == (MIDDLEWARE_NODE,)
            return older.values["messages"], newer.values["messages"]
    raise AssertionError("no checkpoint step introduced the summary message")


def assert_no_split_tool_pairs(messages: list[BaseMessage]) -> None:
    calls = set()
    for message in messages:
        if isinstance(message, AIMessage):
            calls.update(call["id"] for call in message.tool_calls)
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls, "tool result kept without its tool call"


def assert_payload_matches_states(payload, before, after) -> None:
    before_ids = [m.id for m in before]
    after_ids = [m.id for m in after]
    assert payload["replaced_message_ids"] == [i for i in before_ids if i not in after_ids]
    assert payload["preserved_message_ids"] == [i for i in after_ids if i in before_ids]
    assert payload["replaced_count"] == len(payload["replaced_message_ids"]) > 0
    assert payload["preserved_count"] == len(payload["preserved_message_ids"])
    summary = after[0]
    assert summary.id == payload["summary_message_id"]
    assert summary.additional_kwargs.get("lc_source") == "summarization"
    assert summary.id not in before_ids


def conversation(graph, config, turns: list[str]) -> None:
    for text in turns:
        graph.invoke(user(text), config)


# --- sync ---------------------------------------------------------------


def test_sync_invoke_dispatches_callback_event_on_compaction():
    graph, config = make_agent(), thread()
    conversation(graph, config, ["hello", "add 2 and 3"])
    handler = CustomEvents()

    graph.invoke(user("what is the weather in Paris?"), {**config, "callbacks": [handler]})

    names = [name for name, _ in handler.events]
    assert names == ["summarization"]
    payload = handler.events[0][1]
    before, after = compaction_states(graph, config, payload["summary_message_id"])
    assert_payload_matches_states(payload, before, after)
    assert payload["summary_message_id"] in message_ids(graph, config)


def test_sync_stream_custom_mode_carries_the_payload():
    graph, config = make_agent(), thread()
    conversation(graph, config, ["hello", "add 2 and 3"])

    custom = [chunk for chunk in graph.stream(user("hi again"), config, stream_mode="custom")]

    assert len(custom) == 1
    payload = custom[0]
    assert payload["event"] == "summarization"
    before, after = compaction_states(graph, config, payload["summary_message_id"])
    assert_payload_matches_states(payload, before, after)


def test_sync_run_without_compaction_emits_nothing():
    graph, config = make_agent(trigger=("messages", 50)), thread()
    handler = CustomEvents()

    for text in ["hello", "add 2 and 3", "weather in Rome"]:
        run = {**config, "callbacks": [handler]}
        chunks = list(graph.stream(user(text), run, stream_mode="custom"))
        assert chunks == []

    assert handler.events == []
    assert not any(
        m.additional_kwargs.get("lc_source") == "summarization"
        for m in graph.get_state(config).values["messages"]
    )


# --- async --------------------------------------------------------------


async def test_astream_events_v2_delivers_on_custom_event_with_payload():
    graph, config = make_agent(), thread()
    for text in ["hello", "add 2 and 3"]:
        await graph.ainvoke(user(text), config)

    events = [
        event
        async for event in graph.astream_events(user("weather in Oslo"), config, version="v2")
        if event["event"] == "on_custom_event"
    ]

    assert [e["name"] for e in events] == ["summarization"]
    event = events[0]
    payload = event["data"]
    assert event["metadata"]["langgraph_node"] == MIDDLEWARE_NODE
    assert "langgraph_step" in event["metadata"]
    before, after = compaction_states(graph, config, payload["summary_message_id"])
    assert_payload_matches_states(payload, before, after)
    final = (await graph.aget_state(config)).values["messages"]
    assert final[0].id == payload["summary_message_id"]
    assert payload["summary"].startswith("User requests: hello | add 2 and 3")


async def test_astream_custom_mode_carries_the_payload():
    graph, config = make_agent(), thread()
    for text in ["hello", "add 2 and 3"]:
        await graph.ainvoke(user(text), config)

    custom = [chunk async for chunk in graph.astream(user("hi"), config, stream_mode="custom")]

    assert len(custom) == 1
    before, after = compaction_states(graph, config, custom[0]["summary_message_id"])
    assert_payload_matches_states(custom[0], before, after)


async def test_async_run_without_compaction_emits_nothing():
    graph, config = make_agent(trigger=("messages", 50)), thread()
    for text in ["hello", "add 2 and 3"]:
        events = [
            e
            async for e in graph.astream_events(user(text), config, version="v2")
            if e["event"] == "on_custom_event"
        ]
        assert events == []
    custom = [c async for c in graph.astream(user("again"), config, stream_mode="custom")]
    assert custom == []


async def test_both_channels_carry_the_same_payload():
    graph, config = make_agent(), thread()
    for text in ["hello", "add 2 and 3"]:
        await graph.ainvoke(user(text), config)
    handler = CustomEvents()

    custom = [
        chunk
        async for chunk in graph.astream(
            user("weather in Lima"), {**config, "callbacks": [handler]}, stream_mode="custom"
        )
    ]

    assert custom == [handler.events[0][1]]


# --- payload ------------------------------------------------------------


def test_payload_shape_is_json_and_explains_the_compaction():
    graph, config = make_agent(trigger=("messages", 6), keep=("messages", 2)), thread()
    conversation(graph, config, ["hello", "add 2 and 3"])

    [payload] = list(graph.stream(user("weather in Paris"), config, stream_mode="custom"))

    assert json.loads(json.dumps(payload)) == payload
    assert payload["middleware"] == "TrackingSummarizationMiddleware"
    assert payload["hook"] == "before_model"
    assert payload["trigger"] == {"type": "messages", "value": 6}
    assert payload["keep"] == {"type": "messages", "value": 2}
    assert payload["tokens_after"] < payload["tokens_before"]
    # The bare summary, as the summarizer wrote it, not the templated message.
    assert payload["summary"].startswith("User requests: hello | add 2 and 3")
    state = graph.get_state(config).values["messages"]
    summary_message = next(m for m in state if m.id == payload["summary_message_id"])
    assert payload["summary"] in summary_message.text
    assert summary_message.text != payload["summary"]


def test_trigger_reports_the_clause_that_fired():
    graph, config = make_agent(trigger=[("messages", 100), ("tokens", 120)]), thread()
    conversation(graph, config, ["hello"])

    custom = []
    for text in ["add 2 and 3", "weather in Paris", "hello again"]:
        custom += list(graph.stream(user(text), config, stream_mode="custom"))

    assert custom, "the token trigger never fired"
    assert custom[0]["trigger"] == {"type": "tokens", "value": 120}
    assert custom[0]["tokens_before"] >= 120


def test_multi_metric_trigger_clause_is_reported_whole():
    graph, config = make_agent(trigger={"messages": 6, "tokens": 10}), thread()
    conversation(graph, config, ["hello", "add 2 and 3"])

    [payload] = list(graph.stream(user("hi"), config, stream_mode="custom"))

    assert payload["trigger"] == {
        "type": "all",
        "conditions": [{"type": "messages", "value": 6}, {"type": "tokens", "value": 10}],
    }


def test_input_messages_without_ids_are_reported_with_their_stored_ids():
    graph, config = make_agent(trigger=("messages", 6), keep=("messages", 2)), thread()
    history = [
        HumanMessage("first"),
        AIMessage("one"),
        HumanMessage("second"),
        AIMessage("two"),
        HumanMessage("third"),
        AIMessage("three"),
        HumanMessage("fourth"),
    ]
    assert all(m.id is None for m in history)

    [payload] = list(graph.stream({"messages": history}, config, stream_mode="custom"))

    before, after = compaction_states(graph, config, payload["summary_message_id"])
    assert all(payload["replaced_message_ids"])
    assert_payload_matches_states(payload, before, after)
    assert payload["replaced_count"] == 5


def test_condensed_count_leaves_out_the_earlier_summary_a_compaction_replaces():
    graph, config = make_agent(trigger=("messages", 6), keep=("messages", 2)), thread()
    payloads = []
    for text in ["hello", "add 2 and 3", "weather in Paris", "add 4 and 5", "weather in Rome"]:
        payloads += list(graph.stream(user(text), config, stream_mode="custom"))

    assert len(payloads) >= 2
    first, second = payloads[0], payloads[1]
    assert first["previous_summary_ids"] == []
    assert first["condensed_count"] == first["replaced_count"]
    # The second compaction removes the first summary along with the conversation.
    assert second["previous_summary_ids"] == [first["summary_message_id"]]
    assert first["summary_message_id"] in second["replaced_message_ids"]
    assert second["condensed_count"] == second["replaced_count"] - 1
    before, after = compaction_states(graph, config, second["summary_message_id"])
    assert_payload_matches_states(second, before, after)


# --- tool pairs ---------------------------------------------------------


@pytest.mark.parametrize("keep", [1, 2, 3, 4])
def test_tool_call_and_result_are_never_split(keep: int):
    # Five messages when the model is called after the tool ran: the cutoff for
    # small `keep` values lands on the tool result.
    graph, config = make_agent(trigger=("messages", 5), keep=("messages", keep)), thread()
    conversation(graph, config, ["hello"])

    payloads = list(graph.stream(user("add 2 and 3"), config, stream_mode="custom"))

    assert payloads
    final = graph.get_state(config).values["messages"]
    assert_no_split_tool_pairs(final)
    for payload in payloads:
        before, after = compaction_states(graph, config, payload["summary_message_id"])
        assert_no_split_tool_pairs(after)
        replaced = set(payload["replaced_message_ids"])
        for message in before:
            if isinstance(message, AIMessage) and message.tool_calls:
                results = [
                    m.id
                    for m in before
                    if isinstance(m, ToolMessage)
                    and m.tool_call_id in {c["id"] for c in message.tool_calls}
                ]
                assert all((r in replaced) == (message.id in replaced) for r in results)


# --- upstream parity and user graphs -----------------------------------


def _shape(messages: list[BaseMessage]) -> list[tuple[str, str, list[dict]]]:
    return [
        (m.type, m.text, [dict(c, id=None) for c in getattr(m, "tool_calls", [])])
        for m in messages
    ]


@pytest.mark.parametrize("trigger", [("messages", 50), ("messages", 6)])
def test_state_matches_upstream_middleware(trigger):
    tracked, plain = make_agent(trigger=trigger), make_agent(
        trigger=trigger, summarization_class=SummarizationMiddleware
    )
    tracked_config, plain_config = thread(), thread()
    turns = ["hello", "add 2 and 3", "weather in Paris", "thanks"]
    conversation(tracked, tracked_config, turns)
    conversation(plain, plain_config, turns)

    assert _shape(tracked.get_state(tracked_config).values["messages"]) == _shape(
        plain.get_state(plain_config).values["messages"]
    )


class CountModelCalls(AgentMiddleware):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def before_model(self, state, runtime):
        self.calls += 1

    async def abefore_model(self, state, runtime):
        self.calls += 1


async def test_works_in_a_user_graph_with_other_middleware():
    counter = CountModelCalls()
    graph, config = make_agent(middleware=[counter]), thread()
    for text in ["hello", "add 2 and 3"]:
        await graph.ainvoke(user(text), config)

    events = [
        e
        async for e in graph.astream_events(user("weather in Oslo"), config, version="v2")
        if e["event"] == "on_custom_event"
    ]

    assert [e["name"] for e in events] == ["summarization"]
    assert counter.calls == 5  # one per model call: 1 + 2 + 2
    before, after = compaction_states(graph, config, events[0]["data"]["summary_message_id"])
    assert_payload_matches_states(events[0]["data"], before, after)


def test_sync_graph_with_other_middleware_runs():
    counter = CountModelCalls()
    graph, config = make_agent(middleware=[counter]), thread()
    conversation(graph, config, ["hello", "add 2 and 3"])

    custom = list(graph.stream(user("weather in Oslo"), config, stream_mode="custom"))

    assert len(custom) == 1
    assert counter.calls == 5  # one per model call: 1 + 2 + 2
