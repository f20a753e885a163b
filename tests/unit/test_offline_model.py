"""OfflineChatModel: deterministic answers, tool calls, streaming, summaries."""

from __future__ import annotations

import uuid

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs import offline_model
from graphs.agent import add, get_weather
from graphs.offline_model import OfflineChatModel, make_chat_model

SUMMARIZER_CONFIG = {"metadata": {"lc_source": "summarization"}, "tags": ["nostream"]}


@pytest.fixture
def model() -> OfflineChatModel:
    return OfflineChatModel()


@pytest.fixture
def with_tools(model):
    return model.bind_tools([add, get_weather])


def test_tool_is_called_when_the_request_names_it(with_tools):
    reply = with_tools.invoke("please add 2 and 3")

    [call] = reply.tool_calls
    assert call["name"] == "add"
    assert call["args"] == {"a": 2, "b": 3}
    assert call["id"].startswith("call_")
    assert reply.content == ""


def test_string_argument_comes_from_the_place_phrase(with_tools):
    reply = with_tools.invoke("What is the weather in New York today?")

    assert reply.tool_calls[0]["name"] == "get_weather"
    assert reply.tool_calls[0]["args"] == {"city": "New York"}


def test_explicit_name_value_pairs_win(with_tools):
    reply = with_tools.invoke("use add a=10 b=-4")

    assert reply.tool_calls[0]["args"] == {"a": 10, "b": -4}


def test_no_tool_call_when_required_arguments_are_missing(with_tools):
    reply = with_tools.invoke("can you add?")

    assert reply.tool_calls == []
    assert "can you add?" in reply.text


def test_no_tool_call_without_bound_tools(model):
    assert model.invoke("please add 2 and 3").tool_calls == []


def test_answers_in_prose_after_a_tool_result(with_tools):
    messages = [
        HumanMessage("add 2 and 3"),
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]),
        ToolMessage("5", tool_call_id="c1", name="add"),
    ]

    reply = with_tools.invoke(messages)

    assert reply.tool_calls == []
    assert "The add tool returned 5." in reply.text


