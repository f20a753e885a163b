"""Summarization settings of the bundled agent, per assistant.

An assistant (or a single run) sets them in `configurable`:

    {"summarization": {
        "enabled": true,
        "trigger": [{"type": "messages", "value": 8}],
        "keep": {"type": "messages", "value": 4}}}

`type` is one of `messages`, `tokens`, `fraction` (of the model profile's
`max_input_tokens`). Triggers are alternatives: the first that holds fires.
Every field is optional; a missing one falls back to the process defaults,
read from the environment:

- `JOURNAL_BRIDGE_SUMMARIZATION_ENABLED`: `true`/`false` (default true)
- `JOURNAL_BRIDGE_SUMMARIZATION_TRIGGER`: `type:value[,type:value...]`
  (default `messages:40`)
- `JOURNAL_BRIDGE_SUMMARIZATION_KEEP`: `type:value` (default `messages:10`)

Invalid settings raise `SettingsError` naming the field, for example
`summarization.trigger[0].type: expected one of messages, tokens, fraction, got 'foo'`,
which fails the run at its first step, before any model call. A top-level
key that is a near miss of `summarization` (`summarisation`) is refused the
same way rather than ignored.

`AgentSettings` describes the same settings as a schema: the bundled graph
declares it as its context schema, so `GET /assistants/{id}/schemas` (and
Studio's assistant form) show them, and Studio checks a form against it.
The server itself validates neither an assistant's config nor a run's
against a graph's schema (langgraph-api 0.16.7 checks only the generic
`Config` shape), so the run is where a misspelt setting is refused. Settings
given as `context` reach `configurable` too: the server mirrors one into the
other.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from typing_extensions import TypedDict

from langchain.chat_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from journal_bridge.tracking import TrackingSummarizationMiddleware

__all__ = [
    "CONFIG_KEY",
    "AgentSettings",
    "SummarizationSchema",
    "ENV_ENABLED",
    "ENV_KEEP",
    "ENV_TRIGGER",
    "AssistantSummarizationMiddleware",
    "SettingsError",
    "SummarizationSettings",
]

CONFIG_KEY = "summarization"
ENV_ENABLED = "JOURNAL_BRIDGE_SUMMARIZATION_ENABLED"
ENV_TRIGGER = "JOURNAL_BRIDGE_SUMMARIZATION_TRIGGER"
ENV_KEEP = "JOURNAL_BRIDGE_SUMMARIZATION_KEEP"

KINDS = ("messages", "tokens", "fraction")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

ContextSize = tuple[str, int | float]


class SettingsError(ValueError):
    """Invalid summarization settings; the message starts with the field's path."""


class ContextSizeSchema(TypedDict):
    """An amount of context: a number of messages or tokens, or a fraction of the model's input limit."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    type: Annotated[Literal["messages", "tokens", "fraction"], Field(description="what `value` counts")]
    value: Annotated[
        float,
        Field(gt=0, description="a positive whole number for messages and tokens; in (0, 1] for fraction"),
    ]


class SummarizationSchema(TypedDict, total=False):
    """When the agent condenses its conversation; a missing field keeps the server's default."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    enabled: Annotated[bool, Field(description="condense at all (default: JOURNAL_BRIDGE_SUMMARIZATION_ENABLED, true)")]
    trigger: Annotated[
        list[ContextSizeSchema],
        Field(min_length=1, description="condense when any of these holds (default: messages 40)"),
    ]
    keep: Annotated[ContextSizeSchema, Field(description="how much recent context stays verbatim (default: messages 10)")]


class AgentSettings(TypedDict, total=False):
    """Settings of the bundled agent, per assistant or per run."""

    summarization: SummarizationSchema


