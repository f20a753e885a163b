"""What the plugin needs to know about the LangGraph Server it runs in.

Everything that depends on the server's version or runtime is read here, from
the server's own definitions where it publishes them, so other modules do not
guess. Supported: langgraph-api 0.10 through 0.16 (`SUPPORTED_API`) on the
in-memory runtime of `langgraph dev` (langgraph-runtime-inmem 0.30 through
0.36) or on a runtime that keeps its state elsewhere, such as
langgraph-runtime-pg (`LANGGRAPH_RUNTIME_EDITION=pg`). `check_server` refuses
anything else when the plugin is loaded.

What the plugin does with these facts has modules of its own: the in-process
client (`in_process`), the runtime's reads (`runtime_reads`), the lifespan
middleware (`lifespan`) and the log filter for the plugin's requests
(`request_log`).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any
from urllib.parse import quote

import orjson

from journal_bridge.model.errors import UnsupportedServer

__all__ = [
    "JOIN_POLL_SECONDS",
    "SUPPORTED_API",
    "SUPPORTED_INMEM",
    "UnsupportedServer",
    "assistant_uuid",
    "cancel_reason",
    "check_server",
    "extend_served_openapi",
    "frame_mode",
    "is_cancel_part",
    "inmem_frame_stores",
    "join_mode_matches",
    "join_params",
    "join_query_modes",
    "join_query_with_modes",
    "joins_take_subgraph_events",
    "max_request_body_bytes",
    "protocol_v2_stream_modes",
    "run_stream_modes",
    "runtime_edition",
]

# What moved to modules of its own beside this one, still importable from here.
_MOVED = {
    "LifespanFirstMiddleware": "journal_bridge.host.lifespan",
    "InProcessClient": "journal_bridge.host.in_process",
    "in_process_client": "journal_bridge.host.in_process",
    "RuntimeUnreadable": "journal_bridge.host.runtime_reads",
    "runtime_run_list": "journal_bridge.host.runtime_reads",
    "runtime_run_status": "journal_bridge.host.runtime_reads",
    "runtime_thread_search": "journal_bridge.host.runtime_reads",
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# (lowest, first unsupported) minor release of each package.
SUPPORTED_API = ((0, 10), (0, 17))
SUPPORTED_INMEM = ((0, 30), (0, 37))
_EDITION_ENV = "LANGGRAPH_RUNTIME_EDITION"


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "0")
    except (IndexError, ValueError):
        return None


def _range_text(bounds: tuple[tuple[int, int], tuple[int, int]]) -> str:
    (lo_major, lo_minor), (hi_major, hi_minor) = bounds
    return f">={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def runtime_edition() -> str:
    """The server's runtime: `inmem` (`langgraph dev`) unless the environment names another."""
    return os.environ.get(_EDITION_ENV, "").strip() or "inmem"


def check_server(
    versions: Mapping[str, str | None] | None = None, *, edition: str | None = None
) -> None:
    """Raise `UnsupportedServer`, saying what to install, unless the server is supported.

    `versions` maps distribution names to installed versions (default: read
    from the environment's package metadata).
    """
    lookup: Callable[[str], str | None] = (
        (lambda name: versions.get(name)) if versions is not None else _installed
    )
    edition = edition or runtime_edition()
    wanted = [("langgraph-api", SUPPORTED_API)]
    if edition == "inmem":
        wanted.append(("langgraph-runtime-inmem", SUPPORTED_INMEM))
    problems = []
    for name, bounds in wanted:
        found = lookup(name)
        minor = _minor(found) if found else None
        if minor is None or not bounds[0] <= minor < bounds[1]:
            problems.append(f"{name} {found or 'not installed'} (supported: {_range_text(bounds)})")
    if problems:
        pins = " ".join(f"'{name}{_range_text(bounds)}'" for name, bounds in wanted)
        raise UnsupportedServer(
            "journal-bridge cannot run in this LangGraph Server: "
            + "; ".join(problems)
            + f". Install supported versions (pip install {pins}) or set JOURNAL_BRIDGE_ENABLED=0."
        )

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


# What langgraph-api stores in place of the text of an exception it does not
# disclose. langgraph-api 0.10 and 0.11 disclose no cancel reason: the error a cancelled
# run leaves on its thread (`UserInterrupt`, `UserRollback`) always carries this
# placeholder; later releases store the reason itself ("interrupt requested via
# POST ...", "client disconnected from the run stream ..."). Read as text, so it
# holds for a remote server too (the SDK tee, the follower).
_UNDISCLOSED_ERROR_MESSAGE = "An internal error occurred"


# The errors a cancel raises in a run (`runs.cancel`, `on_disconnect="cancel"`,
# a rollback). langgraph-api 0.10 and 0.11 end a cancelled run's stream with an `error`
# part naming one of them; 0.16 just ends the stream.
_CANCEL_ERROR_TYPES = frozenset({"UserInterrupt", "UserRollback"})


def is_cancel_part(data: Any) -> bool:
    """Whether an `error` part says the run was cancelled, not that it failed."""
    return isinstance(data, Mapping) and data.get("error") in _CANCEL_ERROR_TYPES


def cancel_reason(error: Mapping[str, Any] | None) -> str | None:
    """The reason for a cancel that a thread's `error` gives; None when the server kept none."""
    message = (error or {}).get("message")
    if not isinstance(message, str) or not message or message == _UNDISCLOSED_ERROR_MESSAGE:
        return None
    return message


def max_request_body_bytes() -> int:
    """The largest request body the server reads (its 413 limit)."""
    try:
        from langgraph_api import config

        return int(config.HTTP_MAX_REQUEST_BODY_BYTES)
    except Exception:  # noqa: BLE001 - not inside a server
        return 300 * 1024 * 1024


