"""The record itself (`RunEvent`): its envelope, the event catalog and the rules every record obeys.

A `RunEvent` is one append-only entry of a thread's journal. The store assigns
`seq` (strictly increasing per thread, starting at 1); everything else is set by
the writer. The JSON envelope (`to_dict`) is compatible with deer-flow's run
event stream contract; consumers ignore fields they do not know.

What each event type's record says lives in `journal_bridge.model.records`; how
stream parts become records, in `journal_bridge.mapping`. This module only knows
what a record is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar, overload

from journal_bridge.model.errors import InvalidEvent

__all__ = [
    "DEFAULT_MAX_CONTENT_BYTES",
    "ERROR",
    "EVENT_CATEGORIES",
    "HIDDEN_CALLER_PREFIXES",
    "LLM_AI_RESPONSE",
    "LLM_HUMAN_INPUT",
    "LLM_TOOL_RESULT",
    "MAX_CATEGORY_LENGTH",
    "MAX_EVENT_TYPE_LENGTH",
    "MESSAGE",
    "MIDDLEWARE",
    "MIDDLEWARE_SUMMARIZE",
    "OUTPUTS",
    "RUN_END",
    "RUN_ERROR",
    "RUN_INTERRUPT",
    "RUN_START",
    "SUMMARIZATION_EVENT",
    "SUMMARIZER_CALLER",
    "TRACE",
    "EventRecord",
    "InvalidEvent",
    "PreparedEvent",
    "RunEvent",
    "StoredRecord",
    "dumps",
    "event_from_record",
    "make_event",
    "prepare_event",
    "stored_seq",
    "validate_event",
]

# Categories: what a consumer does with a record.
MESSAGE = "message"
MIDDLEWARE = "middleware"
TRACE = "trace"
OUTPUTS = "outputs"
ERROR = "error"

# Event types, each with the one category it is written under.
RUN_START = "run.start"
LLM_HUMAN_INPUT = "llm.human.input"
LLM_AI_RESPONSE = "llm.ai.response"
LLM_TOOL_RESULT = "llm.tool.result"
MIDDLEWARE_SUMMARIZE = "middleware:summarize"
RUN_END = "run.end"
RUN_ERROR = "run.error"
# Not in deer-flow's catalog (its consumers ignore unknown types): a run that
# paused at `interrupt()`, with the values it is waiting on.
RUN_INTERRUPT = "run.interrupt"

# The custom event a tracking summarization middleware emits when it compacts,
# and the `caller` recorded for the summarizer model's own calls.
SUMMARIZATION_EVENT = "summarization"
SUMMARIZER_CALLER = "middleware:summarize"
# `caller` prefixes of message records that are not the conversation: a
# middleware's model calls, and what models and tools said inside a tool or a
# subgraph (deer-flow's history view hides these callers too).
HIDDEN_CALLER_PREFIXES = ("middleware:", "subagent:")

EVENT_CATEGORIES: dict[str, str] = {
    RUN_START: TRACE,
    LLM_HUMAN_INPUT: MESSAGE,
    LLM_AI_RESPONSE: MESSAGE,
    LLM_TOOL_RESULT: MESSAGE,
    MIDDLEWARE_SUMMARIZE: MIDDLEWARE,
    RUN_END: OUTPUTS,
    RUN_ERROR: ERROR,
    RUN_INTERRUPT: OUTPUTS,
}

MAX_EVENT_TYPE_LENGTH = 32
MAX_CATEGORY_LENGTH = 16

DEFAULT_MAX_CONTENT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One journal record. `seq` is None until a store has appended it."""

    thread_id: str
    run_id: str
    event_type: str
    category: str
    content: Any
    metadata: dict[str, Any]
    created_at: datetime
    seq: int | None = None
    source_key: str | None = None
    user_id: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The JSON envelope; `source_key` and `user_id` appear only when set."""
        data: dict[str, Any] = {
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "seq": self.seq,
            "event_type": self.event_type,
            "category": self.category,
            "content": self.content,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
        }
        if self.source_key is not None:
            data["source_key"] = self.source_key
        if self.user_id is not None:
            data["user_id"] = self.user_id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunEvent:
        """Inverse of `to_dict`; unknown fields are ignored."""
        created_at = data.get("created_at")
        if isinstance(created_at, str):
            try:
                created_at = datetime.fromisoformat(created_at)
            except ValueError as exc:
                raise InvalidEvent(f"created_at: not ISO-8601: {created_at!r}") from exc
        elif created_at is None:
            created_at = datetime.now(UTC)
        metadata = data.get("metadata")
        return cls(
            thread_id=data.get("thread_id"),  # type: ignore[arg-type]
            run_id=data.get("run_id"),  # type: ignore[arg-type]
            event_type=data.get("event_type"),  # type: ignore[arg-type]
            category=data.get("category"),  # type: ignore[arg-type]
            content=data.get("content", ""),
            metadata={} if metadata is None else metadata,
            created_at=created_at,
            seq=data.get("seq"),
            source_key=data.get("source_key"),
            user_id=data.get("user_id"),
        )


_T = TypeVar("_T")


class _Key(Generic[_T]):
    """An envelope key of an `EventRecord` read as the attribute of that name.

    A key every record has is read as `record[name]`, so a dict missing it
    fails as a dict does; an optional one (`seq`, `source_key`, `user_id`)
    reads as None when it is absent.
    """

    def __init__(self, *, optional: bool = False) -> None:
        self._optional = optional
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, record: None, owner: type) -> _Key[_T]: ...
    @overload
    def __get__(self, record: dict[str, object], owner: type) -> _T: ...
    def __get__(self, record: dict[str, object] | None, owner: type) -> object:
        if record is None:
            return self
        return record.get(self._name) if self._optional else record[self._name]

    def __set__(self, record: dict[str, object], value: object) -> None:
        raise AttributeError(f"{self._name}: a record's envelope is set by its keys")


class EventRecord(dict[str, Any]):
    """A stored record as a plain dict: the form deer-flow's `RunEventStore` reads and writes.

    The keys are the envelope of `RunEvent.to_dict` (`created_at` is ISO-8601
    text; `source_key` and `user_id` only when set), so a record serialises as
    JSON as it is. The same names read as attributes give the `RunEvent` view
    (`record.seq`, `record.created_at` as a datetime), so code written against
    `RunEvent` reads either form.
    """

    __slots__ = ()

    @classmethod
    def from_event(cls, event: RunEvent) -> EventRecord:
        return cls(event.to_dict())

    def to_event(self) -> RunEvent:
        return RunEvent.from_dict(self)

    def to_dict(self) -> dict[str, object]:
        """A plain copy of the envelope."""
        return dict(self)

    thread_id: _Key[str] = _Key()
    run_id: _Key[str] = _Key()
    event_type: _Key[str] = _Key()
    category: _Key[str] = _Key()
    content: _Key[Any] = _Key()
    metadata: _Key[dict[str, Any]] = _Key()
    seq: _Key[int | None] = _Key(optional=True)
    source_key: _Key[str | None] = _Key(optional=True)
    user_id: _Key[str | None] = _Key(optional=True)

    @property
    def created_at(self) -> datetime:
        value = self["created_at"]
        return datetime.fromisoformat(value) if isinstance(value, str) else value


# A record as a store reads it back: either form, with its seq set.
StoredRecord = RunEvent | EventRecord


def stored_seq(record: RunEvent | EventRecord) -> int:
    """The seq of a record a store has appended; `InvalidEvent` for one it has not."""
    seq = record.seq
    if seq is None:
        raise InvalidEvent(f"seq: a stored record has one; this {record.event_type} record has none")
    return seq


def make_event(
    *,
    thread_id: str,
    run_id: str,
    event_type: str,
    category: str | None = None,
    content: object = "",
    metadata: dict[str, object] | None = None,
    created_at: datetime | str | None = None,
    source_key: str | None = None,
    user_id: str | None = None,
) -> RunEvent:
    """Build an unsaved record: `created_at` defaults to now (UTC), `metadata` to {}.

    `category` may be left out for the catalog's event types. `created_at` may
    also be ISO-8601 text (deer-flow's form); text without an offset is UTC.
    """
    if isinstance(created_at, str):
        created_at = _parse_time(created_at)
    if category is None:
        category = EVENT_CATEGORIES.get(event_type)
        if category is None:
            raise InvalidEvent(
                f"category: required for event_type {event_type!r}, which is not in the catalog"
            )
    return RunEvent(
        thread_id=thread_id,
        run_id=run_id,
        event_type=event_type,
        category=category,
        content=content,
        metadata={} if metadata is None else metadata,
        created_at=datetime.now(UTC) if created_at is None else created_at,
        source_key=source_key,
        user_id=user_id,
    )


def _parse_time(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidEvent(f"created_at: not ISO-8601: {text!r}") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# The keys a dict given to `put_batch` may carry; deer-flow's are those of `put`.
_RECORD_KEYS = frozenset(
    {
        "thread_id",
        "run_id",
        "event_type",
        "category",
        "content",
        "metadata",
        "created_at",
        "source_key",
        "user_id",
    }
)


def event_from_record(data: Mapping[str, Any]) -> RunEvent:
    """The unsaved `RunEvent` a dict of `put`'s keyword arguments describes.

    Fields a stored record also has (`seq`) are ignored, so a record read from
    one store can be written to another. `created_at` is a datetime, ISO-8601
    text (UTC without an offset) or absent (now).
    """
    if not isinstance(data, Mapping):
        raise InvalidEvent(
            f"event: expected RunEvent or dict, got {type(data).__name__}"
        )
    for name in ("thread_id", "run_id", "event_type"):
        if name not in data:
            raise InvalidEvent(f"{name}: missing")
    fields = {name: data[name] for name in _RECORD_KEYS & data.keys()}
    created_at = fields.get("created_at")
    if isinstance(created_at, datetime) and created_at.tzinfo is None:
        fields["created_at"] = created_at.replace(tzinfo=UTC)
    return make_event(**fields)


def _bad_text(name: str, value: object, max_length: int | None = None) -> InvalidEvent:
    if not isinstance(value, str) or not value:
        return InvalidEvent(f"{name}: must be a non-empty string, got {value!r}")
    if "\x00" in value:
        return InvalidEvent(f"{name}: must not contain NUL characters, got {value!r}")
    return InvalidEvent(
        f"{name}: must be at most {max_length} characters, got {len(value)} ({value[:40]!r}...)"
    )


# The envelope's text fields: required ones with their length limit (None: any), optional ones.
_REQUIRED_TEXT = (
    ("thread_id", None),
    ("run_id", None),
    ("event_type", MAX_EVENT_TYPE_LENGTH),
    ("category", MAX_CATEGORY_LENGTH),
)
_OPTIONAL_TEXT = ("source_key", "user_id")


def _check_text(name: str, value: object, max_length: int | None) -> None:
    if (
        not isinstance(value, str)
        or not value
        or (max_length is not None and len(value) > max_length)
        or "\x00" in value
    ):
        raise _bad_text(name, value, max_length)


def validate_event(event: RunEvent) -> None:
    """Raise `InvalidEvent` naming the first field that breaks the envelope contract."""
    if not isinstance(event, RunEvent):
        raise InvalidEvent(f"event: expected RunEvent, got {type(event).__name__}")
    for name, limit in _REQUIRED_TEXT:
        _check_text(name, getattr(event, name), limit)
    if not isinstance(event.metadata, dict):
        raise InvalidEvent(
            f"metadata: must be a dict, got {type(event.metadata).__name__}"
        )
    created_at = event.created_at
    if not isinstance(created_at, datetime):
        raise InvalidEvent(
            f"created_at: must be a datetime, got {type(created_at).__name__}"
        )
    if created_at.tzinfo is None or created_at.utcoffset() is None:
        raise InvalidEvent("created_at: must be timezone-aware")
    seq = event.seq
    if seq is not None and (type(seq) is not int or seq < 1):
        raise InvalidEvent(f"seq: must be None or an int >= 1, got {seq!r}")
    for name in _OPTIONAL_TEXT:
        value = getattr(event, name)
        if value is not None:
            _check_text(name, value, None)


# Built once: json.dumps with options would build an encoder per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# Metadata is informational: an odd value (a datetime, an enum) becomes its text
# rather than failing the whole batch.
_METADATA_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str
)


def dumps(value: object) -> str:
    """The one JSON encoding used for stored content and metadata (strict: no NaN)."""
    return _ENCODER.encode(value)


def _truncate_text(text: str, limit: int) -> str:
    """The longest prefix of `text` whose JSON encoding fits in `limit` bytes."""
    low, high = 0, min(len(text), limit)
    while low < high:
        mid = (low + high + 1) // 2
        if len(dumps(text[:mid]).encode("utf-8")) <= limit:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def _without_nul(value: object) -> Any:
    """`value` with every NUL character in its strings (and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_nul(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """A validated record with its content and metadata already encoded as JSON text."""

    event: RunEvent
    content_json: str
    metadata_json: str

    def with_seq(self, seq: int) -> RunEvent:
        """The record as appended: content and metadata as given (after coercion or
        truncation), which a read returns as their JSON round trip."""
        return self._appended(seq, self.event.content, self.event.metadata)

    def decoded(self, seq: int) -> RunEvent:
        """The record exactly as a read returns it: JSON-decoded, sharing nothing
        with the caller's objects."""
        return self._appended(seq, json.loads(self.content_json), json.loads(self.metadata_json))

    def _appended(self, seq: int, content: object, metadata: dict[str, object]) -> RunEvent:
        e = self.event
        return RunEvent(
            e.thread_id, e.run_id, e.event_type, e.category, content, metadata,
            e.created_at, seq, e.source_key, e.user_id,
        )


def prepare_event(event: RunEvent, max_content_bytes: int) -> PreparedEvent:
    """Validate `event` and make its content storable.

    Content that is not JSON-serialisable is kept as its text
    (`metadata["content_coerced"] = True`). NUL characters, which PostgreSQL
    cannot store in text or jsonb, become U+FFFD in every backend alike
    (`metadata["content_sanitized"] = True` when the content had any). Content whose JSON encoding exceeds
    `max_content_bytes` is cut to a string prefix -- JSON content becomes a prefix
    of its JSON text -- with `metadata["truncated"] = True` and
    `metadata["original_size"]` (bytes of the full JSON encoding).
    """
    validate_event(event)
    content = event.content
    metadata = event.metadata
    try:
        content_json = _ENCODER.encode(content)
    except (TypeError, ValueError):
        content = str(content)
        content_json = _ENCODER.encode(content)
        metadata = {**metadata, "content_coerced": True}
    if (
        "\\u0000" in content_json
    ):  # maybe a NUL, maybe an escaped backslash before "u0000"
        cleaned = _without_nul(content)
        cleaned_json = _ENCODER.encode(cleaned)
        if cleaned_json != content_json:
            content, content_json = cleaned, cleaned_json
            metadata = {**metadata, "content_sanitized": True}
    # A UTF-8 character is at most 4 bytes: most content needs no encoding to know it fits.
    if len(content_json) * 4 > max_content_bytes:
        size = len(content_json.encode("utf-8"))
        if size > max_content_bytes:
            text = content if isinstance(content, str) else content_json
            content = _truncate_text(text, max_content_bytes)
            content_json = _ENCODER.encode(content)
            metadata = {**metadata, "truncated": True, "original_size": size}
    if metadata:
        try:
            metadata_json = _METADATA_ENCODER.encode(metadata)
        except ValueError as exc:
            raise InvalidEvent(f"metadata: not JSON-serialisable: {exc}") from exc
        if "\\u0000" in metadata_json:
            metadata = _without_nul(json.loads(metadata_json))
            metadata_json = _METADATA_ENCODER.encode(metadata)
    else:
        metadata_json = "{}"
    if content is not event.content or metadata is not event.metadata:
        event = replace(event, content=content, metadata=metadata)
    return PreparedEvent(event, content_json, metadata_json)
