"""Lenient reading of OpenLineage events: accept what real producers send, reject what cannot be lineage.

Accepted as producers send them: a missing ``schemaURL`` or ``producer``, a missing ``eventType``
(read as ``OTHER``), timestamps without a zone (read as UTC) or with nanoseconds, unknown facets (kept).
Rejected with a message naming the field: a missing or non-UUID ``run.runId``, a missing job namespace or
name, an unknown ``eventType``, a missing or unreadable ``eventTime``, and wrong types where this consumer
reads a value (``inputs`` not an array, a dataset without a name, ...).

Limits that keep every request's cost linear in its size (docs/consumer.md, "Limits"): JSON nested deeper
than :data:`MAX_DEPTH` levels, an ``eventTime`` later than the caller's ``not_after`` (the configured clock
skew), and more than a batch's ``max_events`` events are refused. Error messages show at most
:data:`SHOWN_CHARS` characters of a value they quote.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

EventKind = Literal["run", "dataset", "job"]

#: OpenLineage run event types, in the spec's spelling.
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
#: Longest namespace, name or field name accepted (characters).
MAX_NAME_LENGTH = 4096
#: Most bytes (UTF-8) a job's or dataset's namespace and name may take together: the store indexes them together,
#: and a PostgreSQL B-tree entry holds at most 2,704 bytes (a third of a page, less the entry's own overhead).
MAX_QUALIFIED_NAME_BYTES = 2600

#: Deepest nesting of objects and arrays accepted in an event (the event object itself is level 1).
MAX_DEPTH = 64
#: Most characters of a client's value quoted back in an error message.
SHOWN_CHARS = 80

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
    #: Every namespace the event names anywhere (:func:`named_namespaces`).
    namespaces: frozenset[str] = frozenset()


def named_namespaces(value: Any) -> frozenset[str]:
    """The string values of every ``"namespace"`` member of a decoded JSON ``value``, at any depth.

    Anywhere: the job, inputs, outputs, a DatasetEvent's dataset, the parent facet's job and root job,
    column-lineage input fields, symlinks, any other facet that names one. Members that are not strings name no
    namespace. The rule a namespace-limited key reads raw events by (``...store.read.visibility``).
    """
    found: set[str] = set()
    stack = [value]
    while stack:  # no recursion: a stored event may nest deeper than Python's stack
        item = stack.pop()
        if isinstance(item, dict):
            named = item.get("namespace")
            if isinstance(named, str):
                found.add(named)
            stack.extend(member for member in item.values() if isinstance(member, (dict, list)))
        elif isinstance(item, list):
            stack.extend(member for member in item if isinstance(member, (dict, list)))
    return frozenset(found)


#: A ``"namespace"`` member with a string value, as canonical JSON writes it (no space; a key is never escaped).
#: Inside a JSON string every ``"`` is escaped, so ``"namespace":"`` occurs nowhere but at such a member.
_NAMESPACE_MEMBER = re.compile(r'"namespace":"((?:[^"\\]|\\.)*)"')


def namespaces_in(payload: str) -> frozenset[str]:
    """:func:`named_namespaces` of an event, read from its canonical JSON text (:func:`canonical_json`) without
    decoding it: each such member's string found by a pattern, and only those strings decoded."""
    return frozenset(
        json.loads(f'"{found}"') if "\\" in found else found for found in _NAMESPACE_MEMBER.findall(payload)
    )


