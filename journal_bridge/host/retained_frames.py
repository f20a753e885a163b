"""The frames a run kept only so the bridge could replay it: released once it is read, and counted.

Runs are made resumable so that the bridge sees them from the first frame.
The in-memory runtime of `langgraph dev` keeps every resumable frame of every
run for the life of the process; without a release, journaling would make the
server's memory grow with every run. Once the bridge has read a run to its
end, `release_run_frames` drops what the plugin added: all of the run's frames
when the client had not asked for a resumable run, otherwise only the frames
of the mode the plugin added. Runtimes that expire frames themselves (the
Redis-backed one of a deployment) need nothing, and this does nothing there.

A run the bridge reads from its client's stream needs the frames only it
replays kept only until it holds them: were the client to leave, the bridge
joins again after the last frame it got. `frames_releaser` drops them as they
come, so the frames of a long run are not kept all together to its end: all
of them when the client had not asked for a resumable run, otherwise those of
the modes the plugin added (the client's own stay for its resumption).

How the in-memory runtime keeps frames is version-specific and read through
`journal_bridge.host.compat`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any
from uuid import UUID

from journal_bridge.host.compat import frame_mode, inmem_frame_stores

logger = logging.getLogger(__name__)

__all__ = ["RELEASE_EVERY", "frames_releaser", "release_run_frames", "retained_frame_count"]

# A streamed run's frames go once the journal holds this many more of them (and
# when its response ends): one release per few frames, not one per frame (a
# late turn streams hundreds of token frames). At most this many frames more
# are kept meanwhile.
RELEASE_EVERY = 16


def _uuid(value: str | UUID) -> UUID | str:
    try:
        return value if isinstance(value, UUID) else UUID(str(value))
    except ValueError:
        return value


def release_run_frames(thread_id: str, run_id: str, *, modes: frozenset[str] | None) -> int:
    """Drop a finished run's retained frames; returns how many were dropped.

    `modes=None` drops every frame of the run; a set of modes drops only those
    modes' frames and keeps the rest for the client's own resumption.
    """
    stores = inmem_frame_stores()
    if stores is None:
        return 0
    key = _uuid(run_id)
    thread_key = _uuid(thread_id)
    per_thread = stores.get(thread_key)
    if not per_thread or key not in per_thread:
        # A stateless run is journaled under its own id; its frames sit under its temporary thread.
        thread_key, per_thread = next(
            ((t, runs) for t, runs in list(stores.items()) if key in runs), (thread_key, None)
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
        kept = [m for m in frames if frame_mode(m) not in modes]
        dropped = len(frames) - len(kept)
        per_thread[key] = kept
    if not per_thread:
        stores.pop(thread_key, None)
    return dropped


def retained_frame_count() -> int:
    """How many resumable frames the in-memory runtime holds (0 elsewhere)."""
    stores = inmem_frame_stores()
    if stores is None:
        return 0
    return sum(len(frames) for runs in list(stores.values()) for frames in list(runs.values()))


def frames_releaser(
    thread_id: str, run_id: str, *, modes: frozenset[str] | None = None
) -> Callable[[str], int] | None:
    """For a running run whose frames only the bridge replays: a function that,
    given the id of a frame the bridge holds, drops the retained frames a join
    after that frame would not replay (those with ids up to it: the runtime
    gives frames of one millisecond the same id, and replays those above the
    one named), and returns how many it dropped. None when the runtime keeps
    no frames.

    `modes=None` drops every such frame; a set of modes drops only those
    modes' frames and keeps the rest, in order, for the client's resumption.
    Frames are dropped in place, so the runtime goes on appending to the same
    list; each frame is looked at once.
    """
    stores = inmem_frame_stores()
    if stores is None:
        return None
    thread_key, run_key = _uuid(thread_id), _uuid(run_id)
    # The list last released from, and how many of its first frames were kept
    # after a look: those are not looked at again.
    seen: list[Any] | None = None
    kept_ahead = 0

    def release(frame_id: str) -> int:
        nonlocal seen, kept_ahead
        per_thread = stores.get(thread_key)
        frames = per_thread.get(run_key) if per_thread is not None else None
        if not frames:
            return 0
        if frames is not seen or kept_ahead > len(frames):
            seen, kept_ahead = frames, 0
        held = frame_id.encode()
        end = kept_ahead
        for message in itertools.islice(frames, kept_ahead, None):
            ident = getattr(message, "id", None)
            if not isinstance(ident, bytes) or ident > held:
                break
            end += 1
        if modes is None:
            kept: list[Any] = []
        else:
            kept = [message for message in itertools.islice(frames, kept_ahead, end) if frame_mode(message) not in modes]
        dropped = end - kept_ahead - len(kept)
        frames[kept_ahead:end] = kept
        kept_ahead += len(kept)
        return dropped

    return release
