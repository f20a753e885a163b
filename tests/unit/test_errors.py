"""Every error journal-bridge defines derives from `JournalBridgeError`, so one `except` catches them all;
the public ones are defined in `journal_bridge.model.errors`, whose docstring draws their tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import journal_bridge
from journal_bridge import JournalBridgeError
from journal_bridge.model import errors


def _modules():
    yield journal_bridge
    for info in pkgutil.walk_packages(journal_bridge.__path__, "journal_bridge."):
        yield importlib.import_module(info.name)


def _defined_exceptions():
    for module in _modules():
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                yield value


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _public_errors():
    list(_modules())  # every module imported: every subclass defined
    return {
        cls
        for cls in _subclasses(JournalBridgeError)
        if cls.__module__.startswith("journal_bridge.") and not cls.__name__.startswith("_")
    }


def _drawn_tree() -> dict[str, tuple[str, str | None]]:
    """name -> (its parent in the docstring's tree, the built-in base it names)."""
    drawn: dict[str, tuple[str, str | None]] = {}
    parents = ["JournalBridgeError"]
    for line in errors.__doc__.splitlines():
        found = re.match(r"^\s*((?:[│ ] {3})*)[├└]── (\w+)(?: \((\w+)\))?", line)
        if found is None:
            continue
        depth = len(found.group(1)) // 4
        name = found.group(2)
        drawn[name] = (parents[depth], found.group(3))
        del parents[depth + 1 :]
        parents.append(name)
    return drawn


def test_every_exception_the_package_defines_derives_from_the_one_base():
    defined = set(_defined_exceptions())
    assert _public_errors() <= defined
    assert [f"{e.__module__}.{e.__qualname__}" for e in defined if not issubclass(e, JournalBridgeError)] == []


def test_every_public_error_is_defined_in_the_errors_module():
    assert {f"{e.__module__}.{e.__qualname__}" for e in _public_errors()} == {
        f"journal_bridge.model.errors.{name}" for name in errors.__all__ if name != "JournalBridgeError"
    }


def test_the_docstring_draws_every_public_error_under_its_parent_with_its_builtin_base():
    drawn = _drawn_tree()
    assert set(drawn) == {e.__name__ for e in _public_errors()}
    for cls in _public_errors():
        parent, builtin = drawn[cls.__name__]
        bases = [b for b in cls.__bases__ if b.__module__ != "builtins"]
        assert [b.__name__ for b in bases] == [parent], cls
        builtins = [b.__name__ for b in cls.__bases__ if b.__module__ == "builtins"]
        assert builtins == ([builtin] if builtin else []), cls


def test_the_tree_reader_sees_nesting():
    assert _drawn_tree()["StoreUnavailable"] == ("StoreError", None)
    assert _drawn_tree()["SettingsError"] == ("JournalBridgeError", "ValueError")


@pytest.mark.parametrize(
    ("old_place", "name"),
    [
        ("journal_bridge.model.envelope", "InvalidEvent"),
        ("journal_bridge.settings", "SettingsError"),
        ("journal_bridge.store", "StoreError"),
        ("journal_bridge.store", "StoreUnavailable"),
        ("journal_bridge.store.base", "StoreError"),
        ("journal_bridge.host.compat", "UnsupportedServer"),
        ("journal_bridge.host.compat", "RuntimeUnreadable"),
        ("journal_bridge.host.runtime_reads", "RuntimeUnreadable"),
        ("journal_bridge.web.access", "JournalAccessError"),
    ],
)
def test_the_errors_are_still_importable_where_they_were(old_place, name):
    assert getattr(importlib.import_module(old_place), name) is getattr(errors, name)


def test_the_errors_keep_their_builtin_bases():
    assert issubclass(errors.InvalidEvent, ValueError) and issubclass(errors.SettingsError, ValueError)
    assert issubclass(errors.UnsupportedServer, RuntimeError)
    assert issubclass(errors.StoreUnavailable, errors.StoreError)
    assert issubclass(errors.RuntimeUnreadable, LookupError) and issubclass(errors.RunNotFound, LookupError)
    assert issubclass(errors.InvalidArgument, ValueError) and issubclass(errors.InvalidStoreUrl, ValueError)
    assert issubclass(errors.MalformedPart, TypeError)
