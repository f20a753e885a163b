"""The one base of every error journal-bridge raises: `except JournalBridgeError` catches them all.

    JournalBridgeError
    ├── InvalidEvent (ValueError)          a record breaks the envelope contract
    ├── SettingsError (ValueError)         a JOURNAL_BRIDGE_* variable holds an unusable value
    ├── StoreError                         the store failed; retrying will not fix it
    │   └── StoreUnavailable               the store is unreachable for now; retry later
    ├── UnsupportedServer (RuntimeError)   the LangGraph Server is a version the plugin was not made for
    └── JournalAccessError                 the access check could not reach a decision

Each error keeps the built-in base it had, so `except ValueError` still catches
`InvalidEvent` and `SettingsError`.
"""

from __future__ import annotations

__all__ = ["JournalBridgeError"]


class JournalBridgeError(Exception):
    """An error raised by journal-bridge."""
