"""The bundled agent graph (graphs/agent.py) and its per-assistant settings."""

from __future__ import annotations

import importlib.util
import re
import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graphs.agent_settings import (
    ENV_ENABLED,
    ENV_KEEP,
    ENV_TRIGGER,
    SettingsError,
    SummarizationSettings,
)
from graphs.offline_model import MODEL_ENV, OfflineChatModel
from tests.harness.langgraph_server import PROJECT_ROOT

AGENT_PATH = PROJECT_ROOT / "graphs" / "agent.py"
EARLY = {
    "trigger": [{"type": "messages", "value": 6}],
    "keep": {"type": "messages", "value": 2},
}


def load_agent(monkeypatch, **env: str):
    """A fresh import of graphs/agent.py under `env`, with a checkpointer attached."""
    for name in (MODEL_ENV, ENV_ENABLED, ENV_TRIGGER, ENV_KEEP):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(f"agent_{uuid.uuid4().hex}", AGENT_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def agent(monkeypatch):
    return load_agent(monkeypatch)


def with_saver(graph):
    return graph.copy(update={"checkpointer": InMemorySaver()})


def run_config(summarization: Any = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": str(uuid.uuid4())}
    if summarization is not None:
        configurable["summarization"] = summarization
    return {"configurable": configurable}


def chat(graph, config, turns: list[str]) -> list[dict[str, Any]]:
    """Runs the turns; returns the summarization payloads seen on the custom stream."""
    payloads = []
    for text in turns:
        payloads += graph.stream(
            {"messages": [{"role": "user", "content": text}]}, config, stream_mode="custom"
        )
    return payloads


TURNS = ["hello", "add 2 and 3", "what is the weather in Paris?", "thanks"]


def test_default_graph_uses_the_offline_model_and_its_tools(agent):
    graph = with_saver(agent.graph)
    config = run_config()

    chat(graph, config, ["add 2 and 3"])

    assert isinstance(agent.model, OfflineChatModel)
    messages = graph.get_state(config).values["messages"]
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[2].text == "5"
    assert "returned 5" in messages[3].text


def test_weather_tool_is_deterministic(agent):
    assert agent.get_weather.invoke({"city": "Paris"}) == agent.get_weather.invoke(
        {"city": "Paris"}
    )


def test_default_settings_do_not_compact_a_short_conversation(agent):
    graph, config = with_saver(agent.graph), run_config()

    assert chat(graph, config, TURNS) == []


def test_configurable_settings_make_the_assistant_compact_early(agent):
    graph, config = with_saver(agent.graph), run_config(EARLY)

    payloads = chat(graph, config, TURNS)

    assert payloads
    assert payloads[0]["trigger"] == {"type": "messages", "value": 6}
    assert payloads[0]["keep"] == {"type": "messages", "value": 2}
    assert graph.get_state(config).values["messages"][0].id == payloads[-1]["summary_message_id"]


def test_settings_fall_back_field_by_field(agent):
    graph, config = with_saver(agent.graph), run_config({"trigger": EARLY["trigger"]})

    payloads = chat(graph, config, TURNS)

    assert payloads and payloads[0]["keep"] == {"type": "messages", "value": 10}


def test_disabled_summarization_never_compacts(agent):
    graph, config = with_saver(agent.graph), run_config({**EARLY, "enabled": False})

    assert chat(graph, config, TURNS) == []


def test_fraction_uses_the_model_profile(agent):
    settings = {"trigger": [{"type": "fraction", "value": 0.01}], "keep": EARLY["keep"]}
    graph, config = with_saver(agent.graph), run_config(settings)

    payloads = chat(graph, config, TURNS)

    assert payloads[0]["trigger"] == {"type": "fraction", "value": 0.01}
    assert payloads[0]["tokens_before"] >= int(agent.model.profile["max_input_tokens"] * 0.01)


async def test_async_run_applies_configurable_settings(agent):
    graph, config = with_saver(agent.graph), run_config(EARLY)
    events = []
    for text in TURNS:
        events += [
            e
            async for e in graph.astream_events(
                {"messages": [{"role": "user", "content": text}]}, config, version="v2"
            )
            if e["event"] == "on_custom_event" and e["name"] == "summarization"
        ]

    assert events and events[0]["data"]["trigger"] == {"type": "messages", "value": 6}


@pytest.mark.parametrize(
    ("summarization", "message"),
    [
        (
            {"trigger": [{"type": "foo", "value": 3}]},
            "summarization.trigger[0].type: expected one of messages, tokens, fraction, got 'foo'",
        ),
        (
            {"trigger": [{"type": "messages", "value": 4}, {"type": "tokens", "value": 0}]},
            "summarization.trigger[1].value: expected a positive integer for 'tokens', got 0",
        ),
        (
            {"keep": {"type": "fraction", "value": 1.5}},
            "summarization.keep.value: expected a number in (0, 1] for 'fraction', got 1.5",
        ),
        (
            {"keep": {"type": "messages", "value": True}},
            "summarization.keep.value: expected a positive integer for 'messages', got True",
        ),
        ({"keep": {"value": 3}}, "summarization.keep.type: missing"),
        ({"enabled": "yes"}, "summarization.enabled: expected true or false, got 'yes'"),
        ({"trigger": []}, "summarization.trigger: expected a non-empty list"),
        ({"triger": []}, "summarization.triger: unknown setting"),
        ("early", "summarization: expected an object, got 'early'"),
    ],
)
def test_invalid_settings_fail_the_run_naming_the_field(agent, summarization, message):
    graph = with_saver(agent.graph)

    with pytest.raises(SettingsError, match=re.escape(message)):
        graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, run_config(summarization))


async def test_invalid_settings_fail_the_async_run(agent):
    with pytest.raises(SettingsError, match=re.escape("summarization.trigger[0].type")):
        await agent.graph.ainvoke(
            {"messages": [{"role": "user", "content": "hi"}]},
            run_config({"trigger": [{"type": "foo", "value": 1}]}),
        )


def test_environment_sets_the_defaults(monkeypatch):
    agent = load_agent(monkeypatch, **{ENV_TRIGGER: "messages:6", ENV_KEEP: "messages:2"})
    graph, config = with_saver(agent.graph), run_config()

    payloads = chat(graph, config, TURNS)

    assert payloads[0]["trigger"] == {"type": "messages", "value": 6}
    assert payloads[0]["keep"] == {"type": "messages", "value": 2}


def test_environment_can_disable_and_configurable_can_enable(monkeypatch):
    agent = load_agent(
        monkeypatch, **{ENV_ENABLED: "false", ENV_TRIGGER: "messages:6", ENV_KEEP: "messages:2"}
    )

    assert chat(with_saver(agent.graph), run_config(), TURNS) == []
    assert chat(with_saver(agent.graph), run_config({"enabled": True}), TURNS)


def test_environment_settings_parse():
    settings = SummarizationSettings.from_env(
        {ENV_TRIGGER: "messages:40, tokens:3000,fraction:0.8", ENV_KEEP: "tokens:500"}
    )

    assert settings.trigger == (("messages", 40), ("tokens", 3000), ("fraction", 0.8))
    assert settings.keep == ("tokens", 500)
    assert settings.enabled is True
    assert SummarizationSettings.from_env({}) == SummarizationSettings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({ENV_TRIGGER: "foo:3"}, f"{ENV_TRIGGER}[0]: expected one of messages, tokens, fraction"),
        ({ENV_TRIGGER: "messages:4,tokens"}, f"{ENV_TRIGGER}[1]: expected type:value"),
        ({ENV_KEEP: "messages:x"}, f"{ENV_KEEP}: expected a number after messages:"),
        ({ENV_ENABLED: "maybe"}, f"{ENV_ENABLED}: expected true or false"),
    ],
)
def test_invalid_environment_names_the_variable(env, message):
    with pytest.raises(SettingsError, match=re.escape(message)):
        SummarizationSettings.from_env(env)


