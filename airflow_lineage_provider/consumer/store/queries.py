"""Listings: namespaces, jobs, datasets, search by name, runs of a job, one run, and raw events.

Every function takes a :class:`~sqlalchemy.Connection` and returns JSON-ready values (camelCase keys,
ISO 8601 UTC times) with the total count for paging, so the routers only check parameters.

``visible`` — the namespaces a key limited to namespace patterns may see (see :mod:`.visibility`; None:
every namespace, with the statements unchanged) — filters in SQL wherever it changes what is counted, so
pages and totals agree: listings and search keep nodes in visible namespaces; a run of a hidden job is
None (the router's 404, as for a missing run) and a visible run leaves out hidden inputs and outputs;
facets lose the objects that name a hidden namespace.

Raw events with a limited key: an event is listed only when it names no hidden namespace anywhere — its
job, inputs, outputs, a DatasetEvent's dataset, the parent facet's job and root job, column-lineage
input fields, symlinks, any facet member ``"namespace"`` (:func:`.visibility.names_hidden_namespace`).
That is one condition on each row of ``lineage_events``, read from the stored payload by the database
(``json_tree`` / ``jsonb_path_query``), in the same ``WHERE`` for the page and its total, so paging and
totals stay exact. The table's ``job_namespace`` column alone would not do: it is NULL for DatasetEvents,
and a run's ``lineage_run_io`` rows miss JobEvents (no run), column-lineage sources, symlinks and parent
facets, and are per run, not per event. The cheap ``job_namespace`` test goes first, so events of hidden
jobs are dropped without parsing; the others cost one JSON parse each — for the total, every event in the
window (``runId``/``after``/``before`` narrow it). Unlimited keys read as before.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, not_, or_, select
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.nodes import node_details, run_data, visible_facets
from airflow_lineage_provider.consumer.store.text import iso
from airflow_lineage_provider.consumer.store.visibility import Visible, names_hidden_namespace, namespace_in


def _page(conn: Connection, query: Any, limit: int, offset: int) -> tuple[list[Any], int]:
    total = conn.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar() or 0
    return list(conn.execute(query.limit(limit).offset(offset))), total


#: Marquez's owner of a namespace nobody created by hand: what it answers for namespaces made by OpenLineage
#: events (the events name no owner, so neither can the store).
NAMESPACE_OWNER = "anonymous"
#: The kinds of node a namespace holds (the index on kind, namespace serves ``kind IN (...)``).
_KINDS = ("job", "dataset")


def _namespace(name: str, created: datetime, updated: datetime) -> dict[str, Any]:
    """Marquez's ``Namespace`` (no description: the events give none, and Marquez leaves out null fields)."""
    return {
        "name": name,
        "createdAt": iso(created),
        "updatedAt": iso(updated),
        "ownerName": NAMESPACE_OWNER,
        "isHidden": False,
    }


def list_namespaces(
    conn: Connection, limit: int, offset: int, visible: Visible = None
) -> tuple[list[dict[str, Any]], int]:
    """Namespaces of jobs and datasets as Marquez's ``Namespace``: created when their first node was, updated
    when their latest node was."""
    n = tables.nodes.c
    query = (
        select(n.namespace, func.min(n.created_at).label("created"), func.max(n.updated_at).label("updated"))
        .group_by(n.namespace)
        .order_by(n.namespace)
    )
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    rows, total = _page(conn, query, limit, offset)
    return [_namespace(r.namespace, r.created, r.updated) for r in rows], total


def get_namespace(conn: Connection, name: str, visible: Visible = None) -> dict[str, Any] | None:
    """Namespace ``name`` as Marquez's ``Namespace``, or None when no node lives in it (or it is hidden)."""
    if visible is not None and name not in visible:
        return None
    n = tables.nodes.c
    query = select(func.min(n.created_at), func.max(n.updated_at)).where(n.kind.in_(_KINDS), n.namespace == name)
    created, updated = conn.execute(query).one()
    return None if created is None else _namespace(name, created, updated)


def namespace_exists(conn: Connection, name: str, visible: Visible = None) -> bool:
    """Whether some job or dataset lives in namespace ``name`` (False when it is hidden): one index probe."""
    if visible is not None and name not in visible:
        return False
    n = tables.nodes.c
    query = select(n.id).where(n.kind.in_(_KINDS), n.namespace == name).limit(1)
    return conn.execute(query).first() is not None


