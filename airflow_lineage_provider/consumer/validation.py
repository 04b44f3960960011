"""Lenient reading of OpenLineage events: accept what real producers send, reject what cannot be lineage.

Accepted as producers send them: a missing ``schemaURL`` or ``producer``, a missing ``eventType``
(read as ``OTHER``), timestamps without a zone (read as UTC) or with nanoseconds, unknown facets (kept).
Rejected with a message naming the field: a missing or non-UUID ``run.runId``, a missing job namespace or
name, an unknown ``eventType``, a missing or unreadable ``eventTime``, and wrong types where this consumer
reads a value (``inputs`` not an array, a dataset without a name, ...).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

EventKind = Literal["run", "dataset", "job"]

#: OpenLineage run event types, in the spec's spelling.
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
#: Longest namespace, name or field name accepted (characters).
MAX_NAME_LENGTH = 4096

UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")  # fullmatch


class EventError(ValueError):
    """An event this consumer cannot store; the message names the field and what is expected."""


@dataclass(frozen=True)
class DatasetRef:
    """A dataset as an event mentions it."""

    namespace: str
    name: str
    facets: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LineageEvent:
    """One validated event, with the values the store reads pulled out of its JSON."""

    kind: EventKind
    event_type: str | None
    event_time: datetime
    key: str
    payload: str
    producer: str | None
    run_id: str | None = None
    job: DatasetRef | None = None
    run_facets: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[DatasetRef, ...] = ()
    outputs: tuple[DatasetRef, ...] = ()
    dataset: DatasetRef | None = None


def event_key(payload: str) -> str:
    """The identity of an event: SHA-256 of its canonical JSON (the same event twice has one key)."""
    return hashlib.sha256(payload.encode()).hexdigest()


def canonical_json(event: dict[str, Any]) -> str:
    """The event as compact JSON with sorted keys (``\\u`` escapes keep any string storable)."""
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def parse_time(value: Any, where: str) -> datetime:
    """An ISO 8601 date-time as an aware UTC datetime; without a zone it is read as UTC."""
    if not isinstance(value, str) or not value.strip():
        raise EventError(f"{where} must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise EventError(f"{where} must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z, got {value!r}") from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:
        raise EventError(f"{where} is out of range: {value!r}") from None


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise EventError(f"{where} must be a non-empty string, got {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise EventError(f"{where} is {len(value)} characters long; at most {MAX_NAME_LENGTH} are accepted")
    if "\x00" in value:
        raise EventError(f"{where} contains a NUL character, which no lineage store can keep")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise EventError(f"{where} is not valid Unicode (it contains a lone surrogate)") from None
    return value


def _object(value: Any, where: str, required: bool = False) -> dict[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise EventError(f"{where} must be a JSON object, got {_type(value)}")
    return value


def _type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _dataset(value: Any, where: str) -> DatasetRef:
    data = _object(value, where, required=True)
    return DatasetRef(
        namespace=_name(data.get("namespace"), f"{where}.namespace"),
        name=_name(data.get("name"), f"{where}.name"),
        facets=_object(data.get("facets"), f"{where}.facets"),
    )


def _datasets(value: Any, where: str) -> tuple[DatasetRef, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise EventError(f"{where} must be an array of datasets, got {_type(value)}")
    return tuple(_dataset(item, f"{where}[{i}]") for i, item in enumerate(value))


def _kind(event: dict[str, Any]) -> EventKind:
    if "run" in event:
        return "run"
    if "dataset" in event:
        return "dataset"
    if "job" in event:
        return "job"
    raise EventError(
        "the event has none of run, job or dataset: it is not an OpenLineage RunEvent, JobEvent or DatasetEvent"
    )


def parse_event(value: Any) -> LineageEvent:
    """Validate one decoded JSON value as an OpenLineage event.

    Raises:
        EventError: naming the field that makes the event unusable and what is expected there.
    """
    event = _object(value, "the event", required=True)
    kind = _kind(event)
    event_type = event.get("eventType")
    if event_type is not None and event_type not in EVENT_TYPES:
        raise EventError(f"eventType must be one of {', '.join(EVENT_TYPES)}, got {event_type!r}")
    if "eventTime" not in event:
        raise EventError("eventTime is required: the ISO 8601 date-time the event happened, e.g. 2024-05-01T12:00:00Z")
    event_time = parse_time(event["eventTime"], "eventTime")
    producer = event.get("producer")
    if producer is not None and not isinstance(producer, str):
        raise EventError(f"producer must be a string (a URI), got {_type(producer)}")
    if producer is not None and "\x00" in producer:
        raise EventError("producer contains a NUL character, which no lineage store can keep")
    try:
        payload = canonical_json(event)
    except ValueError:
        raise EventError("the event contains NaN or Infinity, which JSON does not allow") from None
    except RecursionError:
        raise EventError("the event is nested too deeply to be stored: flatten its facets") from None
    if "\\ud" in payload:  # a surrogate escape: fine in pairs, not alone (no store or JSON encoder keeps one)
        try:
            json.dumps(event, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise EventError(
                "the event contains a lone surrogate (\\ud800-\\udfff escape), which is not Unicode text"
            ) from None
    common: dict[str, Any] = {
        "kind": kind,
        "event_type": event_type or ("OTHER" if kind == "run" else None),
        "event_time": event_time,
        "key": event_key(payload),
        "payload": payload,
        "producer": producer,
    }
    if kind == "dataset":
        return LineageEvent(**common, dataset=_dataset(event["dataset"], "dataset"))
    job = _dataset(event.get("job"), "job")
    io = {"inputs": _datasets(event.get("inputs"), "inputs"), "outputs": _datasets(event.get("outputs"), "outputs")}
    if kind == "job":
        return LineageEvent(**common, job=job, **io)
    run = _object(event["run"], "run", required=True)
    run_id = run.get("runId")
    if not isinstance(run_id, str) or not UUID_RE.fullmatch(run_id):
        raise EventError(f"run.runId must be a UUID such as 0190c3a2-7c3f-7e1a-9d5e-2b8f3c4d5e6f, got {run_id!r}")
    return LineageEvent(
        **common, run_id=run_id.lower(), job=job, run_facets=_object(run.get("facets"), "run.facets"), **io
    )


def parse_body(body: bytes) -> tuple[list[Any], bool]:
    """Decode a request body into its events: ``(events, was_array)``.

    Raises:
        EventError: the body is not JSON, or is neither an event object nor an array of them.
    """
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise EventError(f"the body is not valid JSON: {error}") from None
    if isinstance(decoded, list):
        return decoded, True
    if isinstance(decoded, dict):
        return [decoded], False
    raise EventError(f"the body must be an event (a JSON object) or an array of events, got {_type(decoded)}")
