"""Version 9: declared and observed lineage on nodes and edges."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TypeVar

from alembic import op
from sqlalchemy import BindParameter, Connection, DateTime, bindparam, case, column, null, select, table, text

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _declared_lineage(op.get_bind())


#: Version 8's static events (JobEvents and DatasetEvents) a page at a time, in id order after the page before.
_V8_STATIC_EVENTS = (
    "SELECT id, payload FROM lineage_events WHERE kind IN ('job', 'dataset') AND id > :after ORDER BY id LIMIT 1000"
)
#: When runs last observed each dataset and each (job, dataset, direction): the latest state time of a run.
_V8_DATASET_RUNS = (
    "SELECT io.dataset_id, max(r.state_time) FROM lineage_run_io io"
    " JOIN lineage_runs r ON r.run_uuid = io.run_uuid GROUP BY io.dataset_id"
)
_V8_EDGE_RUNS = (
    "SELECT r.job_id, io.dataset_id, io.direction, max(r.state_time) FROM lineage_run_io io"
    " JOIN lineage_runs r ON r.run_uuid = io.run_uuid GROUP BY r.job_id, io.dataset_id, io.direction"
)
_V8_JOB_RUNS = "SELECT job_id, max(state_time) FROM lineage_runs GROUP BY job_id"


_Key = TypeVar("_Key", str, tuple[str, str])

#: A time as version 8 stores it: UTC (naive text on SQLite, what SQLAlchemy's ``DATETIME`` makes of a UTC time).
_TIME = DateTime(timezone=True)
#: Version 8's nodes and edges, as far as this revision reads and writes them.
_nodes = table(
    "lineage_nodes",
    column("id"),
    column("node_key"),
    column("kind"),
    column("created_at", _TIME),
    column("declared_at", _TIME),
    column("observed_at", _TIME),
)
_edges = table(
    "lineage_edges",
    column("origin_id"),
    column("destination_id"),
    column("first_seen", _TIME),
    column("declared_at", _TIME),
    column("observed_at", _TIME),
)
#: OpenLineage run event types: a stored event with another ``eventType`` was unreadable at version 8.
_EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER")
#: Longest namespace or name version 8 read.
_MAX_NAME_LENGTH = 4096


def _static_spans(
    conn: Connection,
) -> tuple[dict[str, tuple[datetime, datetime]], dict[tuple[str, str], tuple[datetime, datetime]]]:
    """``node key → (first, last)`` and ``(origin key, destination key) → (first, last)`` event times of what the
    stored static events (JobEvents, DatasetEvents) named, read a page at a time."""
    nodes: dict[str, tuple[datetime, datetime]] = {}
    edges: dict[tuple[str, str], tuple[datetime, datetime]] = {}
    after = 0
    while page := conn.execute(text(_V8_STATIC_EVENTS), {"after": after}).all():
        after = page[-1][0]
        for _id, payload in page:
            try:
                event = json.loads(payload)
                if "\\ud" in payload:  # a lone surrogate escape made the event unreadable
                    json.dumps(event, ensure_ascii=False).encode()
                named = _named_by(event)
            except (ValueError, OverflowError):  # stored by an older, laxer release: it names nothing we can read
                continue
            at, found_nodes, found_edges = named
            _widen(nodes, {key: (at, at) for key in found_nodes})
            _widen(edges, {key: (at, at) for key in found_edges})
    return nodes, edges


def _node_key(kind: str, namespace: str, name: str) -> str:
    """The key of a job or dataset node: SHA-1 of kind, namespace and name."""
    return hashlib.sha1(f"{kind}\x00{namespace}\x00{name}".encode()).hexdigest()


def _named_by(event: Any) -> tuple[datetime, set[str], set[tuple[str, str]]]:
    """The event time of a stored static event, the node keys it names (its job, its datasets and the source
    datasets of their column lineage) and its edges (input → job, job → output), as version 8 read them.

    Raises:
        ValueError: the event is not one version 8 could read (no readable time, a job or dataset without a
            namespace or name, ``inputs`` not an array, ...).
    """
    if not isinstance(event, dict):
        raise ValueError("not an object")
    if event.get("eventType") is not None and event["eventType"] not in _EVENT_TYPES:
        raise ValueError("unknown eventType")
    at = _event_time(event.get("eventTime"))
    producer = event.get("producer")
    if producer is not None and (not isinstance(producer, str) or "\x00" in producer):
        raise ValueError("unreadable producer")
    if "dataset" in event:
        return at, _dataset_keys(_reference(event["dataset"])), set()
    job_namespace, job_name, _facets = _reference(event.get("job"))
    inputs = [_reference(item) for item in _references(event.get("inputs"))]
    outputs = [_reference(item) for item in _references(event.get("outputs"))]
    job = _node_key("job", job_namespace, job_name)
    nodes = {job}
    for ref in inputs + outputs:
        nodes |= _dataset_keys(ref)
    edges = {(_node_key("dataset", ns, name), job) for ns, name, _facets in inputs}
    edges |= {(job, _node_key("dataset", ns, name)) for ns, name, _facets in outputs}
    return at, nodes, edges


def _event_time(value: Any) -> datetime:
    """An ISO 8601 ``eventTime`` as an aware UTC time (without a zone: UTC)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("no eventTime")
    parsed = datetime.fromisoformat(value.strip())
    return parsed.replace(tzinfo=timezone.utc) if parsed.tzinfo is None else parsed.astimezone(timezone.utc)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_NAME_LENGTH or "\x00" in value:
        raise ValueError("unreadable name")
    value.encode()  # a lone surrogate: UnicodeEncodeError, a ValueError
    return value