def test_fraction_without_a_model_profile_names_the_field():
    from langchain.agents import create_agent

    from graphs.agent_settings import AssistantSummarizationMiddleware

    model = OfflineChatModel(profile=None)
    assert model.profile is None
    graph = create_agent(model, middleware=[AssistantSummarizationMiddleware(model)])

    with pytest.raises(SettingsError, match=re.escape("summarization.keep.type: 'fraction'")):
        graph.invoke(
            {"messages": [{"role": "user", "content": "hi"}]},
            run_config({"keep": {"type": "fraction", "value": 0.5}}),
        )


def test_a_near_miss_of_summarization_is_refused_not_ignored(agent):
    graph = with_saver(agent.graph)
    config = {"configurable": {"thread_id": str(uuid.uuid4()), "summarisation": EARLY}}
    with pytest.raises(SettingsError, match=re.escape("summarisation: unknown setting; did you mean summarization?")):
        graph.invoke({"messages": [{"role": "user", "content": "hi"}]}, config)


def test_the_settings_schema_is_the_graphs_context_schema(agent):
    schema = agent.graph.get_context_jsonschema()
    summarization = schema["$defs"]["SummarizationSchema"]
    assert set(summarization["properties"]) == {"enabled", "trigger", "keep"}
    assert summarization["additionalProperties"] is False
    size = schema["$defs"]["ContextSizeSchema"]["properties"]
    assert size["type"]["enum"] == ["messages", "tokens", "fraction"]
