"""Where the journal's routes are mounted: the default prefix and the form a prefix takes."""

from __future__ import annotations

__all__ = ["DEFAULT_ROUTE_PREFIX", "route_prefix"]

DEFAULT_ROUTE_PREFIX = "/journal"


def route_prefix(prefix: str) -> str:
    """`prefix` as routes are mounted under it: one leading slash, none trailing; "" for the root."""
    return "/" + prefix.strip("/") if prefix.strip("/") else ""
