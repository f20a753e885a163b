"""Run-creating requests: what the journal adds to them, and how the run objects
the server returns are given back the client's own values.

A request is rewritten only when the plugin reads it exactly as the server
will: the body parses with the server's JSON parser, every `stream_mode` is one
the server accepts, `stream_resumable` is absent or a boolean, and the
rewritten body stays within the server's size limit. Anything else is
forwarded byte for byte, so the server answers it as it would without the
plugin (and a run it creates all the same is still journaled, from what the
client streams or by joining it).

What a rewrite adds: the capture's stream modes (`journal_bridge.mapping.capture_setting`),
appended after the client's, and `stream_resumable`, so the journal can read
the run from its first frame whenever it joins. The server stores and echoes
both in the run object (`kwargs.stream_mode`, `kwargs.resumable`);
`restore_run_objects` puts the client's values back.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from journal_bridge.mapping.capture_setting import Capture, CaptureSetting, plan_capture
from journal_bridge.host.compat import max_request_body_bytes, run_stream_modes

__all__ = ["RunPlan", "plan_run_request", "requested_checkpoint", "restore_run_objects", "run_creating_kind"]

_THREAD_RUNS = re.compile(r"^/threads/(?P<thread_id>[^/]+)/runs(?P<kind>/stream|/wait)?/?$")
_STATELESS_RUNS = re.compile(r"^/runs(?P<kind>/stream|/wait|/batch)?/?$")
_DEFAULT_MODES = ("values",)
_ESCAPED_REPLACEMENT = b"\\ufffd"
_RAW_REPLACEMENT = "\ufffd".encode()


@dataclass(frozen=True, slots=True)
class RunPlan:
    """One run of a request: what its client asked for and what the plugin added."""

    kind: str  # "stream" | "wait" | "create" | "batch"
    stateless: bool
    client_modes: tuple[str, ...]
    capture: Capture
    forced_resumable: bool
    assistant_id: Any = None
    run_input: Any = None
    # The checkpoint the run goes on from instead of the thread's head (a fork).
    checkpoint: dict[str, Any] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.capture.added) or self.forced_resumable

    @property
    def journal_modes(self) -> frozenset[str] | None:
        """The modes whose retained frames only the journal replays, when the run is
        `changed`: None for every mode of a run the plugin made resumable, the added
        modes otherwise (the client's own frames stay for its resumption)."""
        return None if self.forced_resumable else frozenset(self.capture.added)


def requested_checkpoint(payload: object) -> dict[str, object] | None:
    """The checkpoint a run or a state update goes on from, when its request names one."""
    if not isinstance(payload, Mapping):
        return None
    checkpoint = payload.get("checkpoint")
    if isinstance(checkpoint, Mapping) and isinstance(checkpoint.get("checkpoint_id"), str) and checkpoint["checkpoint_id"]:
        return dict(checkpoint)
    checkpoint_id = payload.get("checkpoint_id")
    if isinstance(checkpoint_id, str) and checkpoint_id:
        return {"checkpoint_id": checkpoint_id}
    return None


def run_creating_kind(method: str, path: str) -> tuple[str, bool] | None:
    """`(kind, stateless)` of a request that creates runs; None for any other."""
    if method != "POST":
        return None
    match = _THREAD_RUNS.match(path)
    stateless = match is None
    match = match or _STATELESS_RUNS.match(path)
    if match is None:
        return None
    # One string per kind, not one per run: the plugin keeps its recent runs' plans.
    return sys.intern((match.group("kind") or "").strip("/") or "create"), stateless


def _client_modes(payload: Mapping[str, object]) -> tuple[str, ...] | None:
    """The modes as the server will store them, or None if the plugin cannot be sure."""
    if "stream_mode" not in payload:
        return _DEFAULT_MODES
    value = payload["stream_mode"]
    valid = run_stream_modes()
    if isinstance(value, str):
        return _shared((value,)) if value in valid else None
    if isinstance(value, list) and all(isinstance(m, str) and m in valid for m in value):
        return _shared(tuple(value)) if value else _DEFAULT_MODES
    return None


@functools.lru_cache(maxsize=256)
def _shared(modes: tuple[str, ...]) -> tuple[str, ...]:
    """The first equal tuple seen: the plans of the plugin's recent runs share a few."""
    return modes


def _plan_one(payload: object, kind: str, stateless: bool, setting: CaptureSetting) -> RunPlan | None:
    if not isinstance(payload, dict):
        return None
    modes = _client_modes(payload)
    resumable = payload.get("stream_resumable", False)
    if modes is None or not isinstance(resumable, bool):
        return None
    capture = plan_capture(modes, setting)
    if capture.added:
        payload["stream_mode"] = [*modes, *capture.added]
    forced = not resumable
    if forced:
        payload["stream_resumable"] = True
    # A resume (`Command(resume=...)`) has a command instead of an input.
    run_input = payload["input"] if payload.get("input") is not None else payload.get("command")
    return RunPlan(
        kind, stateless, modes, capture, forced, payload.get("assistant_id"), run_input, requested_checkpoint(payload)
    )


def plan_run_request(
    method: str, path: str, body: bytes, setting: CaptureSetting
) -> tuple[list[RunPlan], bytes] | None:
    """One plan per run the request creates, and the body to forward; None to forward it untouched."""
    kind_of = run_creating_kind(method, path)
    if kind_of is None:
        return None
    kind, stateless = kind_of
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    items = payload if kind == "batch" else [payload]
    if not isinstance(items, list) or not items:
        return None
    plans = [_plan_one(item, kind, stateless, setting) for item in items]
    if any(plan is None for plan in plans):
        return None
    if not any(plan.changed for plan in plans):  # type: ignore[union-attr]
        return plans, body  # type: ignore[return-value]
    new_body = orjson.dumps(payload)
    if len(new_body) > max_request_body_bytes():
        return None
    return plans, new_body  # type: ignore[return-value]


def restore_run_objects(body: bytes, plans: Mapping[str, RunPlan]) -> bytes | None:
    """The body of a run object (or list of them) with the client's own
    `stream_mode` and `resumable` for the runs in `plans`; None to send it as is.

    Only a body the server's serialiser would have written the same way is
    rewritten, so nothing but those two fields can change.
    """
    # The server writes a NUL it replaced (U+FFFD) escaped, where orjson writes it raw.
    escaped = _ESCAPED_REPLACEMENT in body
    if escaped:
        if _RAW_REPLACEMENT in body:
            return None  # both forms: which was which cannot be told
        body = body.replace(_ESCAPED_REPLACEMENT, _RAW_REPLACEMENT)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if orjson.dumps(data) != body:
        return None
    changed = False
    for run in data if isinstance(data, list) else [data]:
        plan = plans.get(str(run.get("run_id"))) if isinstance(run, dict) else None
        kwargs = run.get("kwargs") if plan is not None else None
        if plan is None or not isinstance(kwargs, dict):
            continue
        added = list(plan.capture.added)
        modes = kwargs.get("stream_mode")
        if added and isinstance(modes, list) and modes[len(modes) - len(added) :] == added:
            kwargs["stream_mode"] = modes[: len(modes) - len(added)]
            changed = True
        if plan.forced_resumable and kwargs.get("resumable") is True:
            kwargs["resumable"] = False
            changed = True
    if not changed:
        return None
    out = orjson.dumps(data)
    return out.replace(_RAW_REPLACEMENT, _ESCAPED_REPLACEMENT) if escaped else out