def list_nodes(
    conn: Connection,
    kind: str,
    namespace: str | None,
    limit: int,
    offset: int,
    name_contains: str | None = None,
    visible: Visible = None,
) -> tuple[list[dict[str, Any]], int]:
    """Jobs or datasets (with schema, facets and latest run), by namespace and name, paged."""
    n = tables.nodes.c
    ids_query = select(n.id).where(n.kind == kind).order_by(n.namespace, n.name)
    if namespace is not None:
        ids_query = ids_query.where(n.namespace == namespace)
    if name_contains:
        ids_query = ids_query.where(n.name.contains(name_contains, autoescape=True))
    if visible is not None:
        ids_query = ids_query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    rows, total = _page(conn, ids_query, limit, offset)
    ids = [row.id for row in rows]
    details = node_details(conn, ids, visible)
    return [details[node] for node in ids], total


#: Search orders: Marquez's ``NAME`` (name A-Z) and ``UPDATE_AT`` (most recently updated first).
SEARCH_ORDERS = ("name", "updated_at")


def search(
    conn: Connection,
    text: str,
    kind: str | None,
    namespace: str | None,
    limit: int,
    offset: int,
    visible: Visible = None,
    *,
    sort: str = "name",
    before: datetime | None = None,
    after: datetime | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Jobs and datasets whose name matches ``text`` as Marquez matches it, with the total count.

    Marquez's semantics: ``name ILIKE '%' || text || '%'`` — case-insensitive, ``%`` in ``text`` matches any
    run of characters and ``_`` any one character, and a backslash makes the next character literal (``\\%``
    is a percent sign). ``kind`` (``job``/``dataset``) and ``namespace`` narrow it; ``before``/``after`` keep
    the nodes updated strictly before / strictly after those instants. ``sort`` is ``name`` (name, then
    namespace, in code point order on both stores) or ``updated_at`` (most recently updated first). Case
    folding of non-ASCII letters is PostgreSQL's; SQLite folds ASCII only.
    """
    if sort not in SEARCH_ORDERS:
        raise ValueError(f"sort must be one of {SEARCH_ORDERS}, got {sort!r}")
    n, dialect = tables.nodes.c, conn.dialect.name
    pattern = f"%{text}%"
    # ILIKE's meaning, at the least cost per row: SQLite's LIKE already ignores ASCII case (its lower() folds no
    # more); on PostgreSQL lower(name) LIKE lower(pattern) reads 15,000 names in ~2/3 of ILIKE's time.
    if dialect == "postgresql":
        like = func.lower(n.name).like(func.lower(pattern), escape="\\")
    else:
        like = n.name.like(pattern, escape="\\")
    conditions = [like]
    if kind is not None:
        conditions.append(n.kind == kind)
    if namespace is not None:
        conditions.append(n.namespace == namespace)
    if before is not None:
        conditions.append(n.updated_at < before)
    if after is not None:
        conditions.append(n.updated_at > after)
    if visible is not None:
        conditions.append(namespace_in(n.namespace, visible, dialect))
    # Names in byte (code point) order on both stores: SQLite's binary collation, PostgreSQL's "C".
    name, space = n.name, n.namespace
    if dialect == "postgresql":
        name, space = name.collate("C"), space.collate("C")
    order = (name, space, n.kind) if sort == "name" else (n.updated_at.desc(), name, space, n.kind)
    # One scan for the page and the total: the count of every match rides along on each row of the page.
    total_column = func.count().over().label("total")
    query = select(n.kind, n.namespace, n.name, n.updated_at, total_column).where(*conditions).order_by(*order)
    rows = conn.execute(query.limit(limit).offset(offset)).all()
    if rows:
        total = rows[0].total
    elif offset == 0:
        total = 0
    else:  # a page past the end carries no count: count apart
        total = conn.execute(select(func.count()).select_from(tables.nodes).where(*conditions)).scalar() or 0
    results = [
        {
            "type": r.kind.upper(),
            "name": r.name,
            "updatedAt": iso(r.updated_at),
            "namespace": r.namespace,
            "nodeId": nodeids.node_id(r.kind, r.namespace, r.name),
        }
        for r in rows
    ]
    return results, total


def _run_dict(row: Any, visible: Visible = None) -> dict[str, Any]:
    data = run_data(row, row.created_at, row.updated_at)
    assert data is not None
    data.update(jobNamespace=row.namespace, jobName=row.name, facets=visible_facets(row.facets, visible))
    return data


def _runs_query() -> Any:
    r, n = tables.runs.c, tables.nodes.c
    return select(
        r.run_uuid,
        r.state,
        r.created_at,
        r.updated_at,
        r.started_at,
        r.ended_at,
        r.nominal_start_time,
        r.nominal_end_time,
        r.parent_run_uuid,
        r.facets,
        n.namespace,
        n.name,
    ).join_from(tables.runs, tables.nodes, n.id == r.job_id)


def list_runs(
    conn: Connection, job_id: int, limit: int, offset: int, visible: Visible = None
) -> tuple[list[dict[str, Any]], int]:
    """Runs of one job, newest first (the caller checks that the job is visible)."""
    r = tables.runs.c
    query = _runs_query().where(r.job_id == job_id).order_by(r.created_at.desc(), r.run_uuid)
    rows, total = _page(conn, query, limit, offset)
    visible = None if visible is None else frozenset(visible)
    return [_run_dict(row, visible) for row in rows], total


def get_run(conn: Connection, run_uuid: str, visible: Visible = None) -> dict[str, Any] | None:
    """One run with the datasets it read and wrote, or None (also when its job is hidden)."""
    row = conn.execute(_runs_query().where(tables.runs.c.run_uuid == run_uuid.lower())).first()
    if row is None or (visible is not None and row.namespace not in visible):
        return None
    data = _run_dict(row, None if visible is None else frozenset(visible))
    io, n = tables.run_io.c, tables.nodes.c
    query = (
        select(io.direction, n.namespace, n.name)
        .join_from(tables.run_io, tables.nodes, n.id == io.dataset_id)
        .where(io.run_uuid == row.run_uuid)
        .order_by(n.namespace, n.name)
    )
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    data["inputs"], data["outputs"] = [], []
    for direction, namespace, name in conn.execute(query):
        data[f"{direction}s"].append({"namespace": namespace, "name": name})
    return data


def list_events(
    conn: Connection,
    limit: int,
    offset: int,
    run_uuid: str | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    visible: Visible = None,
    *,
    kind: str | None = None,
    ascending: bool = False,
    job_namespace: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Raw events as received, optionally of one run, one kind (``run``, ``job``, ``dataset``), one job
    namespace (the events of its jobs) or a time window.

    ``after`` is inclusive and ``before`` exclusive (``after <= eventTime < before``), so consecutive windows
    never share an event. Newest event time first, or oldest first with ``ascending``; events at the same
    time keep the order they were stored in (ties broken by the stored row's id, in the same direction),
    so paging with ``offset`` never repeats or skips one. With ``visible``, only events that name no hidden
    namespace (see the module docstring); the total is counted under the same conditions.
    """
    e = tables.events.c
    order = (e.event_time.asc(), e.id.asc()) if ascending else (e.event_time.desc(), e.id.desc())
    query = select(e.payload).order_by(*order)
    conditions = []
    if run_uuid is not None:
        conditions.append(e.run_uuid == run_uuid.lower())
    if kind is not None:
        conditions.append(e.kind == kind)
    if job_namespace is not None:
        conditions.append(e.job_namespace == job_namespace)
    if after is not None:
        conditions.append(e.event_time >= after)
    if before is not None:
        conditions.append(e.event_time < before)
    if visible is not None:
        conditions.append(events_visible(conn, visible))
    if conditions:
        query = query.where(and_(*conditions))
    rows, total = _page(conn, query, limit, offset)
    return [json.loads(row.payload) for row in rows], total


def events_visible(conn: Connection, visible: Collection[str]) -> ColumnElement[bool]:
    """The condition on ``lineage_events`` rows a namespace-limited key may read (see the module docstring).

    The cheap ``job_namespace`` test goes first, so events of hidden jobs are dropped without parsing.
    """
    e, dialect = tables.events.c, conn.dialect.name
    return and_(
        or_(e.job_namespace.is_(None), namespace_in(e.job_namespace, visible, dialect)),
        not_(names_hidden_namespace(e.payload, visible, dialect)),
    )
