"""The journal's settings: every `JOURNAL_BRIDGE_*` variable, read in one place.

The edges -- the plugin's `create_app`, the CLI, the SDK tee -- call
`Settings.from_env()` once and hand each component the values it needs as
arguments; nothing below them reads the environment, except `open_store()`
called without a URL, which reads its two rows of `ENV` itself. An invalid
value raises `SettingsError` naming the variable. The README's settings table
is the user-facing list of these variables.

This module sits at the top of the package, beside the other public modules:
the parsers, `SettingsError` and the defaults that the store package and the
routes need live below them in `journal_bridge.model.setting_values`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal_bridge.mapping.capture_setting import CaptureSetting
from journal_bridge.model import setting_values
from journal_bridge.model.envelope import DEFAULT_MAX_CONTENT_BYTES
from journal_bridge.model.setting_values import (
    DEFAULT_ROUTE_PREFIX,
    MAX_CONTENT_BYTES,
    STORE_URL,
    Parser,
    SettingsError,
    read_variables,
    route_prefix,
)

__all__ = ["DEFAULT_ROUTE_PREFIX", "ENV", "Settings", "SettingsError", "route_prefix"]


def _capture(name: str, raw: str) -> CaptureSetting:
    try:
        return CaptureSetting.parse(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected one of {', '.join(CaptureSetting)}") from None


# field -> (variable, parser of its stripped, non-empty text); empty or unset keeps the default.
ENV: dict[str, tuple[str, Parser]] = {
    "store_url": STORE_URL,
    "enabled": ("JOURNAL_BRIDGE_ENABLED", setting_values.enabled),
    "capture": ("JOURNAL_BRIDGE_CAPTURE", _capture),
    "route_prefix": ("JOURNAL_BRIDGE_ROUTE_PREFIX", setting_values.prefix),
    "max_content_bytes": MAX_CONTENT_BYTES,
    "spool_dir": ("JOURNAL_BRIDGE_SPOOL_DIR", setting_values.path),
    "reconcile_interval": ("JOURNAL_BRIDGE_RECONCILE_INTERVAL", setting_values.seconds(minimum=0, inclusive=True)),
    "backlog_growing_after": ("JOURNAL_BRIDGE_BACKLOG_GROWING_AFTER", setting_values.seconds(minimum=0, inclusive=False)),
    "app_spec": ("JOURNAL_BRIDGE_APP", setting_values.text),
    "keep_deleted": ("JOURNAL_BRIDGE_KEEP_DELETED", setting_values.flag),
    "default_owner": ("JOURNAL_BRIDGE_DEFAULT_OWNER", setting_values.text),
    "frame_spool": ("JOURNAL_BRIDGE_FRAME_SPOOL", setting_values.flag),
}


@dataclass(frozen=True)
class Settings:
    """What the journal is configured with; the defaults are the README's."""

    store_url: str | None = None  # None: `journal.db` in the working directory
    enabled: bool = True
    capture: CaptureSetting = CaptureSetting.AUTO
    route_prefix: str = DEFAULT_ROUTE_PREFIX
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    spool_dir: Path | None = None  # None: next to a SQLite store, else the working directory
    reconcile_interval: float = 3.0  # 0 turns the reconciler off
    backlog_growing_after: float = 60.0
    app_spec: str | None = None  # `module:attr` or `path/to/file.py:attr`: the app the plugin serves
    keep_deleted: bool = False  # True: a deleted thread's journal stays (audit, a store shared by servers)
    default_owner: str | None = None  # the owner of records of threads without `metadata.user_id`
    frame_spool: bool = False  # True: a streamed run's frames are spooled before its client gets them

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, only: Iterable[str] | None = None) -> Settings:
        """The settings the environment gives; `only` reads just those fields (the rest default)."""
        return cls(**read_variables(ENV, os.environ if environ is None else environ, only=only))

    @property
    def journal_url(self) -> str:
        """The store URL, the default SQLite file resolved against the working directory."""
        return setting_values.journal_url(self.store_url)

    @property
    def store_options(self) -> dict[str, Any]:
        """The options every store is opened with (`create_store(url, **options)`)."""
        return {"max_content_bytes": self.max_content_bytes}
