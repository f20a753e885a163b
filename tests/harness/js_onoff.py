"""What a client receives from `langgraph dev` with and without the plugin, side by side.

The JavaScript scenarios live in `tests/harness/js/scenarios.mjs` and run with the npm
package `@langchain/langgraph-sdk` (the SDK `useStream` is built on), installed
into `tests/js/node_modules` by `npm ci` from the committed lock file. The raw
HTTP probes below send what no SDK would (odd `stream_mode` values, BOMs,
UTF-16, deep nesting, a `Last-Event-ID` of -1) and record status, headers and
body.

A transcript is compared after `normalize`, which replaces only what differs
from one server run to the next by construction: generated ids (UUIDs, which
also covers `lc_run--<uuid>` message ids, checkpoint ids and run ids), SSE
event ids (`<milliseconds>-<n>`), times and the server's port. Message
content, ordering, frame counts, modes and status codes are compared as they
are.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

JS_DIR = Path(__file__).resolve().parent / "js"
SCENARIO_SCRIPT = JS_DIR / "scenarios.mjs"

# Kept in step with `node scenarios.mjs --list` (the test checks it).
JS_SCENARIOS = [
    "stream-values",
    "stream-updates",
    "stream-messages-tuple",
    "stream-values-messages-custom",
    "stream-usestream-submit",
    "stream-usestream-resumable-rejoin",
    "stream-debug",
    "stream-tasks",
    "stream-custom",
    "stream-subgraphs",
    "runs-wait",
    "runs-create-join",
    "runs-create-joinstream-live",
    "runs-create-joinstream-replay",
    "runs-get-list",
    "stateless-stream",
    "runs-create-batch",
    "invalid-stream-mode",
    "nul-thread-runs",
    "nul-stateless-runs",
    "threads-stream-v2",
]


# --- node and the npm package ---------------------------------------------------


def node_problem() -> str | None:
    """Why the JavaScript client cannot run here, or None when it can."""
    node = shutil.which("node")
    if node is None:
        return "node is not installed (Debian: apt-get install nodejs npm)"
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    match = re.match(r"v(\d+)", version)
    if not match or int(match.group(1)) < 20:
        return f"node {version or '?'} is too old: the SDK and its dependencies need 20 or newer"
    if not (JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk").is_dir() and shutil.which("npm") is None:
        return "npm is not installed and tests/js/node_modules is missing"
    return None


def ensure_node_modules() -> None:
    """`npm ci` in tests/harness/js when the package is missing (a fresh clone)."""
    if (JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk" / "package.json").is_file():
        return
    result = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"npm ci failed in {JS_DIR}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")


def listed_scenarios() -> list[str]:
    result = subprocess.run(
        ["node", str(SCENARIO_SCRIPT), "--list"], cwd=JS_DIR, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.split()


def run_js_scenario(url: str, name: str, *, timeout: float = 180.0) -> dict[str, Any]:
    """The transcript of one scenario; a crashed script becomes a transcript of its failure."""
    started = time.monotonic()
    try:
        result = subprocess.run(
            ["node", str(SCENARIO_SCRIPT), url, name],
            cwd=JS_DIR,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"scenario": name, "script_failed": f"timed out after {timeout:.0f} s"}
    if result.returncode != 0:
        return {"scenario": name, "script_failed": f"exit {result.returncode}", "stderr": result.stderr[-4000:]}
    transcript = json.loads(result.stdout)
    transcript["_seconds"] = round(time.monotonic() - started, 1)
    return transcript


# --- raw HTTP probes --------------------------------------------------------------


def _sse_frames(text: str) -> list[dict[str, Any]]:
    """An SSE body as frames: every field line kept, `data` parsed as JSON.

    Comment frames (heartbeats) are left out: when they come is a matter of
    timing. The line separators are checked to be CRLF throughout.
    """
    frames = []
    for block in re.split(r"\r\n\r\n", text):
        lines = [line for line in block.split("\r\n") if line and not line.startswith(":")]
        if not lines:
            continue
        frame: dict[str, Any] = {}
        for line in lines:
            field, _, value = line.partition(": ")
            if field == "data":
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            if field in frame:  # a repeated field keeps every value
                previous = frame[field]
                frame[field] = [*(previous if isinstance(previous, list) else [previous]), value]
            else:
                frame[field] = value
        frames.append(frame)
    return frames


def _describe_response(response: httpx.Response, body: bytes) -> dict[str, Any]:
    described: dict[str, Any] = {
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
    }
    for header in ("location", "content-location"):
        if header in response.headers:
            described[header] = response.headers[header]
    text = body.decode("utf-8", errors="replace")
    if (described["content_type"] or "").startswith("text/event-stream"):
        described["frames"] = _sse_frames(text)
        described["bare_lf"] = bool(re.search(r"(?<!\r)\n", text))
    else:
        try:
            described["body"] = json.loads(text)
        except ValueError:
            described["body"] = text
    return described


async def _send(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    """Status and body of one request; a dropped connection is an answer too."""
    try:
        async with http.stream(method, path, **kwargs) as response:
            body = b"".join([chunk async for chunk in response.aiter_raw()])
    except httpx.TransportError as exc:
        return {"transport_error": type(exc).__name__}
    return _describe_response(response, body)


async def _thread(http: httpx.AsyncClient) -> str:
    return (await http.post("/threads", json={})).json()["thread_id"]


async def _idle(http: httpx.AsyncClient, thread_id: str) -> None:
    for _ in range(300):
        if (await http.get(f"/threads/{thread_id}")).json()["status"] != "busy":
            return
        await asyncio.sleep(0.1)


def _run_body(**extra: Any) -> dict[str, Any]:
    return {"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": "add 2 and 3"}]}, **extra}


async def _probe_stream_body(http: httpx.AsyncClient, body: Any = None, *, content: bytes | None = None) -> dict[str, Any]:
    """POST /threads/{id}/runs/stream, then the thread's state, on a fresh thread."""
    thread_id = await _thread(http)
    kwargs: dict[str, Any] = {"content": content, "headers": {"content-type": "application/json"}} if content is not None else {"json": body}
    response = await _send(http, "POST", f"/threads/{thread_id}/runs/stream", **kwargs)
    await _idle(http, thread_id)
    runs = (await http.get(f"/threads/{thread_id}/runs")).json()
    state = (await http.get(f"/threads/{thread_id}/state")).json()
    return {"response": response, "runs": runs, "state_values": state.get("values")}