def test_a_tool_result_ending_in_a_full_stop_gets_no_second_one(with_tools):
    messages = [
        HumanMessage("What is the weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("Sunny in Paris.", tool_call_id="c1", name="get_weather"),
    ]

    reply = with_tools.invoke(messages)

    assert reply.text == (
        "The get_weather tool returned Sunny in Paris. "
        "That answers your request: What is the weather in Paris?"
    )
    assert ".." not in reply.text and "?." not in reply.text


def test_after_a_compaction_the_request_is_the_latest_human_message_not_the_summary(
    with_tools,
):
    # The state after a compaction: the summary message first, then the kept messages.
    summary = HumanMessage(
        "Here is a summary of the conversation to date:\n\nUser requests: hello\nTools used: none",
        additional_kwargs={"lc_source": "summarization"},
    )
    messages = [
        summary,
        HumanMessage("weather in Paris"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("Sunny in Paris.", tool_call_id="c1", name="get_weather"),
    ]

    reply = with_tools.invoke(messages)

    assert reply.text.endswith("That answers your request: weather in Paris.")
    assert "summary" not in reply.text


def test_the_summary_message_is_not_counted_as_a_message_from_the_user(with_tools):
    summary = HumanMessage(
        "Here is a summary of the conversation to date:\n\nUser requests: add 2 and 3",
        additional_kwargs={"lc_source": "summarization"},
    )

    reply = with_tools.invoke([summary, HumanMessage("hi")])

    assert reply.tool_calls == []
    assert '"hi"' in reply.text and "message 1 from you" in reply.text


def test_plain_answer_echoes_the_question_and_counts_turns(model):
    reply = model.invoke([HumanMessage("hi"), AIMessage("hello"), HumanMessage("how are you")])

    assert '"how are you"' in reply.text
    assert "message 2 from you" in reply.text
    assert len(reply.text.split(". ")) >= 3


def test_answers_are_deterministic(with_tools):
    first = with_tools.invoke("add 2 and 3")
    again = OfflineChatModel().bind_tools([add, get_weather]).invoke("add 2 and 3")
    assert first.tool_calls == again.tool_calls
    assert OfflineChatModel().invoke("hi").text == OfflineChatModel().invoke("hi").text


def test_tool_call_ids_differ_between_turns(with_tools):
    once = with_tools.invoke([HumanMessage("add 2 and 3")])
    twice = with_tools.invoke(
        [HumanMessage("add 2 and 3"), AIMessage("5"), HumanMessage("add 2 and 3")]
    )
    assert once.tool_calls[0]["id"] != twice.tool_calls[0]["id"]


def test_reports_usage_and_declares_a_profile(model):
    reply = model.invoke("hello")

    usage = reply.usage_metadata
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert model.profile["max_input_tokens"] > 0


def test_streams_word_chunks_that_add_up_to_the_answer(model):
    chunks = list(model.stream("tell me something"))

    texts = [c.text for c in chunks if c.text]
    assert len(texts) > 5
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.text == model.invoke("tell me something").text
    assert whole.usage_metadata["total_tokens"] > 0


async def test_async_stream_yields_several_chunks(model):
    chunks = [c async for c in model.astream("tell me something")]

    assert sum(1 for c in chunks if c.text) > 5
    assert "".join(c.text for c in chunks) == (await model.ainvoke("tell me something")).text


def test_streamed_tool_call_aggregates_to_the_same_call(with_tools):
    chunks = list(with_tools.stream("add 2 and 3"))

    whole: AIMessageChunk = chunks[0]
    for chunk in chunks[1:]:
        whole += chunk
    assert whole.tool_calls == with_tools.invoke("add 2 and 3").tool_calls


def test_summarizer_call_gets_a_summary(model):
    prompt = (
        "Summarise.\n<messages>\nMessages to summarize:\n"
        '<message type="human">add 2 and 3</message>\n'
        '<message type="ai">\n  <tool_call id="c1" name="add">{"a": 2, "b": 3}</tool_call>\n'
        "</message>\n"
        '<message type="tool">5</message>\n'
        '<message type="ai">The sum is 5</message>\n'
        '<message type="human">weather in Paris</message>\n'
        "</messages>"
    )

    summary = model.invoke(prompt, config=SUMMARIZER_CONFIG).text

    assert summary == "User requests: add 2 and 3 | weather in Paris\nTools used: add -> 5"
    assert model.invoke(prompt, config=SUMMARIZER_CONFIG).text == summary


def _summarizing_agent():
    """An agent on the offline model whose middleware summarises at 6 messages, keeping 2; and a new thread's config."""
    model = OfflineChatModel()
    graph = create_agent(
        model,
        tools=[add, get_weather],
        middleware=[SummarizationMiddleware(model, trigger=("messages", 6), keep=("messages", 2))],
        checkpointer=InMemorySaver(),
    )
    return graph, {"configurable": {"thread_id": str(uuid.uuid4())}}


def test_summarizer_call_through_upstream_middleware_summarises_the_conversation():
    graph, config = _summarizing_agent()
    for text in ["hello", "add 2 and 3", "weather in Paris"]:
        graph.invoke({"messages": [{"role": "user", "content": text}]}, config)

    messages = graph.get_state(config).values["messages"]
    summary = messages[0]
    assert summary.additional_kwargs.get("lc_source") == "summarization"
    assert "User requests: hello | add 2 and 3" in summary.text
    assert "Tools used: add -> 5" in summary.text


async def test_summarizer_call_is_recognised_when_streamed_by_astream_events():
    # Under astream_events the model streams, and `_stream` gets no run manager.
    graph, config = _summarizing_agent()
    streamed = 0
    for text in ["hello", "add 2 and 3", "weather in Paris"]:
        async for event in graph.astream_events(
            {"messages": [{"role": "user", "content": text}]}, config, version="v2"
        ):
            streamed += event["event"] == "on_chat_model_stream"

    assert streamed > 0
    summary = (await graph.aget_state(config)).values["messages"][0]
    assert summary.additional_kwargs.get("lc_source") == "summarization"
    assert "User requests: hello | add 2 and 3" in summary.text


def test_summarizer_call_gets_a_summary_when_streamed(model):
    prompt = '<messages>\n<message type="human">hello</message>\n</messages>'

    chunks = list(model.stream(prompt, config=SUMMARIZER_CONFIG))

    assert "".join(c.text for c in chunks) == "User requests: hello\nTools used: none"


def test_summary_folds_in_an_earlier_summary(model):
    prompt = (
        "<messages>\n"
        '<message type="human">Here is a summary of the conversation to date:\n\n'
        "User requests: hello\nTools used: add -&gt; 5</message>\n"
        '<message type="human">weather in Rome</message>\n'
        "</messages>"
    )

    summary = model.invoke(prompt, config=SUMMARIZER_CONFIG).text

    assert summary == "User requests: hello | weather in Rome\nTools used: add -> 5"


@pytest.mark.parametrize("spec", [None, "", "offline", " Offline "])
def test_make_chat_model_defaults_to_offline(monkeypatch, spec):
    monkeypatch.delenv(offline_model.MODEL_ENV, raising=False)
    assert isinstance(make_chat_model(spec), OfflineChatModel)


def test_make_chat_model_passes_other_specs_to_init_chat_model(monkeypatch):
    import langchain.chat_models

    seen = []
    monkeypatch.setattr(
        langchain.chat_models, "init_chat_model", lambda spec: seen.append(spec) or "model"
    )
    monkeypatch.setenv(offline_model.MODEL_ENV, "openai:gpt-4o-mini")

    assert make_chat_model() == "model"
    assert make_chat_model("anthropic:claude") == "model"
    assert seen == ["openai:gpt-4o-mini", "anthropic:claude"]


def test_pacing_comes_from_the_environment_and_changes_nothing_else(monkeypatch):
    from graphs.offline_model import PACE_ENV, OfflineChatModel

    monkeypatch.setenv(PACE_ENV, "0.001")
    paced = OfflineChatModel()
    assert paced.seconds_per_token == 0.001
    plain = OfflineChatModel(seconds_per_token=0)
    assert [c.content for c in paced.stream("hello there")] == [c.content for c in plain.stream("hello there")]
    assert paced.invoke("hello there").content == plain.invoke("hello there").content


@pytest.mark.parametrize("raw", ["fast", "-1"])
def test_a_bad_pace_is_refused_naming_the_variable(monkeypatch, raw):
    from graphs.offline_model import PACE_ENV, OfflineChatModel

    monkeypatch.setenv(PACE_ENV, raw)
    with pytest.raises(ValueError, match=PACE_ENV):
        OfflineChatModel()
