"""Every error journal-bridge defines derives from `JournalBridgeError`, so one `except` catches them all."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import journal_bridge
from journal_bridge import JournalBridgeError
from journal_bridge.host.compat import UnsupportedServer
from journal_bridge.model.envelope import InvalidEvent
from journal_bridge.settings import SettingsError
from journal_bridge.store import StoreError, StoreUnavailable


def _modules():
    yield journal_bridge
    for info in pkgutil.walk_packages(journal_bridge.__path__, "journal_bridge."):
        yield importlib.import_module(info.name)


def _defined_exceptions():
    for module in _modules():
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                yield value


def test_every_exception_the_package_defines_derives_from_the_one_base():
    defined = set(_defined_exceptions())
    assert {InvalidEvent, SettingsError, StoreError, StoreUnavailable, UnsupportedServer} <= defined
    assert [f"{e.__module__}.{e.__qualname__}" for e in defined if not issubclass(e, JournalBridgeError)] == []


def test_the_errors_keep_their_builtin_bases():
    assert issubclass(InvalidEvent, ValueError) and issubclass(SettingsError, ValueError)
    assert issubclass(UnsupportedServer, RuntimeError)
    assert issubclass(StoreUnavailable, StoreError)
