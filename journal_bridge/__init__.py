"""journal-bridge: an append-only run journal for LangGraph Server.

Public names are imported lazily so that importing the package (for example
from a graph module loaded by the server) pulls in only what is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What a type checker sees of the names `__getattr__` imports on first use.
    from journal_bridge.model.envelope import RunEvent
    from journal_bridge.model.errors import JournalBridgeError
    from journal_bridge.settings import open_store
    from journal_bridge.store import RunEventStore
    from journal_bridge.tracking import TrackingSummarizationMiddleware

__version__ = "0.1.0"

_EXPORTS = {
    "TrackingSummarizationMiddleware": "journal_bridge.tracking",
    "open_store": "journal_bridge.settings",
    "RunEventStore": "journal_bridge.store",
    "RunEvent": "journal_bridge.model.envelope",
    "JournalBridgeError": "journal_bridge.model.errors",
}

__all__ = [
    "JournalBridgeError",
    "RunEvent",
    "RunEventStore",
    "TrackingSummarizationMiddleware",
    "__version__",
    "open_store",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'journal_bridge' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
