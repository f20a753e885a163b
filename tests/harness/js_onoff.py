"""What a client receives from `langgraph dev` with and without the plugin, side by side.

The JavaScript scenarios live in `tests/harness/js/scenarios.mjs` and run with the npm
package `@langchain/langgraph-sdk` (the SDK `useStream` is built on), installed
into `tests/harness/js/node_modules` by `npm ci` from the committed lock file. The raw
HTTP probes below send what no SDK would (odd `stream_mode` values, BOMs,
UTF-16, deep nesting, a `Last-Event-ID` of -1) and record status, headers and
body.

Transcripts are recorded as they came, here and in the .mjs scripts, and
compared after `tests.harness.transcripts.normalize`, which the Python
client's suite uses too.
"""

from __future__ import annotations

import asyncio
import fcntl
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
    "runs-create-joinstream-modes",
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
        return "npm is not installed and tests/harness/js/node_modules is missing"
    return None


def ensure_node_modules() -> None:
    """`npm ci` in tests/harness/js when the package is missing (a fresh clone); test
    processes running side by side take turns (a file lock), so only one installs."""
    installed = JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk" / "package.json"
    if installed.is_file():
        return
    with open(JS_DIR / ".npm-ci.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed.is_file():
            _npm_ci()


def _npm_ci() -> None:
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
