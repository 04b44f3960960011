"""Listings: namespaces, jobs, datasets, search by name, runs of a job, one run, and raw events.

Every function takes a :class:`~sqlalchemy.Connection` and returns JSON-ready values (camelCase keys,
ISO 8601 UTC times) with the total count for paging, so the routers only check parameters.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.nodes import node_details, run_data
from airflow_lineage_provider.consumer.store.text import iso, loads


def _page(conn: Connection, query: Any, limit: int, offset: int) -> tuple[list[Any], int]:
    total = conn.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar() or 0
    return list(conn.execute(query.limit(limit).offset(offset))), total


def list_namespaces(conn: Connection, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Namespaces of jobs and datasets with when each was first and last seen."""
    n = tables.nodes.c
    query = (
        select(n.namespace, func.min(n.created_at).label("created"), func.max(n.updated_at).label("updated"))
        .group_by(n.namespace)
        .order_by(n.namespace)
    )
    rows, total = _page(conn, query, limit, offset)
    return [{"name": r.namespace, "createdAt": iso(r.created), "updatedAt": iso(r.updated)} for r in rows], total


def list_nodes(
    conn: Connection, kind: str, namespace: str | None, limit: int, offset: int, name_contains: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Jobs or datasets (with schema, facets and latest run), by namespace and name, paged."""
    n = tables.nodes.c
    ids_query = select(n.id).where(n.kind == kind).order_by(n.namespace, n.name)
    if namespace is not None:
        ids_query = ids_query.where(n.namespace == namespace)
    if name_contains:
        ids_query = ids_query.where(n.name.contains(name_contains, autoescape=True))
    rows, total = _page(conn, ids_query, limit, offset)
    ids = [row.id for row in rows]
    details = node_details(conn, ids)
    return [details[node] for node in ids], total


def search(
    conn: Connection, text: str, kind: str | None, namespace: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """Jobs and datasets whose name contains ``text`` (case-insensitive), most recently updated first."""
    n = tables.nodes.c
    query = select(n.kind, n.namespace, n.name, n.updated_at).where(
        func.lower(n.name).contains(text.lower(), autoescape=True)
    )
    if kind is not None:
        query = query.where(n.kind == kind)
    if namespace is not None:
        query = query.where(n.namespace == namespace)
    rows, total = _page(conn, query.order_by(n.updated_at.desc(), n.name), limit, offset)
    results = [
        {
            "type": r.kind.upper(),
            "name": r.name,
            "namespace": r.namespace,
            "updatedAt": iso(r.updated_at),
            "nodeId": nodeids.node_id(r.kind, r.namespace, r.name),
        }
        for r in rows
    ]
    return results, total


def _run_dict(row: Any) -> dict[str, Any]:
    data = run_data(row, row.created_at, row.updated_at)
    assert data is not None
    data.update(jobNamespace=row.namespace, jobName=row.name, facets=loads(row.facets, {}))
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


def list_runs(conn: Connection, job_id: int, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Runs of one job, newest first."""
    r = tables.runs.c
    query = _runs_query().where(r.job_id == job_id).order_by(r.created_at.desc(), r.run_uuid)
    rows, total = _page(conn, query, limit, offset)
    return [_run_dict(row) for row in rows], total


def get_run(conn: Connection, run_uuid: str) -> dict[str, Any] | None:
    """One run with the datasets it read and wrote, or None."""
    row = conn.execute(_runs_query().where(tables.runs.c.run_uuid == run_uuid.lower())).first()
    if row is None:
        return None
    data = _run_dict(row)
    io, n = tables.run_io.c, tables.nodes.c
    query = (
        select(io.direction, n.namespace, n.name)
        .join_from(tables.run_io, tables.nodes, n.id == io.dataset_id)
        .where(io.run_uuid == row.run_uuid)
        .order_by(n.namespace, n.name)
    )
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
) -> tuple[list[dict[str, Any]], int]:
    """Raw events as received (newest event time first), optionally of one run or a time window."""
    e = tables.events.c
    query = select(e.payload).order_by(e.event_time.desc(), e.id.desc())
    conditions = []
    if run_uuid is not None:
        conditions.append(e.run_uuid == run_uuid.lower())
    if after is not None:
        conditions.append(e.event_time >= after)
    if before is not None:
        conditions.append(e.event_time < before)
    if conditions:
        query = query.where(and_(*conditions))
    rows, total = _page(conn, query, limit, offset)
    return [json.loads(row.payload) for row in rows], total
