"""A deterministic chat model with tools that drives real agent harnesses, and counts their summarizers.

`ScriptedToolModel` plays every role a harness gives a model -- an agent, a
supervisor, a swarm member, a sub-agent, a summarizer -- from the messages alone:

- **A request** is the latest human message a user wrote: not a summary a
  harness put into the state (`lc_source == "summarization"`, `name ==
  "summary"`).
- **One tool per request and role.** While none of the model's own bound tools
  has answered since the request (a result is known by its call), the model calls the first bound tool the
  request names: its name (`write_file`), its name with `_` read as spaces
  ("write file"), or for a handoff tool `transfer_to_X` the name `X`. The
  arguments come from the request (numbers, a `/path`, the text itself; see
  `_arguments`). Once one of its tools answered, or when nothing matches, it
  answers in prose.
- **A summarizer call** is one whose config carries `lc_source ==
  "summarization"` (langchain's and deepagents' summarization) or whose prompt
  ends with langmem's request for a summary. The reply is a short summary of the
  requests in the prompt. Each such call appends one JSON line to the file named
  by `JOURNAL_BRIDGE_TEST_SUMMARIZER_LOG` (when set): the thread, the graph (the
  model's `graph` label) and what the callbacks carried (tags, node, namespace),
  so a test counts summarizer runs without reading the journal.
- `JOURNAL_BRIDGE_TEST_MODEL_CALL_LOG` (when set) gets the same line for every
  call, summarizer or not.

Streaming (taken under `astream_events`) yields the same reply in chunks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig, ensure_config

from graphs.offline_model import OfflineChatModel

SUMMARIZER_LOG_ENV = "JOURNAL_BRIDGE_TEST_SUMMARIZER_LOG"
CALL_LOG_ENV = "JOURNAL_BRIDGE_TEST_MODEL_CALL_LOG"

_SUMMARIZER_KWARG = "summarizer_call"
# langmem's SummarizationNode asks for a summary with one of these as the prompt's last message.
_LANGMEM_ASKS = ("Create a summary of the conversation above", "Extend this summary by taking into account")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_PATH = re.compile(r"(/[\w./-]+)")
_PLACE = re.compile(r"\b(?:in|for)\s+([A-Z][\w'-]*)")
_TOKEN = re.compile(r"\S+\s*")
# What the callbacks of a call carry that says who made it.
_METADATA_KEYS = ("lc_source", "langgraph_node", "checkpoint_ns", "langgraph_checkpoint_ns", "lc_agent_name",
                  "ls_integration", "graph_id")


def is_summary_message(message: BaseMessage | dict[str, Any]) -> bool:
    """Whether a message is a summary a harness keeps in the state, not something the user wrote."""
    if isinstance(message, dict):
        kwargs, name = message.get("additional_kwargs") or {}, message.get("name")
    else:
        kwargs, name = message.additional_kwargs or {}, message.name
    return kwargs.get("lc_source") == "summarization" or name == "summary"


class ScriptedToolModel(BaseChatModel):
    """Deterministic chat model with tool calls, handoffs and summaries; see the module docstring."""

    graph: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted-tools"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"graph": self.graph}

    # Tools are bound as the bundled offline model binds them: in OpenAI's format, under `tools`.
    bind_tools = OfflineChatModel.bind_tools

    # --- entry points: note the call, then generate ---------------------------------

    def invoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
               stop: list[str] | None = None, **kwargs: Any) -> AIMessage:
        kwargs = self._note(input, config, kwargs, _append)
        return super().invoke(input, config, stop=stop, **kwargs)

    async def ainvoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
                      stop: list[str] | None = None, **kwargs: Any) -> AIMessage:
        kwargs = await self._anote(input, config, kwargs)
        return await super().ainvoke(input, config, stop=stop, **kwargs)

    def stream(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
               stop: list[str] | None = None, **kwargs: Any) -> Iterator[AIMessageChunk]:
        kwargs = self._note(input, config, kwargs, _append)
        yield from super().stream(input, config, stop=stop, **kwargs)

    async def astream(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
                      stop: list[str] | None = None, **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        kwargs = await self._anote(input, config, kwargs)
        async for chunk in super().astream(input, config, stop=stop, **kwargs):
            yield chunk

    def _note(self, input: LanguageModelInput, config: RunnableConfig | None, kwargs: dict[str, Any],
              write: Callable[[str, str], None]) -> dict[str, Any]:
        summarizer, lines = self._classify(input, config)
        for path, line in lines:
            write(path, line)
        return {**kwargs, _SUMMARIZER_KWARG: True} if summarizer else kwargs

    async def _anote(self, input: LanguageModelInput, config: RunnableConfig | None,
                     kwargs: dict[str, Any]) -> dict[str, Any]:
        summarizer, lines = self._classify(input, config)
        for path, line in lines:
            # A server's event loop must not block on a file.
            await asyncio.to_thread(_append, path, line)
        return {**kwargs, _SUMMARIZER_KWARG: True} if summarizer else kwargs

    def _classify(self, input: LanguageModelInput, config: RunnableConfig | None) -> tuple[bool, list[tuple[str, str]]]:
        config = ensure_config(config)
        metadata = config.get("metadata") or {}
        messages = self._convert_input(input).to_messages()
        summarizer = metadata.get("lc_source") == "summarization" or _asks_langmem_summary(messages)
        line = json.dumps({
            "thread_id": (config.get("configurable") or {}).get("thread_id") or metadata.get("thread_id"),
            "graph": self.graph,
            "summarizer": summarizer,
            "tags": sorted(str(tag) for tag in config.get("tags") or []),
            "metadata": {key: metadata[key] for key in _METADATA_KEYS if key in metadata},
        }, default=str)
        paths = [os.environ.get(CALL_LOG_ENV)] + ([os.environ.get(SUMMARIZER_LOG_ENV)] if summarizer else [])
        return summarizer, [(path, line) for path in paths if path]

    # --- generation -------------------------------------------------------------

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, kwargs))])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, kwargs))])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        yield from _chunks(self._reply(messages, kwargs))

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: AsyncCallbackManagerForLLMRun | None = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _chunks(self._reply(messages, kwargs)):
            yield chunk

    def _reply(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        if kwargs.get(_SUMMARIZER_KWARG) or _asks_langmem_summary(messages):
            reply = AIMessage(content=_summarise(messages))
        else:
            reply = _answer(messages, kwargs.get("tools") or [])
        reply.response_metadata = {"model_provider": "scripted", "model_name": self.graph}
        tokens_in, tokens_out = count_tokens_approximately(messages), count_tokens_approximately([reply])
        reply.usage_metadata = {"input_tokens": tokens_in, "output_tokens": tokens_out,
                                "total_tokens": tokens_in + tokens_out}
        return reply


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


def _asks_langmem_summary(messages: list[BaseMessage]) -> bool:
    return bool(messages) and isinstance(messages[-1], HumanMessage) and any(
        ask in messages[-1].text for ask in _LANGMEM_ASKS
    )


def _is_request(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and not is_summary_message(message)


# --- answers ------------------------------------------------------------------


def _answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
    at = max((i for i, m in enumerate(messages) if _is_request(m)), default=-1)
    request = messages[at].text.strip() if at >= 0 else ""
    mine = {_function(tool).get("name") for tool in tools}
    after = messages[at + 1:]
    # A tool's result is known by its call (a tool returning a Command may leave its name out).
    called = {call["id"]: call["name"] for m in after if isinstance(m, AIMessage) for call in m.tool_calls}
    answered = [m for m in after if isinstance(m, ToolMessage) and called.get(m.tool_call_id, m.name) in mine]
    if request and not answered:
        for tool in tools:
            function = _function(tool)
            if _named(request, function["name"]):
                args = _arguments(request, function)
                call_id = "call_" + hashlib.sha256(
                    "\x00".join([*(f"{m.type}:{m.text}" for m in messages), function["name"]]).encode()
                ).hexdigest()[:24]
                return AIMessage(content="", tool_calls=[
                    {"name": function["name"], "args": args, "id": call_id, "type": "tool_call"}
                ])
    turns = sum(1 for m in messages if _is_request(m))
    results = " ".join(f"{called.get(m.tool_call_id, m.name)} said: {_shorten(m.text, 60)}." for m in answered)
    return AIMessage(content=f'About "{_shorten(request, 60)}" (request {turns}): done. {results}'.strip())


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool)


def _named(request: str, name: str) -> bool:
    lowered = request.lower()
    keywords = {name.lower(), name.lower().replace("_", " ")}
    if name.startswith("transfer_to_"):
        keywords.add(name[len("transfer_to_"):].lower())
    return any(re.search(rf"(?<![\w/]){re.escape(k)}(?![\w/])", lowered) for k in keywords)


def _arguments(request: str, function: dict[str, Any]) -> dict[str, Any]:
    name = function["name"]
    if name == "write_todos":
        steps = [s.strip() for s in request.split(":", 1)[-1].split(",") if s.strip()]
        return {"todos": [{"content": step, "status": "pending" if i else "in_progress"}
                          for i, step in enumerate(steps)]}
    if name == "task":
        # What the sub-agent is asked names none of its tools: it answers in prose.
        return {"description": f"Answer briefly: {request.split(':', 1)[-1].strip()}",
                "subagent_type": "general-purpose"}
    parameters = function.get("parameters") or {}
    numbers, places = _NUMBER.findall(request), _PLACE.findall(request)
    path = _PATH.search(request)
    args: dict[str, Any] = {}
    for param in parameters.get("required") or []:
        kind = ((parameters.get("properties") or {}).get(param) or {}).get("type")
        if kind in ("integer", "number") and numbers:
            args[param] = int(float(numbers.pop(0)))
        elif kind == "string":
            if "path" in param and path:
                args[param] = path.group(1)
            elif param == "content":
                args[param] = f"Notes on: {request}\n"
            elif places:
                args[param] = places.pop(0)
            else:
                args[param] = request
    return args


def _summarise(messages: list[BaseMessage]) -> str:
    """A short summary of the requests a summarizer's prompt holds (quoted or as messages)."""
    text = "\n".join(m.text for m in messages)
    asked = [_shorten(m.text, 40) for m in messages
             if _is_request(m) and not any(ask in m.text for ask in _LANGMEM_ASKS)]
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    quoted = len(re.findall(r'<message type="human"', text))
    return f"Summary {digest}: {len(asked) or quoted} requests condensed. " + "; ".join(asked[-3:])


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _chunks(reply: AIMessage) -> Iterator[ChatGenerationChunk]:
    if reply.tool_calls:
        yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i, "type": "tool_call_chunk"}
            for i, c in enumerate(reply.tool_calls)
        ]))
    else:
        for token in _TOKEN.findall(reply.text):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
    yield ChatGenerationChunk(message=AIMessageChunk(
        content="", usage_metadata=reply.usage_metadata, response_metadata=dict(reply.response_metadata),
        chunk_position="last",
    ))
