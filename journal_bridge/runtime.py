"""Releasing the frames a run kept only so the bridge could replay it.

Runs are made resumable so that the bridge sees them from the first frame.
The in-memory runtime of `langgraph dev` keeps every resumable frame of every
run for the life of the process; without a release, journaling would make the
server's memory grow with every run. Once the bridge has read a run to its
end, `release_run_frames` drops what the plugin added: all of the run's frames
when the client had not asked for a resumable run, otherwise only the frames
of the mode the plugin added. Runtimes that expire frames themselves (the
Redis-backed one of a deployment) need nothing, and this does nothing there.

This reaches into `langgraph_runtime_inmem`, whose version is pinned exactly.
"""

from __future__ import annotations

import logging
import sys
from uuid import UUID

logger = logging.getLogger(__name__)

__all__ = ["release_run_frames", "retained_frame_count"]

_STREAM_MODULE = "langgraph_runtime_inmem.inmem_stream"


def _stream_manager():
    module = sys.modules.get(_STREAM_MODULE)
    if module is None:
        return None
    return module.get_stream_manager()


def _uuid(value: str | UUID) -> UUID | str:
    try:
        return value if isinstance(value, UUID) else UUID(str(value))
    except ValueError:
        return value


def _mode_of(message) -> str | None:
    from langgraph_api.utils.stream_codec import decode_stream_message

    try:
        decoded = decode_stream_message(message.data, channel=message.topic)
    except Exception:  # noqa: BLE001 - an undecodable frame is kept
        return None
    return decoded.event_bytes.decode("utf-8", "replace").split("|", 1)[0]


def release_run_frames(thread_id: str, run_id: str, *, modes: frozenset[str] | None) -> int:
    """Drop a finished run's retained frames; returns how many were dropped.

    `modes=None` drops every frame of the run; a set of modes drops only those
    modes' frames and keeps the rest for the client's own resumption.
    """
    manager = _stream_manager()
    if manager is None:
        return 0
    key = _uuid(run_id)
    thread_key = _uuid(thread_id)
    per_thread = manager.message_stores.get(thread_key)
    if not per_thread or key not in per_thread:
        # A stateless run is journaled under its own id; its frames sit under its temporary thread.
        thread_key, per_thread = next(
            ((t, runs) for t, runs in list(manager.message_stores.items()) if key in runs), (thread_key, None)
        )
    if not per_thread:
        return 0
    frames = per_thread.get(key)
    if frames is None:
        return 0
    if modes is None:
        del per_thread[key]
        dropped = len(frames)
    else:
        kept = [m for m in frames if _mode_of(m) not in modes]
        dropped = len(frames) - len(kept)
        per_thread[key] = kept
    if not per_thread:
        manager.message_stores.pop(thread_key, None)
    return dropped


def retained_frame_count() -> int:
    """How many resumable frames the in-memory runtime holds (0 elsewhere)."""
    manager = _stream_manager()
    if manager is None:
        return 0
    return sum(len(frames) for runs in list(manager.message_stores.values()) for frames in list(runs.values()))
