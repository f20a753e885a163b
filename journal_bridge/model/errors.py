"""Every public error journal-bridge raises, defined here: `except JournalBridgeError` catches them all.

    JournalBridgeError
    ├── InvalidEvent (ValueError)          a record breaks the envelope contract
    ├── InvalidArgument (ValueError)       an argument is out of range or contradicts another
    ├── SettingsError (ValueError)         a JOURNAL_BRIDGE_* variable holds an unusable value
    ├── InvalidStoreUrl (ValueError)       a store URL names no backend, or one that cannot take it
    ├── MalformedPart (TypeError)          a stream part is not shaped as the server sends it
    ├── StoreError                         the store failed; retrying will not fix it
    │   └── StoreUnavailable               the store is unreachable for now; retry later
    ├── UnsupportedServer (RuntimeError)   the LangGraph Server is a version the plugin was not made for
    ├── RuntimeUnreadable (LookupError)    the server's runtime cannot be read in this process
    ├── RunNotFound (LookupError)          a run has no record in the thread's journal
    └── JournalAccessError                 the access check could not reach a decision

Each error keeps the built-in base it had, so `except ValueError` still catches
`InvalidEvent` and `SettingsError`. The modules that raise them re-export them
under their old names (`journal_bridge.store.StoreError`, ...).
"""

from __future__ import annotations

__all__ = [
    "InvalidArgument",
    "InvalidEvent",
    "InvalidStoreUrl",
    "JournalAccessError",
    "JournalBridgeError",
    "MalformedPart",
    "RunNotFound",
    "RuntimeUnreadable",
    "SettingsError",
    "StoreError",
    "StoreUnavailable",
    "UnsupportedServer",
]


class JournalBridgeError(Exception):
    """An error raised by journal-bridge."""


class InvalidEvent(JournalBridgeError, ValueError):
    """A record breaks the envelope contract; the message names the field."""


class InvalidArgument(JournalBridgeError, ValueError):
    """An argument of a call is out of range, or contradicts another; the message names it."""


class SettingsError(JournalBridgeError, ValueError):
    """A variable holds a value the journal cannot use; the message names it."""


class InvalidStoreUrl(JournalBridgeError, ValueError):
    """A store URL names no registered backend, or its backend cannot read it."""


class MalformedPart(JournalBridgeError, TypeError):
    """A stream part (or a custom event's payload) is not shaped as the server sends it."""


class StoreError(JournalBridgeError):
    """The store failed for a reason retrying will not fix."""


class StoreUnavailable(StoreError):
    """The backend is unreachable, locked or refused the connection; retry later."""


class UnsupportedServer(JournalBridgeError, RuntimeError):
    """The LangGraph Server around the plugin is a version it was not made for."""


class RuntimeUnreadable(JournalBridgeError, LookupError):
    """The runtime of a LangGraph server cannot be read in process here."""


class RunNotFound(JournalBridgeError, LookupError):
    """A run the caller named has no record in the thread's journal."""


class JournalAccessError(JournalBridgeError):
    """The access check could not reach a decision."""
