"""The settings: every JOURNAL_BRIDGE_* variable read in one place, invalid ones named."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import journal_bridge
from journal_bridge.mapping.capture_setting import CaptureSetting
from journal_bridge.settings import ENV, Settings, SettingsError

README = Path(__file__).resolve().parents[2] / "README.md"
PACKAGE = Path(journal_bridge.__file__).resolve().parent


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _environment_reads(path: Path) -> list[tuple[int, str | None]]:
    """(line, variable name or None when unknown) of each read of the environment in `path`:
    `environ.get(...)`, `environ[...]`, `getenv(...)`, or the environment handed whole to a call."""
    tree = ast.parse(path.read_text())
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def name(key: ast.AST | None) -> str | None:
        value = key.value if isinstance(key, ast.Constant) else constants.get(getattr(key, "id", ""))
        return value if isinstance(value, str) else None

    reads = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            if isinstance(node, ast.Subscript) and _is_environ(node.value):
                reads.append((node.lineno, name(node.slice)))
            continue
        func = node.func
        getenv = isinstance(func, ast.Attribute | ast.Name) and getattr(func, "attr", getattr(func, "id", "")) == "getenv"
        if getenv or (isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)):
            reads.append((node.lineno, name(node.args[0] if node.args else None)))
        reads += [(node.lineno, None) for arg in node.args if _is_environ(arg)]
    return reads


def _below_the_edge_reading_settings(package: Path) -> list[str]:
    return [
        f"{path.relative_to(package.parent)}:{line} reads {variable or 'the environment'}"
        for path in sorted(package.rglob("*.py"))
        if path.parent != package  # the public modules are the edge
        for line, variable in _environment_reads(path)
        if variable is None or variable.startswith("JOURNAL_BRIDGE_")
    ]


def test_no_module_below_the_public_ones_reads_a_setting():
    assert _below_the_edge_reading_settings(PACKAGE) == []


def test_the_check_sees_every_way_of_reading_a_variable(tmp_path):
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "low" / "a.py").write_text(
        "import os\n"
        "from os import environ, getenv\n"
        "NAME = 'JOURNAL_BRIDGE_X'\n"
        "os.environ.get(NAME)\n"
        "environ['JOURNAL_BRIDGE_Y']\n"
        "getenv('JOURNAL_BRIDGE_Z')\n"
        "parse(os.environ)\n"
        "os.environ.get('LANGGRAPH_AUTH')\n"
    )
    (package / "edge.py").write_text("import os\nos.environ.get('JOURNAL_BRIDGE_X')\n")
    assert _below_the_edge_reading_settings(package) == [
        "pkg/low/a.py:4 reads JOURNAL_BRIDGE_X",
        "pkg/low/a.py:5 reads JOURNAL_BRIDGE_Y",
        "pkg/low/a.py:6 reads JOURNAL_BRIDGE_Z",
        "pkg/low/a.py:7 reads the environment",
    ]


def test_unset_and_empty_variables_give_the_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env({name: "" for name, _ in ENV.values()})
    assert settings == Settings()
    assert settings.journal_url == f"sqlite:///{tmp_path / 'journal.db'}"
    assert (settings.route_prefix, settings.max_content_bytes) == ("/journal", 256 * 1024)
    assert (settings.reconcile_interval, settings.backlog_growing_after) == (3.0, 60.0)
    assert settings.enabled and settings.capture is CaptureSetting.AUTO and settings.spool_dir is None


def test_each_variable_sets_its_field():
    settings = Settings.from_env({
        "JOURNAL_BRIDGE_STORE_URL": "memory://",
        "JOURNAL_BRIDGE_ENABLED": "off",
        "JOURNAL_BRIDGE_CAPTURE": " Lean ",
        "JOURNAL_BRIDGE_ROUTE_PREFIX": "history/",
        "JOURNAL_BRIDGE_MAX_CONTENT_BYTES": "2048",
        "JOURNAL_BRIDGE_SPOOL_DIR": "/var/spool/journal",
        "JOURNAL_BRIDGE_RECONCILE_INTERVAL": "0",
        "JOURNAL_BRIDGE_BACKLOG_GROWING_AFTER": "0.5",
    })
    assert settings == Settings(
        store_url="memory://",
        enabled=False,
        capture=CaptureSetting.LEAN,
        route_prefix="/history",
        max_content_bytes=2048,
        spool_dir=Path("/var/spool/journal"),
        reconcile_interval=0.0,
        backlog_growing_after=0.5,
    )
    assert settings.journal_url == "memory://"
    assert settings.store_options == {"max_content_bytes": 2048}


def test_a_root_prefix_mounts_the_routes_at_the_root():
    assert Settings.from_env({"JOURNAL_BRIDGE_ROUTE_PREFIX": "/"}).route_prefix == ""


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("JOURNAL_BRIDGE_CAPTURE", "everything", "expected one of auto, events, lean"),
        ("JOURNAL_BRIDGE_MAX_CONTENT_BYTES", "lots", "must be an integer"),
        ("JOURNAL_BRIDGE_MAX_CONTENT_BYTES", "0", "must be >= 1"),
        ("JOURNAL_BRIDGE_RECONCILE_INTERVAL", "soon", "must be a number of seconds"),
        ("JOURNAL_BRIDGE_RECONCILE_INTERVAL", "-1", "must be >= 0"),
        ("JOURNAL_BRIDGE_BACKLOG_GROWING_AFTER", "0", "must be > 0"),
    ],
)
def test_an_invalid_value_is_refused_naming_its_variable(name, value, says):
    with pytest.raises(SettingsError, match=re.escape(name)) as refused:
        Settings.from_env({name: value})
    assert says in str(refused.value)


def test_only_reads_the_fields_asked_for():
    environ = {"JOURNAL_BRIDGE_ROUTE_PREFIX": "/h", "JOURNAL_BRIDGE_RECONCILE_INTERVAL": "soon"}
    assert Settings.from_env(environ, only=["route_prefix"]).route_prefix == "/h"


def test_the_readme_lists_every_variable():
    table = README.read_text().split("### Settings", 1)[1].split("\n\n### ", 1)[0]
    assert sorted(re.findall(r"^\| `(JOURNAL_BRIDGE_[A-Z_]+)`", table, re.MULTILINE)) == sorted(
        [name for name, _ in ENV.values()] + ["JOURNAL_BRIDGE_MODEL"]
    )