async def _probe_join_last_event_minus_one(http: httpx.AsyncClient, *, pending: bool) -> dict[str, Any]:
    """GET .../runs/{id}/stream with Last-Event-ID: -1, on a run that ended or one waiting to start."""
    thread_id = await _thread(http)
    body = _run_body(**({"after_seconds": 1} if pending else {}))
    created = await http.post(f"/threads/{thread_id}/runs", json=body)
    run_id = created.json()["run_id"]
    if not pending:
        await http.get(f"/threads/{thread_id}/runs/{run_id}/join")
    joined = await _send(
        http, "GET", f"/threads/{thread_id}/runs/{run_id}/stream", headers={"Last-Event-ID": "-1"}
    )
    await _idle(http, thread_id)
    return {"create": _describe_response(created, created.content), "join_stream": joined}


def _deep(depth: int) -> bytes:
    return b'{"assistant_id": "agent", "input": {"messages": []}, "metadata": {"deep": ' + b"[" * depth + b"]" * depth + b"}}"


HTTP_PROBES: dict[str, Callable[[httpx.AsyncClient], Any]] = {
    "http-stream-mode-empty-string": lambda http: _probe_stream_body(http, _run_body(stream_mode="")),
    "http-stream-mode-null": lambda http: _probe_stream_body(http, _run_body(stream_mode=None)),
    "http-stream-resumable-0": lambda http: _probe_stream_body(http, _run_body(stream_mode="values", stream_resumable=0)),
    "http-stream-resumable-null": lambda http: _probe_stream_body(http, _run_body(stream_mode="values", stream_resumable=None)),
    "http-body-utf8-bom": lambda http: _probe_stream_body(
        http, content=b"\xef\xbb\xbf" + json.dumps(_run_body(stream_mode="values")).encode()
    ),
    "http-body-utf16": lambda http: _probe_stream_body(
        http, content=json.dumps(_run_body(stream_mode="values")).encode("utf-16")
    ),
    "http-body-3000-deep": lambda http: _probe_stream_body(http, content=_deep(3000)),
    "http-join-stream-last-event-id-minus-1-ended": lambda http: _probe_join_last_event_minus_one(http, pending=False),
    "http-join-stream-last-event-id-minus-1-pending": lambda http: _probe_join_last_event_minus_one(http, pending=True),
}


