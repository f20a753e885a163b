"""Timestamps as the server and the journal hand them over: a datetime, or ISO-8601 text.

The server's JSON (thread and run listings, checkpoint states) and the journal's
records carry times as ISO-8601 text, an in-process store as datetimes. Readers
that only sort, compare or show a time take either and treat anything else as
unknown rather than failing.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

__all__ = ["parse_time"]


def parse_time(value: object) -> datetime | None:
    """A server timestamp (datetime or ISO-8601 text) as a datetime; None if it is neither."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    return None