def _reference(value: Any) -> tuple[str, str, dict[str, Any]]:
    """``(namespace, name, facets)`` of a job or dataset."""
    if not isinstance(value, dict):
        raise ValueError("not an object")
    facets = value.get("facets")
    if facets is not None and not isinstance(facets, dict):
        raise ValueError("facets not an object")
    return _name(value.get("namespace")), _name(value.get("name")), facets or {}


def _references(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("not an array")
    return value


def _text(value: Any) -> bool:
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _dataset_keys(ref: tuple[str, str, dict[str, Any]]) -> set[str]:
    """The node keys of a dataset and of the source datasets its ``columnLineage`` facet names."""
    namespace, name, facets = ref
    keys = {_node_key("dataset", namespace, name)}
    facet = facets.get("columnLineage")
    fields = facet.get("fields") if isinstance(facet, dict) else None
    for target, mapping in fields.items() if isinstance(fields, dict) else ():
        sources = mapping.get("inputFields") if isinstance(mapping, dict) else None
        if not _text(target) or not isinstance(sources, list):
            continue
        for source in sources:
            if isinstance(source, dict) and all(_text(source.get(k)) for k in ("namespace", "name", "field")):
                keys.add(_node_key("dataset", source["namespace"], source["name"]))
    return keys


def _widen(spans: dict[_Key, tuple[datetime, datetime]], found: dict[_Key, tuple[datetime, datetime]]) -> None:
    """Widen each ``(first, last)`` of ``spans`` to cover the one ``found`` has for the same key."""
    for key, (first, last) in found.items():
        known = spans.get(key, (first, last))
        spans[key] = (min(known[0], first), max(known[1], last))


def _runs_by(conn: Connection, query: str, keep: Callable[[tuple[Any, ...]], bool]) -> dict[tuple[Any, ...], datetime]:
    """The rows of ``query`` (key columns, then a time) that ``keep`` keeps, as ``key → time``."""
    found: dict[tuple[Any, ...], datetime] = {}
    for *key, at in conn.execute(text(query)):
        if keep(tuple(key)) and at is not None:
            if isinstance(at, str):  # SQLite answers an aggregate's time as text
                at = datetime.fromisoformat(at)
            found[tuple(key)] = at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)
    return found