def run_http_probe(url: str, name: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            return {"scenario": name, "result": await HTTP_PROBES[name](http)}

    try:
        return asyncio.run(probe())
    except Exception as exc:  # noqa: BLE001 - the failure is part of the transcript
        return {"scenario": name, "probe_failed": f"{type(exc).__name__}: {exc}"}


# --- normalisation and comparison ----------------------------------------------------

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_EVENT_ID = re.compile(r"^\d{13}-\d+(?:\.\d+)?$")
_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_PORT = re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0):\d+")
# Epoch milliseconds under a key that names a time (`timestamp` of v2 events,
# `__request_start_time_ms__` of a run's configurable).
_TIME_KEY = re.compile(r"time|_at$", re.IGNORECASE)
# Keys that only the harness adds (wall time of a scenario).
_HARNESS_KEYS = {"_seconds"}


def normalize(transcript: Any) -> Any:
    """The transcript with generated ids, times and ports replaced by stable names.

    Each distinct UUID becomes `<id-N>` in order of first appearance (objects
    read in key order, which carries no meaning in JSON), so two transcripts
    compare equal exactly when the same ids are used in the same places and
    everything else is the same. An event id (`<milliseconds>-<n>` of an SSE
    frame, `<milliseconds>-<n>.<k>` of a v2 event) becomes `<event-id>`: it is
    the time the server stored the frame, and frames stored in the same
    millisecond share it (or get a `.<k>` suffix), with or without the plugin,
    so which ids repeat is a matter of timing.
    """
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0).lower(), f"<id-{len(names)}>")

    def text(value: str) -> str:
        if _EVENT_ID.match(value):
            return "<event-id>"
        value = _UUID.sub(rename, value)
        value = _ISO_TIME.sub("<time>", value)
        return _PORT.sub(r"\1:<port>", value)

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)) and key and _TIME_KEY.search(key) and 1e12 < value < 1e14:
            return "<time>"
        if isinstance(value, list):
            return [walk(item, key) for item in value]
        if isinstance(value, dict):
            return {walk(k): walk(v, k) for k, v in sorted(value.items()) if k not in _HARNESS_KEYS}
        return value

    return walk(transcript)


def render(transcript: Any) -> list[str]:
    return json.dumps(transcript, indent=1, sort_keys=True, ensure_ascii=False).splitlines()


def first_path(plain: Any, plugin: Any, path: str = "") -> str | None:
    """Where the two values first differ, as `steps[3].parts[1].data...`, or None."""
    if isinstance(plain, dict) and isinstance(plugin, dict):
        for key in sorted(set(plain) | set(plugin)):
            if key not in plain or key not in plugin:
                return f"{path}.{key} (only {'with' if key in plugin else 'without'} the plugin)"
            found = first_path(plain[key], plugin[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(plain, list) and isinstance(plugin, list):
        for index, (left, right) in enumerate(zip(plain, plugin)):
            found = first_path(left, right, f"{path}[{index}]")
            if found:
                return found
        return f"{path}[{min(len(plain), len(plugin))}]" if len(plain) != len(plugin) else None
    return None if plain == plugin else path or "."


def first_difference(plugin: Any, plain: Any, *, context: int = 3, limit: int = 80) -> str:
    """Where the normalised transcripts first differ, and their unified diff cut to `limit` lines.

    The line numbers are those of the `*.normalized.json` files the test writes.
    """
    where = first_path(plain, plugin)
    call = ""
    match = re.match(r"\.steps\[(\d+)\]", where or "")
    if match and isinstance(plain, dict):
        steps = plain.get("steps") or []
        index = int(match.group(1))
        if index < len(steps) and isinstance(steps[index], dict):
            call = f" (step {index}: {steps[index].get('call')})"
    header = [f"first difference at {where}{call}"]
    diff = list(
        difflib.unified_diff(render(plain), render(plugin), "without plugin", "with plugin", n=context, lineterm="")
    )
    if len(diff) > limit:
        diff = diff[:limit] + [f"... {len(diff) - limit} more diff lines"]
    return "\n".join(header + diff)
