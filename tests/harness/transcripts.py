"""How the on/off suites compare what a client observed with the plugin and without it.

Both suites record transcripts as they came: the Python one (`tests.harness.onoff`)
in this process, the JavaScript one (`tests/harness/js/scenarios.mjs`, with the
raw HTTP probes of `tests.harness.js_onoff`) as JSON printed by node. Neither
replaces anything; `normalize` is the one place that does, for both.

It replaces only what differs from one server run to the next by construction,
and nothing else, so two normalised transcripts are equal exactly when the
client could not tell the servers apart:

- generated ids (UUIDs, which also covers `lc_run--<uuid>` message ids,
  checkpoint ids, run ids and paths holding them): each distinct one becomes
  `<id-N>` in order of first appearance, so the same ids must be used in the
  same places;
- SSE event ids (`<milliseconds>-<n>`, or `<milliseconds>-<n>.<k>` of a v2
  event): the time the server stored a frame; frames stored in the same
  millisecond share it, with or without the plugin, so which ids repeat is a
  matter of timing;
- times (ISO strings anywhere, epoch milliseconds under a key that names a
  time: `timestamp`, `__request_start_time_ms__`, `created_at`...) and the
  server's port;
- the token langchain draws at random once per process to mark its internal
  model calls (`lc_internal_call`);
- what only the harness adds: the wall time of a scenario (`_seconds`), and
  entries marked `_unseen` (an event stream the SDK dropped before anything
  arrived on it: the client saw nothing, and whether it happens is timing);
- the frames of an event stream the SDK dropped for a later one on the same
  path, which replays the run from its first event: how many arrived before
  the drop is timing (the later stream's frames are compared in full);
- the id of the tool message in an `on_tool_end` event's output: the tool
  returns it without one, the state's `add_messages` reducer gives it one in
  place, and the server serializes the event in a worker thread while the
  graph goes on, so whether the frame shows the id or null is timing (the
  same message's id is compared in full in every later frame).

Objects are read in key order, which carries no meaning in JSON (the server
does not keep the key order of run metadata from one frame to the next, with
or without the plugin). Content, ordering, frame counts, modes, statuses and
headers are compared as they are.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

__all__ = ["difference", "normalize", "render"]

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_EVENT_ID = re.compile(r"^\d{13}-\d+(?:\.\d+)?$")
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_PORT = re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0):\d+")
_TIME_KEY = re.compile(r"time|_at$", re.IGNORECASE)
_PROCESS_TOKEN_KEYS = {"lc_internal_call"}
_HARNESS_KEYS = {"_seconds"}
_UNSEEN = "_unseen"


_ABORTED = {"(read error)": "AbortError"}
_REDUCER_ID = "<id given by the reducer, or not yet>"
_REPLACED = "<dropped for a later stream>"


def _exchanges(value: Any) -> list[dict[str, Any]]:
    """The recorded HTTP exchanges of a transcript (dicts with a method and a path), in order."""
    if isinstance(value, dict):
        here = [value] if "method" in value and "path" in value else []
        return here + [found for item in value.values() for found in _exchanges(item)]
    if isinstance(value, list):
        return [found for item in value for found in _exchanges(item)]
    return []


def _forget_replaced(transcript: Any) -> Any:
    """`transcript` with the frames of every event stream the SDK dropped for a later stream
    on the same path put aside (a copy; the transcript given is left as it is)."""
    transcript = json.loads(json.dumps(transcript))
    exchanges = _exchanges(transcript)
    for index, exchange in enumerate(exchanges):
        frames = exchange.get("frames")
        dropped = exchange.get(_UNSEEN) is True or (isinstance(frames, list) and frames[-1:] == [_ABORTED])
        later = any((e["method"], e["path"]) == (exchange["method"], exchange["path"]) for e in exchanges[index + 1:])
        if dropped and later:
            exchange.pop(_UNSEEN, None)
            exchange["frames"] = _REPLACED
    return transcript


def _forget_reducer_ids(value: Any) -> None:
    """Put a mark in place of the (timing-dependent) tool message id of every
    `on_tool_end` event in `value`, in place."""
    if isinstance(value, dict):
        data = value.get("data")
        output = data.get("output") if value.get("event") == "on_tool_end" and isinstance(data, dict) else None
        if isinstance(output, dict) and output.get("type") == "tool" and "id" in output:
            output["id"] = _REDUCER_ID
        for item in value.values():
            _forget_reducer_ids(item)
    elif isinstance(value, list):
        for item in value:
            _forget_reducer_ids(item)


def normalize(transcript: Any) -> Any:
    """The transcript with generated ids, event ids, times, ports and process tokens replaced."""
    transcript = _forget_replaced(transcript)
    _forget_reducer_ids(transcript)
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<id-{len(names)}>")

    def text(value: str) -> str:
        if _EVENT_ID.match(value):
            return "<event-id>"
        value = _UUID.sub(rename, value)
        value = _ISO_TIME.sub("<time>", value)
        return _PORT.sub(r"\1:<port>", value)

    def walk(value: Any, key: str | None = None) -> Any:
        if key in _PROCESS_TOKEN_KEYS and value is not None:
            return "<process-token>"
        if isinstance(value, str):
            return text(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float) and key and _TIME_KEY.search(key) and 1e12 < value < 1e14:
            return "<time>"
        if isinstance(value, list | tuple):
            return [walk(item, key) for item in value if not (isinstance(item, dict) and item.get(_UNSEEN) is True)]
        if isinstance(value, dict):
            return {text(k): walk(v, k) for k, v in sorted(value.items()) if k not in _HARNESS_KEYS}
        return value

    return walk(transcript)


def render(transcript: Any) -> list[str]:
    return json.dumps(transcript, indent=1, sort_keys=True, ensure_ascii=False).splitlines()


def _first_path(plain: Any, plugin: Any, path: str = "") -> str | None:
    """Where two values first differ, as `.steps[3].parts[1].data...`, or None."""
    if isinstance(plain, dict) and isinstance(plugin, dict):
        for key in sorted(set(plain) | set(plugin)):
            if key not in plain or key not in plugin:
                return f"{path}.{key} (only {'with' if key in plugin else 'without'} the plugin)"
            found = _first_path(plain[key], plugin[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(plain, list) and isinstance(plugin, list):
        for index, (left, right) in enumerate(zip(plain, plugin)):
            found = _first_path(left, right, f"{path}[{index}]")
            if found:
                return found
        return f"{path}[{min(len(plain), len(plugin))}]" if len(plain) != len(plugin) else None
    return None if plain == plugin else path or "."


def _step_of(transcript: Any, where: str) -> str:
    """The call or request of the step a difference is in, when the path starts at a step."""
    match = re.match(r"(?:\.steps)?\[(\d+)\]", where)
    steps = transcript.get("steps") if isinstance(transcript, dict) else transcript
    if not match or not isinstance(steps, list) or int(match.group(1)) >= len(steps):
        return ""
    step = steps[int(match.group(1))]
    label = next((step[k] for k in ("call", "request") if isinstance(step, dict) and k in step), None)
    return f" (step {match.group(1)}: {label})" if label else ""


def difference(plain: Any, plugin: Any, *, context: int = 3, limit: int = 120) -> str | None:
    """None when the transcripts are equal once normalised; otherwise where they
    first differ and their unified diff, cut to `limit` lines (the line numbers
    are those of `render(normalize(...))`)."""
    expected, actual = normalize(plain), normalize(plugin)
    if expected == actual:
        return None
    where = _first_path(expected, actual) or "."
    header = [f"first difference at {where}{_step_of(expected, where)}"]
    diff = list(
        difflib.unified_diff(
            render(expected), render(actual), "without the plugin", "with the plugin", n=context, lineterm=""
        )
    )
    if len(diff) > limit:
        diff = diff[:limit] + [f"... {len(diff) - limit} more diff lines"]
    return "\n".join(header + diff)