def assistant_uuid(assistant_id: str) -> str:
    """The assistant a run request names: a graph id stands for that graph's default assistant."""
    try:
        from langgraph_api.graph import get_assistant_id

        return str(get_assistant_id(assistant_id))
    except Exception:  # noqa: BLE001 - not inside a server
        return assistant_id


def join_params(modes: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Query parameters that make a run-stream join read all of `modes`.

    The SDK sends a list as a repeated `stream_mode` parameter, of which the
    server (langgraph-api 0.16) reads only the last; it also reads a JSON array.
    """
    return {"stream_mode": orjson.dumps(list(modes)).decode()}


def join_query_modes(query_string: bytes) -> list[str] | None:
    """The modes a run-stream join with this query reads, as the server reads them;
    None when that reading gives anything but mode names.

    langgraph-api 0.10-0.16 read the last `stream_mode` parameter with
    `parse_stream_mode_param`: empty or absent, every mode; a JSON array, its
    items; anything else, that one mode.
    """
    from starlette.datastructures import QueryParams

    value = QueryParams(query_string).get("stream_mode")
    if not value:
        return []
    modes: Any = [value]
    if value.startswith("["):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            modes = parsed
    if not all(isinstance(m, str) for m in modes):
        return None
    return modes


def join_query_with_modes(query_string: bytes, modes: list[str]) -> bytes:
    """The query with its `stream_mode` parameters replaced by one JSON array of `modes`;
    every other parameter as it was."""
    kept = [pair for pair in query_string.split(b"&") if pair and pair.split(b"=", 1)[0] != b"stream_mode"]
    kept.append(b"stream_mode=" + quote(orjson.dumps(modes).decode(), safe="").encode())
    return b"&".join(kept)


def join_mode_matches(event: str, modes: list[str] | tuple[str, ...]) -> bool:
    """Whether a run-stream join for `modes` sends a frame of `event` (`values`,
    `messages/partial`, `updates|sub:1`, ...): the filter of the runs' joins
    (none: every frame; `messages` and `messages-tuple` take every `messages*`
    event; a subgraph's event goes with its mode where the runtime's joins
    take subgraph events, `joins_take_subgraph_events`)."""
    if not modes or event in modes:
        return True
    if ("messages" in modes or "messages-tuple" in modes) and event.startswith("messages"):
        return True
    base, bar, _ = event.partition("|")
    return bool(bar) and base in modes and joins_take_subgraph_events()


JOIN_POLL_SECONDS = 0.5
"""How long a runtime's run join waits for a frame before it asks whether the run
is over, and ends if it is (langgraph-runtime-inmem 0.30-0.36, langgraph-runtime-pg 0.11)."""

# The first langgraph-runtime-inmem whose joins send a subgraph's event
# (`updates|sub:1`) with its mode (`updates`).
_INMEM_SUBGRAPH_JOINS = (0, 31)


def joins_take_subgraph_events(edition: str | None = None, inmem: str | None = None) -> bool:
    """Whether a run-stream join for named modes sends a subgraph's events of those modes.

    langgraph-runtime-inmem 0.31-0.36 and langgraph-runtime-pg do; 0.30
    (langgraph-api 0.10) sends only the events named exactly (and `messages*`
    for `messages`), so a join for `updates` gets no `updates|sub:1`. `edition`
    and `inmem` (the installed langgraph-runtime-inmem) default to this
    environment's.
    """
    if (edition or runtime_edition()) != "inmem":
        return True
    minor = _minor(inmem or _installed_inmem() or "")
    return minor is None or minor >= _INMEM_SUBGRAPH_JOINS


@functools.cache
def _installed_inmem() -> str | None:
    return _installed("langgraph-runtime-inmem")


def inmem_frame_stores() -> dict[Any, dict[Any, list[Any]]] | None:
    """The in-memory runtime's resumable frames, by thread and run; None on other runtimes.

    langgraph-runtime-inmem 0.30-0.36 keep them in the stream manager's
    `message_stores`, untrimmed for the life of the process. Other runtimes
    (Redis streams of langgraph-runtime-pg) expire frames themselves.
    """
    if runtime_edition() != "inmem":
        return None
    module = sys.modules.get("langgraph_runtime_inmem.inmem_stream")
    if module is None:
        return None
    return getattr(module.get_stream_manager(), "message_stores", None)


def frame_mode(message: Any) -> str | None:
    """The stream mode of one retained frame (`values`, `events`, ...), None if undecodable."""
    from langgraph_api.utils.stream_codec import decode_stream_message

    try:
        decoded = decode_stream_message(message.data, channel=message.topic)
    except Exception:  # noqa: BLE001 - an undecodable frame is kept
        return None
    return decoded.event_bytes.decode("utf-8", "replace").split("|", 1)[0]


def extend_served_openapi(extend: Callable[[dict[str, Any]], Any]) -> bool:
    """Let `extend` add to the OpenAPI document the server built from the app's routes.

    langgraph-api builds that document (`CUSTOM_OPENAPI_SPEC`, from the routes'
    docstrings, which can only describe operations) when it loads the app, and
    merges it into `/openapi.json`, cached on first use. False, and nothing
    changed, where the server keeps no such document (or the app runs elsewhere).
    """
    # Only where the server loaded it: importing it elsewhere reads a server's config.
    # (By its full name: the package `langgraph_api.api` has a route function `openapi` too.)
    served = sys.modules.get("langgraph_api.api.openapi")
    spec = getattr(served, "CUSTOM_OPENAPI_SPEC", None)
    if not isinstance(spec, dict):
        return False
    extend(spec)
    cache_clear = getattr(getattr(served, "get_openapi_spec", None), "cache_clear", None)
    if callable(cache_clear):
        cache_clear()
    return True
