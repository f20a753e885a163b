"""How a run is captured: which stream modes the journal adds, and which mapper reads them.

The setting (`JOURNAL_BRIDGE_CAPTURE`, `journal_bridge.settings`) chooses:

- `auto` (default): a run whose client already streams tokens (`messages`,
  `messages-tuple` or `events`) is captured from `events` and `values` -- its
  model calls stream anyway, so adding `events` changes nothing about how they
  run; any other run from `values` + `custom`, which leave execution untouched;
- `events`: always from `events` and `values` (`events` is the only mode that carries custom events a
  middleware sends through `adispatch_custom_event` alone); every model call
  of every run is then streamed instead of invoked;
- `lean`: never `events`.

Both paths read the conversation from `values` -- what the run committed to
the thread's messages -- and yield the same message, marker and outputs
records (see `journal_bridge.model.records`); `events` adds the calls that
never reached the conversation, as hidden records.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from dataclasses import dataclass

from journal_bridge.host.modes import EVENTS_MODE
from journal_bridge.model.errors import InvalidArgument

__all__ = [
    "EVENTS_PATH_MODES",
    "TOKEN_MODES",
    "Capture",
    "CaptureSetting",
    "plan_capture",
]

# Modes under which the server already streams every model call.
TOKEN_MODES = frozenset({"messages", "messages-tuple", EVENTS_MODE})

_STATE_MODES = ("values", "custom")
# The events path: the callbacks, and the states that say what the run committed.
EVENTS_PATH_MODES = (EVENTS_MODE, "values")


class CaptureSetting(enum.StrEnum):
    AUTO = "auto"
    EVENTS = "events"
    LEAN = "lean"

    @classmethod
    def parse(cls, value: str | None) -> CaptureSetting:
        text = (value or cls.AUTO.value).strip().lower()
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(member.value for member in cls)
            raise InvalidArgument(f"capture={value!r}: expected one of {choices}") from None


@dataclass(frozen=True, slots=True)
class Capture:
    """What the journal reads for one run.

    `path` is `"events"` (the `events` mapper) or `"state"` (the state mapper);
    `modes` are the stream modes the journal reads; `added` those of them the
    client did not ask for, in the order they were appended to its request.
    """

    path: str
    modes: tuple[str, ...]
    added: tuple[str, ...]


def plan_capture(client_modes: Iterable[str], setting: CaptureSetting) -> Capture:
    """The capture of a run whose client asked for `client_modes`: one object
    per combination, shared by the runs that asked for it (the plugin keeps
    the plans of its last ten thousand runs)."""
    return _plan_capture(tuple(client_modes), setting)


@functools.lru_cache(maxsize=256)
def _plan_capture(client_modes: tuple[str, ...], setting: CaptureSetting) -> Capture:
    asked = list(dict.fromkeys(client_modes))
    use_events = setting is CaptureSetting.EVENTS or (
        setting is CaptureSetting.AUTO and any(mode in TOKEN_MODES for mode in asked)
    )
    if use_events:
        modes: tuple[str, ...] = EVENTS_PATH_MODES
    else:
        modes = _STATE_MODES
    added = tuple(mode for mode in modes if mode not in asked)
    return Capture("events" if use_events else "state", modes, added)
