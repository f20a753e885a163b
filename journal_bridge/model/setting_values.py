"""What a `JOURNAL_BRIDGE_*` variable's text means: its parsers, `SettingsError`, and the defaults lower layers need.

`journal_bridge.settings` is the public place of every variable (`Settings`,
`ENV`) and sits at the top of the package. The store package (`open_store()`
without a URL reads its URL and content limit) and the routes (the default
prefix) sit below it, so the parsing they share with it lives here, in the
lowest layer; `journal_bridge.settings` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from journal_bridge.model.errors import SettingsError

__all__ = [
    "DEFAULT_ROUTE_PREFIX",
    "MAX_CONTENT_BYTES",
    "STORE_URL",
    "Parser",
    "SettingsError",
    "journal_url",
    "read_variables",
    "route_prefix",
]

DEFAULT_ROUTE_PREFIX = "/journal"

# (variable name, its text) -> value; raises SettingsError naming the variable.
Parser = Callable[[str, str], Any]


def route_prefix(prefix: str) -> str:
    """`prefix` as routes are mounted under it: one leading slash, none trailing; "" for the root."""
    return "/" + prefix.strip("/") if prefix.strip("/") else ""


def journal_url(store_url: str | None) -> str:
    """The store URL, or the default: a SQLite file `journal.db` in the working directory."""
    return store_url or f"sqlite:///{Path.cwd() / 'journal.db'}"


def seconds(*, minimum: float, inclusive: bool) -> Parser:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{name} must be a number of seconds, got {raw!r}") from None
        if value < minimum or (value == minimum and not inclusive):
            raise SettingsError(f"{name} must be {'>=' if inclusive else '>'} {minimum:g}, got {raw!r}")
        return value

    return parse


def enabled(name: str, raw: str) -> bool:
    return raw.lower() not in {"0", "false", "no", "off"}


def flag(name: str, raw: str) -> bool:
    text = raw.lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise SettingsError(f"{name}={raw!r}: expected true or false")


def positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < 1:
        raise SettingsError(f"{name} must be >= 1, got {value}")
    return value


def text(name: str, raw: str) -> str:
    return raw


def prefix(name: str, raw: str) -> str:
    return route_prefix(raw)


def path(name: str, raw: str) -> Path:
    return Path(raw)


# The variables the store package reads itself, as rows of `journal_bridge.settings.ENV`.
STORE_URL: tuple[str, Parser] = ("JOURNAL_BRIDGE_STORE_URL", text)
MAX_CONTENT_BYTES: tuple[str, Parser] = ("JOURNAL_BRIDGE_MAX_CONTENT_BYTES", positive_int)


def read_variables(
    variables: Mapping[str, tuple[str, Parser]],
    environ: Mapping[str, str],
    *,
    only: Iterable[str] | None = None,
) -> dict[str, Any]:
    """field -> parsed value of each of `variables` set in `environ` (`only` those fields, if given).

    A variable unset or holding only whitespace is left out, so its field keeps its default.
    """
    wanted = set(variables) if only is None else set(only)
    values: dict[str, Any] = {}
    for field, (name, parse) in variables.items():
        raw = environ.get(name, "").strip()
        if field in wanted and raw:
            values[field] = parse(name, raw)
    return values
