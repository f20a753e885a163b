"""Stream modes: the one the journal reads, and what a `stream_mode` value asks for.

Shared by everything that decides which modes a run streams: the plugin's
middleware, the SDK tee and the follower.
"""

from __future__ import annotations


__all__ = ["ERROR_MODE", "EVENTS_MODE", "SERVER_DEFAULT_MODES", "mode_of", "requested_modes"]

EVENTS_MODE = "events"
"""`astream_events(version="v2")` output, the only stream that carries custom events."""

ERROR_MODE = "error"
"""A run's failure; a join gets it only when it names it."""

SERVER_DEFAULT_MODES = ("values",)


def requested_modes(value: object) -> list[str] | None:
    """The modes a `stream_mode` value asks for, or None if the server would reject it.

    An absent or empty value means the server's default, as the server reads it.
    """
    if value is None or value == [] or value == "":
        return list(SERVER_DEFAULT_MODES)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(m, str) for m in value):
        return list(value)
    return None


def mode_of(event: str | None) -> str | None:
    """The mode of an SSE event name (`messages|sub:1` -> `messages`)."""
    return event.split("|", 1)[0] if event else None
