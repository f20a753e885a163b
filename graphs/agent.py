"""The bundled agent: `create_agent` with tracked, per-assistant summarization.

The model comes from `JOURNAL_BRIDGE_MODEL` (an `init_chat_model` spec); by
default it is the offline deterministic model. Summarization settings come
from each assistant's `configurable["summarization"]`, with defaults from the
environment (see `graphs.agent_settings`). One compiled graph serves
every assistant: the settings are applied per call, not per compile. The
settings' schema is the graph's context schema, so Studio shows them as a form.
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.tools import tool

from graphs.agent_settings import AgentSettings, AssistantSummarizationMiddleware
from graphs.offline_model import make_chat_model

SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the add tool for arithmetic and the "
    "get_weather tool for weather questions; answer briefly."
)

_WEATHER = ("sunny", "cloudy", "rainy", "windy", "snowy")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def get_weather(city: str) -> str:
    """Report the (made-up, deterministic) weather in a city."""
    # A stable function of the name, so repeated runs agree.
    seed = sum(city.lower().encode())
    return f"It is {_WEATHER[seed % len(_WEATHER)]} and {10 + seed % 20} C in {city}."


TOOLS = [add, get_weather]

model = make_chat_model()

graph = create_agent(
    model,
    tools=TOOLS,
    middleware=[AssistantSummarizationMiddleware(model)],
    system_prompt=SYSTEM_PROMPT,
    # The settings' schema: what `GET /assistants/{id}/schemas` and Studio's form show.
    context_schema=AgentSettings,
)