def _declared_lineage(conn: Connection) -> None:
    """Version 9: declared and observed lineage (see ``docs/declared-lineage.md``). Nodes and edges gain
    ``declared_at`` (the latest static event naming them) and ``observed_at`` (the latest RunEvent).

    Derived from what is stored: everything is observed (at its ``last_seen``/``updated_at``) unless a stored
    JobEvent or DatasetEvent named it. What one did is declared at that event's latest time, and observed at the
    latest state time of a stored run that read or wrote it (for a job: of its runs), or else — when it was stored
    before the first static event named it, which only a RunEvent can have done — at its ``first_seen``/
    ``created_at``; otherwise it exists only by declaration. A run removed by retention before the upgrade is no
    evidence: an edge only such a run observed, named again later by a JobEvent, reads as declared-only until a
    run observes it again.
    """
    timestamp = "TIMESTAMP WITH TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
    for name in ("lineage_nodes", "lineage_edges"):
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN declared_at {timestamp}")
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN observed_at {timestamp}")
    conn.exec_driver_sql(
        "CREATE INDEX ix_lineage_edges_declared ON lineage_edges (origin_id, destination_id, observed_at)"
        " WHERE declared_at IS NOT NULL"
    )
    conn.exec_driver_sql("UPDATE lineage_nodes SET observed_at = updated_at")
    conn.exec_driver_sql("UPDATE lineage_edges SET observed_at = last_seen")
    node_spans, edge_spans = _static_spans(conn)
    if not node_spans:
        return
    conn.execute(text("DELETE FROM lineage_store_settings WHERE name = 'declared_lineage'"))
    conn.execute(text("INSERT INTO lineage_store_settings (name, value) VALUES ('declared_lineage', '1')"))
    n, e = _nodes.c, _edges.c
    ids: dict[str, tuple[int, str]] = {}
    keys = list(node_spans)
    for start in range(0, len(keys), 900):
        query = select(n.node_key, n.id, n.kind).where(n.node_key.in_(keys[start : start + 900]))
        ids.update((key, (node_id, kind)) for key, node_id, kind in conn.execute(query))
    declared = {node_id for node_id, _kind in ids.values()}
    job_runs = _runs_by(conn, _V8_JOB_RUNS, lambda key: key[0] in declared)
    dataset_runs = _runs_by(conn, _V8_DATASET_RUNS, lambda key: key[0] in declared)
    evidence = bindparam("b_evidence", type_=_TIME)
    first: BindParameter[datetime] = bindparam("b_first")
    last: BindParameter[datetime] = bindparam("b_last")
    set_nodes = (
        _nodes.update()
        .where(n.id == bindparam("b_id"))
        .values(
            declared_at=last,
            observed_at=case((evidence.is_not(None), evidence), (n.created_at < first, n.created_at), else_=null()),
        )
    )
    rows = []
    for key, (node_id, kind) in ids.items():
        runs = job_runs if kind == "job" else dataset_runs
        at = runs.get((node_id,))
        rows.append({"b_id": node_id, "b_evidence": at, "b_first": node_spans[key][0], "b_last": node_spans[key][1]})
    conn.execute(set_nodes, rows)
    if not edge_spans:
        return
    edge_runs = _runs_by(conn, _V8_EDGE_RUNS, lambda key: key[0] in declared and key[1] in declared)
    set_edges = (
        _edges.update()
        .where(e.origin_id == bindparam("b_origin"), e.destination_id == bindparam("b_destination"))
        .values(
            declared_at=last,
            observed_at=case((evidence.is_not(None), evidence), (e.first_seen < first, e.first_seen), else_=null()),
        )
    )
    rows = []
    for (origin_key, destination_key), (first_at, last_at) in edge_spans.items():
        if origin_key not in ids or destination_key not in ids:
            continue
        origin, destination = ids[origin_key], ids[destination_key]
        if origin[1] == "job":  # job → output dataset
            at = edge_runs.get((origin[0], destination[0], "output"))
        else:
            at = edge_runs.get((destination[0], origin[0], "input"))
        row = {"b_origin": origin[0], "b_destination": destination[0], "b_evidence": at}
        rows.append({**row, "b_first": first_at, "b_last": last_at})
    conn.execute(set_edges, rows)
