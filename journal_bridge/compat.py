"""What the plugin needs to know about the LangGraph Server it runs in.

Everything that depends on the server's version is read here, from the
server's own definitions where it publishes them, so other modules do not
guess.
"""

from __future__ import annotations

import functools

import orjson

__all__ = ["join_params", "max_request_body_bytes", "protocol_v2_stream_modes", "run_stream_modes"]

# langgraph-api 0.16's run schema, used when the running server publishes none.
_FALLBACK_STREAM_MODES = frozenset(
    {"values", "messages", "messages-tuple", "tasks", "checkpoints", "updates", "events", "debug", "custom"}
)


@functools.cache
def run_stream_modes() -> frozenset[str]:
    """The `stream_mode` values the server accepts when a run is created."""
    try:
        from langgraph_api.validation import openapi

        schema = openapi["components"]["schemas"]["RunCreateStateful"]["properties"]["stream_mode"]
        for option in schema.get("anyOf", []):
            if option.get("type") == "string" and option.get("enum"):
                return frozenset(option["enum"])
    except Exception:  # noqa: BLE001 - not inside a server, or another schema layout
        pass
    return _FALLBACK_STREAM_MODES


# langgraph-api 0.16's modes of every protocol v2 run, used when the server publishes none.
_FALLBACK_V2_MODES = ("values", "updates", "messages", "tools", "lifecycle", "custom", "tasks", "checkpoints")


@functools.cache
def protocol_v2_stream_modes() -> tuple[str, ...]:
    """The `stream_mode` the server gives every run created through protocol v2 (`run.start`)."""
    try:
        from langgraph_api.event_streaming.constants import DEFAULT_RUN_STREAM_MODES

        return tuple(DEFAULT_RUN_STREAM_MODES)
    except Exception:  # noqa: BLE001 - not inside a server, or an older one
        return _FALLBACK_V2_MODES


def max_request_body_bytes() -> int:
    """The largest request body the server reads (its 413 limit)."""
    try:
        from langgraph_api import config

        return int(config.HTTP_MAX_REQUEST_BODY_BYTES)
    except Exception:  # noqa: BLE001 - not inside a server
        return 300 * 1024 * 1024


def join_params(modes: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Query parameters that make a run-stream join read all of `modes`.

    The SDK sends a list as a repeated `stream_mode` parameter, of which the
    server (langgraph-api 0.16) reads only the last; it also reads a JSON array.
    """
    return {"stream_mode": orjson.dumps(list(modes)).decode()}
