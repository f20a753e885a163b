"""The settings: every JOURNAL_BRIDGE_* variable read in one place, invalid ones named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from journal_bridge.mapping.capture_setting import CaptureSetting
from journal_bridge.settings import ENV, Settings, SettingsError

README = Path(__file__).resolve().parents[2] / "README.md"


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