def shown(value: Any) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` characters: error messages never echo a whole value."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 20]}... ({len(text)} characters)"


def event_key(payload: str) -> str:
    """The identity of an event: SHA-256 of its canonical JSON (the same event twice has one key)."""
    return hashlib.sha256(payload.encode()).hexdigest()


def canonical_json(event: dict[str, Any]) -> str:
    """The event as compact JSON with sorted keys (``\\u`` escapes keep any string storable)."""
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def parse_time(value: Any, where: str) -> datetime:
    """An ISO 8601 date-time as an aware UTC datetime; without a zone it is read as UTC."""
    if not isinstance(value, str) or not value.strip():
        raise EventError(f"{where} must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z, got {shown(value)}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise EventError(
            f"{where} must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z, got {shown(value)}"
        ) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except OverflowError:
        raise EventError(f"{where} is out of range: {shown(value)}") from None


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise EventError(f"{where} must be a non-empty string, got {shown(value)}")
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


def _dataset(value: Any, where: str, stored: bool = False) -> DatasetRef:
    data = _object(value, where, required=True)
    namespace = _name(data.get("namespace"), f"{where}.namespace")
    name = _name(data.get("name"), f"{where}.name")
    facets = _object(data.get("facets"), f"{where}.facets")
    if not stored:
        _qualified_name(namespace, name, where)
        if "columnLineage" in facets:
            _column_lineage_sources(facets["columnLineage"], f"{where}.facets.columnLineage")
        if "schema" in facets:
            _schema_field_names(facets["schema"], f"{where}.facets.schema")
    return DatasetRef(namespace=namespace, name=name, facets=facets)


def _field_name(value: Any, where: str) -> None:
    """Refuse a field name (a string: other types are the facet's shape, read leniently) that holds NUL or is
    longer than :data:`MAX_NAME_LENGTH`: fields are nodes of the column graph, looked up by name."""
    if isinstance(value, str) and ("\x00" in value or len(value) > MAX_NAME_LENGTH):
        _name(value, where)


def _schema_field_names(facet: Any, where: str) -> None:
    """Refuse a ``schema`` facet whose field names (nested ones too) no store can keep."""
    pending = [(facet.get("fields") if isinstance(facet, dict) else None, f"{where}.fields")]
    while pending:
        fields, path = pending.pop()
        for i, item in enumerate(fields if isinstance(fields, list) else ()):
            if isinstance(item, dict):
                _field_name(item.get("name"), f"{path}[{i}].name")
                pending.append((item.get("fields"), f"{path}[{i}].fields"))


def _qualified_name(namespace: str, name: str, where: str) -> None:
    """Refuse a namespace and name longer together than :data:`MAX_QUALIFIED_NAME_BYTES`."""
    if 4 * (len(namespace) + len(name)) <= MAX_QUALIFIED_NAME_BYTES:  # at most 4 bytes a character
        return
    size = len(namespace.encode()) + len(name.encode())
    if size > MAX_QUALIFIED_NAME_BYTES:
        raise EventError(
            f"{where}: its namespace and name are {size} bytes long together (UTF-8); at most "
            f"{MAX_QUALIFIED_NAME_BYTES} are accepted, as a lineage store indexes them together: shorten the name "
            f"(starting {shown(name)})"
        )


def _column_lineage_sources(facet: Any, where: str) -> None:
    """Refuse a ``columnLineage`` facet naming a source dataset whose namespace and name are too long together
    (each source becomes a node of the graph), or a field name no store can keep: the facet's other contents are
    its producer's business."""
    if not isinstance(facet, dict) or not isinstance(facet.get("fields"), dict):
        return
    for target, mapping in facet["fields"].items():
        _field_name(target, f"{where}.fields[{shown(target)}]")
        sources = mapping.get("inputFields") if isinstance(mapping, dict) else None
        for i, source in enumerate(sources if isinstance(sources, list) else ()):
            if isinstance(source, dict):
                namespace, name = source.get("namespace"), source.get("name")
                source_where = f"{where}.fields[{shown(target)}].inputFields[{i}]"
                if isinstance(namespace, str) and isinstance(name, str):
                    _qualified_name(namespace, name, source_where)
                _field_name(source.get("field"), f"{source_where}.field")


def _datasets(value: Any, where: str, stored: bool = False) -> tuple[DatasetRef, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise EventError(f"{where} must be an array of datasets, got {_type(value)}")
    return tuple(_dataset(item, f"{where}[{i}]", stored) for i, item in enumerate(value))


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


def _too_deep(value: Any, limit: int) -> list[str] | None:
    """The path to the first container nested deeper than ``limit`` levels in ``value``, or None."""
    pending: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while pending:
        item, level, path = pending.pop()
        if level > limit:
            return list(path)
        members = item.items() if type(item) is dict else enumerate(item)
        for key, member in members:
            if type(member) is dict or type(member) is list:
                pending.append((member, level + 1, (*path, f"[{key}]" if type(key) is int else str(key))))
    return None


def check_depth(event: Any, payload: str, limit: int = MAX_DEPTH) -> None:
    """Refuse an event nested deeper than ``limit`` levels, naming where.

    ``payload`` is the event's JSON: with no more ``{`` and ``[`` than ``limit`` in it (most events) no
    walk is needed.

    Raises:
        EventError: naming the path to the first too-deep object or array.
    """
    if payload.count("{") + payload.count("[") <= limit:
        return
    path = _too_deep(event, limit)
    if path is None:
        return
    where = ".".join(path).replace(".[", "[")
    if len(where) > 2 * SHOWN_CHARS:
        where = f"{where[:SHOWN_CHARS]}...{where[-SHOWN_CHARS:]}"
    raise EventError(
        f"the event nests objects and arrays more than {limit} levels deep (at {where}); "
        f"at most {limit} are accepted: flatten that facet"
    )


def parse_event(
    value: Any, *, not_after: datetime | None = None, max_depth: int = MAX_DEPTH, stored: bool = False
) -> LineageEvent:
    """Validate one decoded JSON value as an OpenLineage event.

    ``not_after`` is the latest ``eventTime`` accepted (now plus the allowed clock skew; None accepts any);
    ``max_depth`` the deepest nesting of objects and arrays. ``stored`` reads back an event the store holds
    (applying, resetting, migrating it): the limits added since it may have been accepted
    (:data:`MAX_QUALIFIED_NAME_BYTES`) are not applied again, so no stored event becomes unreadable.

    Raises:
        EventError: naming the field that makes the event unusable and what is expected there.
    """
    event = _object(value, "the event", required=True)
    kind = _kind(event)
    event_type = event.get("eventType")
    if event_type is not None and event_type not in EVENT_TYPES:
        raise EventError(f"eventType must be one of {', '.join(EVENT_TYPES)}, got {shown(event_type)}")
    if "eventTime" not in event:
        raise EventError("eventTime is required: the ISO 8601 date-time the event happened, e.g. 2024-05-01T12:00:00Z")
    if not stored and isinstance(event["eventTime"], str) and "\x00" in event["eventTime"]:
        raise EventError(
            f"eventTime must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z, got {shown(event['eventTime'])}"
        )
    event_time = parse_time(event["eventTime"], "eventTime")
    if not_after is not None and event_time > not_after:
        raise EventError(
            f"eventTime {shown(event['eventTime'])} is later than this consumer accepts "
            f"({not_after.isoformat(timespec='seconds')}, now plus the allowed clock skew): "
            "check the producer's clock"
        )
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
    check_depth(event, payload, max_depth)
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
        "namespaces": namespaces_in(payload),
    }
    if kind == "dataset":
        return LineageEvent(**common, dataset=_dataset(event["dataset"], "dataset", stored))
    job = _dataset(event.get("job"), "job", stored)
    inputs = _datasets(event.get("inputs"), "inputs", stored)
    outputs = _datasets(event.get("outputs"), "outputs", stored)
    if kind == "job":
        return LineageEvent(**common, job=job, inputs=inputs, outputs=outputs)
    run = _object(event["run"], "run", required=True)
    run_id = run.get("runId")
    if not isinstance(run_id, str) or not UUID_RE.fullmatch(run_id):
        raise EventError(f"run.runId must be a UUID such as 0190c3a2-7c3f-7e1a-9d5e-2b8f3c4d5e6f, got {shown(run_id)}")
    return LineageEvent(
        **common,
        run_id=run_id.lower(),
        job=job,
        run_facets=_object(run.get("facets"), "run.facets"),
        inputs=inputs,
        outputs=outputs,
    )


def parse_body(body: bytes, max_events: int | None = None) -> tuple[list[Any], bool]:
    """Decode a request body into its events: ``(events, was_array)``.

    An array is decoded one element at a time and refused as soon as it holds more than ``max_events``
    (None: no bound), so a body of millions of tiny elements costs no more than ``max_events`` of them.

    Raises:
        EventError: the body is not JSON, or is neither an event object nor an array of them.
        TooManyEvents: the array holds more than ``max_events`` events.
    """
    try:
        text = body.decode("utf-8-sig") if isinstance(body, bytes) else body
    except UnicodeDecodeError as error:
        reason = f"{error.reason} at byte {error.start}"
        raise EventError(f"the body is not valid JSON: it is not UTF-8 text ({reason})") from None
    start = _skip_space(text, 0)
    if text.startswith("[", start):
        return list(_array_items(text, start, max_events)), True
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise EventError(f"the body is not valid JSON: {_json_error(error)}") from None
    if isinstance(decoded, dict):
        return [decoded], False
    raise EventError(f"the body must be an event (a JSON object) or an array of events, got {_type(decoded)}")


class TooManyEvents(EventError):
    """A batch holds more events than the consumer takes per request (answered with 413)."""


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip_space(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _json_error(error: Exception) -> str:
    if isinstance(error, RecursionError):
        return f"it nests objects and arrays too deeply (at most {MAX_DEPTH} levels are accepted)"
    return str(error)


def _array_items(text: str, start: int, max_events: int | None) -> Iterator[Any]:
    """The elements of the JSON array at ``text[start]``, decoded one at a time (C speed each)."""
    at, count = _skip_space(text, start + 1), 0
    if text.startswith("]", at):
        at = _skip_space(text, at + 1)
    else:
        while True:
            count += 1
            if max_events is not None and count > max_events:
                raise TooManyEvents(
                    f"the batch holds more than {max_events} events; at most {max_events} are accepted per "
                    "request: send smaller batches"
                )
            try:
                item, at = _DECODER.raw_decode(text, at)
            except (ValueError, RecursionError) as error:
                raise EventError(f"the body is not valid JSON: {_json_error(error)}") from None
            yield item
            at = _skip_space(text, at)
            if text.startswith(",", at):
                at = _skip_space(text, at + 1)
            elif text.startswith("]", at):
                at = _skip_space(text, at + 1)
                break
            else:
                raise EventError(f"the body is not valid JSON: expecting ',' or ']' at character {at}")
    if at != len(text):
        raise EventError(f"the body is not valid JSON: extra data after the array at character {at}")