@dataclass(frozen=True)
class SummarizationSettings:
    """When to compact (any `trigger` holds) and how much recent history to `keep`."""

    enabled: bool = True
    trigger: tuple[ContextSize, ...] = (("messages", 40),)
    keep: ContextSize = ("messages", 10)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SummarizationSettings:
        """Process defaults: the environment over the built-in defaults."""
        environ = os.environ if environ is None else environ
        settings = cls()
        if raw := environ.get(ENV_ENABLED, "").strip():
            settings = replace(settings, enabled=_parse_env_bool(raw, ENV_ENABLED))
        if raw := environ.get(ENV_TRIGGER, "").strip():
            items = [item.strip() for item in raw.split(",")]
            settings = replace(
                settings,
                trigger=tuple(
                    _parse_env_size(item, f"{ENV_TRIGGER}[{i}]") for i, item in enumerate(items)
                ),
            )
        if raw := environ.get(ENV_KEEP, "").strip():
            settings = replace(settings, keep=_parse_env_size(raw, ENV_KEEP))
        return settings

    def override(self, raw: Any, path: str = CONFIG_KEY) -> SummarizationSettings:
        """These settings with the fields present in `raw` (the `configurable` value)."""
        if raw is None:
            return self
        if not isinstance(raw, Mapping):
            raise SettingsError(f"{path}: expected an object, got {raw!r}")
        unknown = sorted(set(raw) - {"enabled", "trigger", "keep"})
        if unknown:
            raise SettingsError(
                f"{path}.{unknown[0]}: unknown setting, expected enabled, trigger or keep"
            )
        settings = self
        if "enabled" in raw:
            enabled = raw["enabled"]
            if not isinstance(enabled, bool):
                raise SettingsError(f"{path}.enabled: expected true or false, got {enabled!r}")
            settings = replace(settings, enabled=enabled)
        if "trigger" in raw:
            trigger = raw["trigger"]
            if isinstance(trigger, Mapping):
                trigger = [trigger]
            if not isinstance(trigger, list) or not trigger:
                raise SettingsError(
                    f"{path}.trigger: expected a non-empty list of {{type, value}} objects, "
                    f"got {trigger!r}"
                )
            settings = replace(
                settings,
                trigger=tuple(
                    _parse_size(item, f"{path}.trigger[{i}]") for i, item in enumerate(trigger)
                ),
            )
        if "keep" in raw:
            settings = replace(settings, keep=_parse_size(raw["keep"], f"{path}.keep"))
        return settings

    def fields(self, path: str = CONFIG_KEY) -> list[tuple[str, ContextSize]]:
        """Each size with the path that names it in error messages."""
        sizes = [(f"{path}.trigger[{i}]", size) for i, size in enumerate(self.trigger)]
        return [*sizes, (f"{path}.keep", self.keep)]


class AssistantSummarizationMiddleware(TrackingSummarizationMiddleware):
    """Tracking summarization whose settings come from each run's `configurable`.

    Built once with the process defaults; at each call the `summarization`
    settings of the run's config (assistant config merged with run config by
    the server) are validated and applied to a per-call copy, so one compiled
    graph serves every assistant.
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        settings: SummarizationSettings | None = None,
        **kwargs: Any,
    ) -> None:
        self.settings = settings if settings is not None else SummarizationSettings.from_env()
        super().__init__(
            model, trigger=list(self.settings.trigger), keep=self.settings.keep, **kwargs
        )

    def _for_call(self, config: RunnableConfig) -> TrackingSummarizationMiddleware | None:
        configurable = config.get("configurable") or {}
        _refuse_near_misses(configurable)
        settings = self.settings.override(configurable.get(CONFIG_KEY))
        if not settings.enabled:
            return None
        if settings == self.settings:
            return super()._for_call(config)
        if self._get_profile_limits() is None:
            for path, (kind, _) in settings.fields():
                if kind == "fraction":
                    raise SettingsError(
                        f"{path}.type: 'fraction' needs the model profile's "
                        "max_input_tokens, which this model does not declare"
                    )
        return self._with_settings(list(settings.trigger), settings.keep)


def _refuse_near_misses(configurable: Mapping[str, Any]) -> None:
    """A key that is almost `summarization` is a typo, not another setting: say so."""
    for key in configurable:
        if key == CONFIG_KEY or not isinstance(key, str) or key.startswith("__"):
            continue
        if difflib.get_close_matches(key.lower(), [CONFIG_KEY], n=1, cutoff=0.8):
            raise SettingsError(f"{key}: unknown setting; did you mean {CONFIG_KEY}?")


def _parse_size(raw: Any, path: str) -> ContextSize:
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{path}: expected an object with type and value, got {raw!r}")
    unknown = sorted(set(raw) - {"type", "value"})
    if unknown:
        raise SettingsError(f"{path}.{unknown[0]}: unknown field, expected type and value")
    if "type" not in raw:
        raise SettingsError(f"{path}.type: missing, expected one of {', '.join(KINDS)}")
    if "value" not in raw:
        raise SettingsError(f"{path}.value: missing")
    kind = raw["type"]
    if kind not in KINDS:
        raise SettingsError(f"{path}.type: expected one of {', '.join(KINDS)}, got {kind!r}")
    return kind, _check_value(kind, raw["value"], f"{path}.value")


def _check_value(kind: str, value: Any, path: str) -> int | float:
    # bool is an int: reject it so `true` cannot become a threshold of 1.
    if kind == "fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise SettingsError(
                f"{path}: expected a number in (0, 1] for 'fraction', got {value!r}"
            )
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SettingsError(f"{path}: expected a positive integer for {kind!r}, got {value!r}")
    return value


def _parse_env_size(raw: str, path: str) -> ContextSize:
    kind, sep, value = raw.partition(":")
    kind, value = kind.strip(), value.strip()
    if not sep:
        raise SettingsError(f"{path}: expected type:value (e.g. messages:40), got {raw!r}")
    if kind not in KINDS:
        raise SettingsError(f"{path}: expected one of {', '.join(KINDS)}, got {kind!r}")
    try:
        number: int | float = float(value) if kind == "fraction" else int(value)
    except ValueError:
        raise SettingsError(f"{path}: expected a number after {kind}:, got {value!r}") from None
    return kind, _check_value(kind, number, path)


def _parse_env_bool(raw: str, path: str) -> bool:
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise SettingsError(f"{path}: expected true or false, got {raw!r}")
