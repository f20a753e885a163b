"""A deterministic chat model that needs no network and no API key.

`OfflineChatModel` is the default model of the bundled agent graph, so the
project runs (and its tests pass) anywhere. Its answers depend only on the
input messages:

- **Tool call.** When the last message is a human message and a bound tool
  matches it, the reply is a single tool call. A tool matches when its name,
  its name with `_` read as spaces, or the last word of its name occurs as a
  word in the text: `add` matches "add 2 and 3", `get_weather` matches "what is
  the weather in Paris?". Arguments come from `name=value` pairs in the text
  first; then numeric parameters take the numbers of the text in order, and
  string parameters take the capitalised words after "in", "for", "of",
  "about" or "to" (else the text's last word). A tool whose required arguments
  cannot be filled does not match. The call id hashes the conversation, so it
  is stable across runs and distinct between turns.
- **After tool results.** The reply states each result in prose and repeats
  the request it answers.
- **The request** is always the latest human message the user wrote: the
  summary message a compaction put into the state (`additional_kwargs`
  `lc_source == "summarization"`) is context, not a request.
- **Summarizer call.** When the call carries the summarization middleware's
  metadata (`lc_source == "summarization"`), the reply summarises the
  conversation in the prompt: the user's requests and the tools used, folding
  in any earlier summary written in the same format.
- **Otherwise.** A few sentences echoing the question and counting the turns.

Token usage is reported with `count_tokens_approximately`, and the model
declares a profile (`max_input_tokens`) so fractional summarization limits work.

`make_chat_model` picks the model for the graph: `JOURNAL_BRIDGE_MODEL` holds an
`init_chat_model` spec (for example `openai:gpt-4o-mini`); unset, empty or
`offline` selects this model.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

__all__ = ["MODEL_ENV", "OfflineChatModel", "make_chat_model"]

MODEL_ENV = "JOURNAL_BRIDGE_MODEL"
OFFLINE_SPEC = "offline"
# Pacing, to stand in for a real model's speed in benchmarks: seconds per streamed token.
PACE_ENV = "JOURNAL_BRIDGE_OFFLINE_SECONDS_PER_TOKEN"

_SUMMARIZER_KWARG = "summarizer_call"
_REQUESTS = "User requests: "
_TOOLS = "Tools used: "
_SEPARATOR = " | "
_MESSAGE_XML = re.compile(r'<message type="(\w+)"[^>]*>(.*?)</message>', re.DOTALL)
_TOOL_CALL_XML = re.compile(r'<tool_call [^>]*name="([^"]+)"[^>]*>(.*?)</tool_call>', re.DOTALL)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_PLACE = re.compile(r"\b(?:in|for|of|about|to)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)")
_TOKEN = re.compile(r"\S+\s*")


class OfflineChatModel(BaseChatModel):
    """Deterministic, network-free chat model with tool calling and streaming."""

    model_name: str = "offline-chat"
    seconds_per_token: float = Field(default_factory=lambda: _pace_from_env())
    profile: dict[str, Any] | None = Field(  # type: ignore[assignment]
        default_factory=lambda: {
            "max_input_tokens": 8192,
            "max_output_tokens": 1024,
            "tool_calling": True,
        }
    )

    @property
    def _llm_type(self) -> str:
        return "offline-chat"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, **kwargs)

    # --- generation -----------------------------------------------------

    # The summarizer call is recognised from its config metadata. Streaming
    # paths (taken under `astream_events`) call `_stream` without a run
    # manager, so the config is read here and handed down as a keyword.

    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        return super().invoke(input, config, stop=stop, **_mark_summarizer(config, kwargs))

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        return await super().ainvoke(
            input, config, stop=stop, **_mark_summarizer(config, kwargs)
        )

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        yield from super().stream(input, config, stop=stop, **_mark_summarizer(config, kwargs))

    async def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        async for chunk in super().astream(
            input, config, stop=stop, **_mark_summarizer(config, kwargs)
        ):
            yield chunk

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._reply(messages, run_manager, kwargs)
        if self.seconds_per_token:
            time.sleep(self.seconds_per_token * len(list(_chunks(reply))))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._reply(messages, run_manager, kwargs)
        if self.seconds_per_token:
            await asyncio.sleep(self.seconds_per_token * len(list(_chunks(reply))))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in _chunks(self._reply(messages, run_manager, kwargs)):
            if self.seconds_per_token:
                time.sleep(self.seconds_per_token)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _chunks(self._reply(messages, run_manager, kwargs)):
            if self.seconds_per_token:
                await asyncio.sleep(self.seconds_per_token)
            yield chunk

    def _reply(
        self,
        messages: list[BaseMessage],
        run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None,
        kwargs: dict[str, Any],
    ) -> AIMessage:
        metadata = run_manager.metadata if run_manager is not None else {}
        if kwargs.get(_SUMMARIZER_KWARG) or _is_summarizer(metadata):
            reply = AIMessage(content=_summarise(messages))
        else:
            reply = _answer(messages, kwargs.get("tools") or [])
        reply.response_metadata = {"model_provider": "offline", "model_name": self.model_name}
        input_tokens = count_tokens_approximately(messages)
        output_tokens = count_tokens_approximately([reply])
        reply.usage_metadata = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
        return reply


def make_chat_model(spec: str | None = None) -> BaseChatModel:
    """The chat model for `spec`, or for `JOURNAL_BRIDGE_MODEL` when `spec` is None.

    An empty spec or `offline` gives `OfflineChatModel`; anything else is passed
    to `init_chat_model` (for example `openai:gpt-4o-mini`).
    """
    if spec is None:
        spec = os.environ.get(MODEL_ENV, "")
    spec = spec.strip()
    if not spec or spec.lower() == OFFLINE_SPEC:
        return OfflineChatModel()
    from langchain.chat_models import init_chat_model

    return init_chat_model(spec)


def _pace_from_env() -> float:
    raw = os.environ.get(PACE_ENV, "").strip()
    try:
        pace = float(raw) if raw else 0.0
    except ValueError as exc:
        raise ValueError(f"{PACE_ENV}: expected seconds per token, got {raw!r}") from exc
    if pace < 0:
        raise ValueError(f"{PACE_ENV}: must not be negative, got {raw!r}")
    return pace


def _is_summarizer(metadata: Any) -> bool:
    return isinstance(metadata, dict) and metadata.get("lc_source") == "summarization"


def _mark_summarizer(config: RunnableConfig | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    if _is_summarizer(ensure_config(config).get("metadata")):
        return {**kwargs, _SUMMARIZER_KWARG: True}
    return kwargs


# --- answers ------------------------------------------------------------


def _answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
    last = messages[-1] if messages else None
    if isinstance(last, ToolMessage):
        return AIMessage(content=_describe_tool_results(messages))
    text = last.text if _is_request(last) else ""
    if _is_request(last):
        for tool in tools:
            call = _match_tool(text, tool)
            if call is not None:
                name, args = call
                call_id = _call_id(messages, name, args)
                return AIMessage(
                    content="",
                    tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}],
                )
    turns = sum(1 for m in messages if _is_request(m))
    question = " ".join(text.split()) or "nothing"
    return AIMessage(
        content=(
            f'You said: "{question}". '
            f"This is message {turns} from you in this conversation. "
            "I am an offline model, so my answers are deterministic and need no network access."
        )
    )


def _describe_tool_results(messages: list[BaseMessage]) -> str:
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    results.reverse()
    sentences = [_sentence(f"The {m.name or 'tool'} tool returned {m.text.strip()}") for m in results]
    question = next((m.text for m in reversed(messages) if _is_request(m)), "").strip()
    if question:
        sentences.append(_sentence(f"That answers your request: {question}"))
    return " ".join(sentences)


def _is_request(message: BaseMessage | None) -> bool:
    """A human message the user wrote, not the summary a compaction left in the state."""
    return isinstance(message, HumanMessage) and not _is_summarizer(message.additional_kwargs)


def _sentence(text: str) -> str:
    """`text` ending in exactly one closing punctuation mark."""
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _match_tool(text: str, tool: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    function = tool.get("function", tool)
    name = function.get("name")
    if not name:
        return None
    lowered = text.lower()
    keywords = {name.lower(), name.lower().replace("_", " "), name.lower().split("_")[-1]}
    if not any(re.search(rf"\b{re.escape(k)}\b", lowered) for k in keywords):
        return None
    parameters = function.get("parameters") or {}
    properties: dict[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    explicit = dict(re.findall(r"\b(\w+)=(\"[^\"]*\"|\S+)", text))
    numbers = _NUMBER.findall(text)
    places = _PLACE.findall(text)
    args: dict[str, Any] = {}
    for param, schema in properties.items():
        kind = schema.get("type")
        if param in explicit:
            raw = explicit[param].strip('"')
            args[param] = _coerce(raw, kind)
        elif kind in ("integer", "number") and numbers:
            args[param] = _coerce(numbers.pop(0), kind)
        elif kind == "string":
            if places:
                args[param] = places.pop(0)
            else:
                words = re.findall(r"[\w'-]+", text)
                if words:
                    args[param] = words[-1]
    if not required <= args.keys():
        return None
    return name, args


def _coerce(raw: str, kind: str | None) -> Any:
    try:
        if kind == "integer":
            return int(float(raw))
        if kind == "number":
            value = float(raw)
            return int(value) if value.is_integer() else value
    except ValueError:
        return raw
    return raw


def _call_id(messages: list[BaseMessage], name: str, args: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(f"{message.type}\x00{message.text}\x00".encode())
    digest.update(f"{name}\x00{json.dumps(args, sort_keys=True)}".encode())
    return f"call_{digest.hexdigest()[:24]}"


# --- summaries ----------------------------------------------------------


def _summarise(messages: list[BaseMessage]) -> str:
    """Summarise the conversation rendered in the summarization prompt."""
    prompt = "\n".join(m.text for m in messages)
    requests: list[str] = []
    tools: list[str] = []
    pending: list[str] = []
    for kind, body in _MESSAGE_XML.findall(prompt):
        body = html.unescape(body).strip()
        if kind == "human":
            earlier = _earlier_summary(body)
            if earlier is not None:
                requests.extend(earlier[0])
                tools.extend(earlier[1])
            else:
                requests.append(_shorten(body))
        elif kind == "ai":
            pending.extend(name for name, _ in _TOOL_CALL_XML.findall(body))
        elif kind == "tool":
            name = pending.pop(0) if pending else "tool"
            tools.append(f"{name} -> {_shorten(body)}")
    lines = [
        _REQUESTS + (_SEPARATOR.join(requests) or "none"),
        _TOOLS + (_SEPARATOR.join(tools) or "none"),
    ]
    return "\n".join(lines)


def _earlier_summary(text: str) -> tuple[list[str], list[str]] | None:
    """Requests and tools from an earlier summary in this model's own format."""
    requests = tools = None
    for line in text.splitlines():
        if line.startswith(_REQUESTS):
            requests = _items(line[len(_REQUESTS) :])
        elif line.startswith(_TOOLS):
            tools = _items(line[len(_TOOLS) :])
    if requests is None or tools is None:
        return None
    return requests, tools


def _items(value: str) -> list[str]:
    return [] if value == "none" else value.split(_SEPARATOR)


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- streaming ----------------------------------------------------------


def _chunks(reply: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Word-level chunks of `reply`; the last one carries usage and closes the message."""
    metadata = dict(reply.response_metadata)
    if reply.tool_calls:
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                tool_call_chunks=[
                    {
                        "name": call["name"],
                        "args": json.dumps(call["args"]),
                        "id": call["id"],
                        "index": index,
                        "type": "tool_call_chunk",
                    }
                    for index, call in enumerate(reply.tool_calls)
                ],
            )
        )
    else:
        for token in _TOKEN.findall(reply.text):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
    yield ChatGenerationChunk(
        message=AIMessageChunk(
            content="",
            usage_metadata=reply.usage_metadata,
            response_metadata=metadata,
            chunk_position="last",
        )
    )
