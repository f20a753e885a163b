"""The bundled agent's settings on a real `langgraph dev`: the schema the server
publishes for Studio, and where a misspelt setting is refused."""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk import get_client

pytestmark = pytest.mark.e2e

EARLY = {"trigger": [{"type": "messages", "value": 4}], "keep": {"type": "messages", "value": 2}}


@pytest.fixture
async def client(dev_server):
    async with get_client(url=dev_server.url, api_key=None) as client:
        yield client


async def test_the_assistant_schemas_describe_the_summarization_settings(client):
    (assistant,) = await client.assistants.search(graph_id="agent", limit=1)
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    for name in ("config_schema", "context_schema"):
        schema = schemas[name]
        summarization = schema["$defs"]["SummarizationSchema"]
        assert schema["properties"]["summarization"] == {"$ref": "#/$defs/SummarizationSchema"}
        assert set(summarization["properties"]) == {"enabled", "trigger", "keep"}
        assert summarization["additionalProperties"] is False


async def _run(client, assistant_id: str) -> tuple[dict, dict]:
    thread = await client.threads.create()
    run = await client.runs.create(
        thread["thread_id"], assistant_id, input={"messages": [{"role": "user", "content": "hello"}]}
    )
    await client.runs.join(thread["thread_id"], run["run_id"])
    return await client.runs.get(thread["thread_id"], run["run_id"]), thread


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"summarization": {"trigerr": [{"type": "messages", "value": 4}]}},
         "summarization.trigerr: unknown setting, expected enabled, trigger or keep"),
        ({"summarization": {"keep": {"type": "messagse", "value": 2}}},
         "summarization.keep.type: expected one of messages, tokens, fraction, got 'messagse'"),
        ({"summarisation": EARLY}, "summarisation: unknown setting; did you mean summarization?"),
    ],
)
async def test_a_misspelt_setting_fails_the_first_run_naming_the_field(client, config, message):
    # langgraph-api 0.16.7 checks an assistant's config only against its generic
    # Config shape, not against the graph's schema: creating it succeeds ...
    assistant = await client.assistants.create("agent", config={"configurable": config})
    # ... and its first run fails at its first step, saying which field is wrong.
    run, thread = await _run(client, assistant["assistant_id"])
    assert run["status"] == "error"
    state = await client.threads.get(thread["thread_id"])
    assert state["status"] == "error"
    assert message in str(state.get("error") or await _error_text(client, thread, run))
    # No model was called: the state holds the input only.
    values = (await client.threads.get_state(thread["thread_id"]))["values"]
    assert [m["type"] for m in values.get("messages", [])] in ([], ["human"])


async def _error_text(client, thread, run) -> str:
    parts = [
        part async for part in client.runs.join_stream(thread["thread_id"], run["run_id"])
    ]
    return " ".join(str(part.data) for part in parts)


async def test_settings_given_as_context_as_the_studio_form_saves_them_take_effect(client):
    assistant = await client.assistants.create("agent", context={"summarization": EARLY})
    thread = await client.threads.create()
    for text in ("hello", "add 2 and 3", "weather in Paris"):
        await client.runs.wait(
            thread["thread_id"], assistant["assistant_id"],
            input={"messages": [{"role": "user", "content": text, "id": str(uuid.uuid4())}]},
        )
    values = (await client.threads.get_state(thread["thread_id"]))["values"]
    summaries = [
        m for m in values["messages"]
        if (m.get("additional_kwargs") or {}).get("lc_source") == "summarization"
    ]
    assert summaries, "the context's settings made the assistant compact early"
