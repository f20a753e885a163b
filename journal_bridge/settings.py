"""The journal's settings: every `JOURNAL_BRIDGE_*` variable, read in one place.

The edges -- the plugin's `create_app`, the CLI, the SDK tee, and the package's
`open_store()` -- call `Settings.from_env()` once and hand each component the
values it needs as arguments; nothing below them reads the environment. An
invalid value raises `SettingsError` naming the variable. The README's
settings table is the user-facing list of these variables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from journal_bridge.mapping.capture_setting import CaptureSetting
from journal_bridge.model.envelope import DEFAULT_MAX_CONTENT_BYTES
from journal_bridge.model.errors import SettingsError
from journal_bridge.web.prefix import DEFAULT_ROUTE_PREFIX, route_prefix

if TYPE_CHECKING:
    from journal_bridge.store import OpeningStore

__all__ = [
    "DEFAULT_ROUTE_PREFIX",
    "ENV",
    "Settings",
    "SettingsError",
    "default_store_url",
    "open_store",
    "route_prefix",
]

# (variable name, its text) -> value; raises SettingsError naming the variable.
Parser = Callable[[str, str], Any]


def _seconds(*, minimum: float, inclusive: bool) -> Parser:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{name} must be a number of seconds, got {raw!r}") from None
        if value < minimum or (value == minimum and not inclusive):
            raise SettingsError(f"{name} must be {'>=' if inclusive else '>'} {minimum:g}, got {raw!r}")
        return value

    return parse


def _enabled(name: str, raw: str) -> bool:
    return raw.lower() not in {"0", "false", "no", "off"}


def _flag(name: str, raw: str) -> bool:
    text = raw.lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise SettingsError(f"{name}={raw!r}: expected true or false")


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise SettingsError(f"{name} must be >= 1, got {value}")
    return value


def _text(name: str, raw: str) -> str:
    return raw


def _prefix(name: str, raw: str) -> str:
    return route_prefix(raw)


def _path(name: str, raw: str) -> Path:
    return Path(raw)


def _capture(name: str, raw: str) -> CaptureSetting:
    try:
        return CaptureSetting.parse(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: expected one of {', '.join(CaptureSetting)}") from None


# field -> (variable, parser of its stripped, non-empty text); empty or unset keeps the default.
ENV: dict[str, tuple[str, Parser]] = {
    "store_url": ("JOURNAL_BRIDGE_STORE_URL", _text),
    "enabled": ("JOURNAL_BRIDGE_ENABLED", _enabled),
    "capture": ("JOURNAL_BRIDGE_CAPTURE", _capture),
    "route_prefix": ("JOURNAL_BRIDGE_ROUTE_PREFIX", _prefix),
    "max_content_bytes": ("JOURNAL_BRIDGE_MAX_CONTENT_BYTES", _positive_int),
    "spool_dir": ("JOURNAL_BRIDGE_SPOOL_DIR", _path),
    "reconcile_interval": ("JOURNAL_BRIDGE_RECONCILE_INTERVAL", _seconds(minimum=0, inclusive=True)),
    "backlog_growing_after": ("JOURNAL_BRIDGE_BACKLOG_GROWING_AFTER", _seconds(minimum=0, inclusive=False)),
    "app_spec": ("JOURNAL_BRIDGE_APP", _text),
    "keep_deleted": ("JOURNAL_BRIDGE_KEEP_DELETED", _flag),
    "default_owner": ("JOURNAL_BRIDGE_DEFAULT_OWNER", _text),
    "frame_spool": ("JOURNAL_BRIDGE_FRAME_SPOOL", _flag),
}


def _read_variables(environ: Mapping[str, str], only: Iterable[str] | None) -> dict[str, Any]:
    """field -> parsed value of each variable of `ENV` set in `environ` (`only` those fields, if given).

    A variable unset or holding only whitespace is left out, so its field keeps its default.
    """
    wanted = set(ENV) if only is None else set(only)
    values: dict[str, Any] = {}
    for field, (name, parse) in ENV.items():
        raw = environ.get(name, "").strip()
        if field in wanted and raw:
            values[field] = parse(name, raw)
    return values


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
        return cls(**_read_variables(os.environ if environ is None else environ, only))

    @property
    def journal_url(self) -> str:
        """The store URL, the default SQLite file resolved against the working directory."""
        return self.store_url or f"sqlite:///{Path.cwd() / 'journal.db'}"

    @property
    def store_options(self) -> dict[str, Any]:
        """The options every store is opened with (`create_store(url, **options)`)."""
        return {"max_content_bytes": self.max_content_bytes}


# What `open_store` reads of the environment.
_STORE_FIELDS = ("store_url", "max_content_bytes")


def default_store_url() -> str:
    """Env `JOURNAL_BRIDGE_STORE_URL`, else a SQLite file `journal.db` in the cwd."""
    return Settings.from_env(only=_STORE_FIELDS).journal_url


def open_store(url: str | None = None, **options: Any) -> OpeningStore:
    """Open the store for `url`, as the plugin would: without `url`, the one
    `JOURNAL_BRIDGE_STORE_URL` names (`default_store_url()`); the content limit
    not given is `JOURNAL_BRIDGE_MAX_CONTENT_BYTES`.

    `async with open_store(url) as store:` closes it on exit; `store = await
    open_store(url)` leaves closing to the caller. `journal_bridge.store.open_store`
    is the same without reading the environment.
    """
    from journal_bridge import store  # the store package only where a store is opened

    settings = Settings.from_env(only=_STORE_FIELDS)
    return store.open_store(url or settings.journal_url, **{**settings.store_options, **options})
