"""Read queries: node lookup by id, node details in Marquez's shape, listings, search and raw events.

Every function takes a :class:`~sqlalchemy.Connection` and returns plain JSON-ready values (camelCase
keys, ISO 8601 UTC times), so the routers only check parameters and serialize.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, literal, null, or_, select, union_all

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.ingest import field_key, node_key
from airflow_lineage_provider.consumer.store.sqltime import iso_utc

CHUNK = 5000


def iso(value: datetime | None) -> str | None:
    """A stored time as ISO 8601 UTC with microseconds and a ``Z`` suffix (as :class:`.sqltime.iso_utc`)."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if value is not None else None


def _json(text: str | None, default: Any) -> Any:
    return json.loads(text) if text else default


def find_node(conn: Connection, kind: str, rest: str) -> tuple[int, str, str] | None:
    """``(id, namespace, name)`` of the job or dataset whose id is ``<kind>:<rest>``, or None.

    When several splits of ``rest`` name existing nodes, the one with the longest namespace wins.
    """
    candidates = {node_key(kind, ns, name): (ns, name) for ns, name in nodeids.splits(rest, 2)}
    if not candidates:
        return None
    n = tables.nodes.c
    found = conn.execute(select(n.id, n.namespace, n.name).where(n.node_key.in_(list(candidates)))).all()
    if not found:
        return None
    node_id, namespace, name = max(found, key=lambda row: len(row[1]))
    return node_id, namespace, name


def find_field(conn: Connection, rest: str) -> tuple[int, str, str, str] | None:
    """``(field_id, namespace, dataset, field)`` for ``datasetField:<rest>``, or None."""
    for namespace, name, field in nodeids.splits(rest, 3):
        dataset = find_node(conn, "dataset", f"{namespace}:{name}")
        if dataset is None or (dataset[1], dataset[2]) != (namespace, name):
            continue
        field_id = conn.execute(
            select(tables.fields.c.id).where(tables.fields.c.field_key == field_key(dataset[0], field))
        ).scalar()
        if field_id is not None:
            return field_id, namespace, name, field
    return None


def dataset_field_ids(conn: Connection, dataset_id: int) -> list[int]:
    """Ids of a dataset's fields that take part in column lineage."""
    return list(conn.execute(select(tables.fields.c.id).where(tables.fields.c.dataset_id == dataset_id)).scalars())


def _fields(text: str | None) -> list[dict[str, Any]]:
    return _json(text, [])  # stored in the API's shape by ingest


def _run(row: Any) -> dict[str, Any] | None:
    if row.run_uuid is None:
        return None
    duration = None
    if row.started_at is not None and row.ended_at is not None:
        duration = int((row.ended_at - row.started_at).total_seconds() * 1000)
    return {
        "id": row.run_uuid,
        "state": row.state,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "startedAt": iso(row.started_at),
        "endedAt": iso(row.ended_at),
        "nominalStartTime": iso(row.nominal_start_time),
        "nominalEndTime": iso(row.nominal_end_time),
        "durationMs": duration,
        "parentRunId": row.parent_run_uuid,
    }


_RUN_COLUMNS = [
    tables.runs.c.run_uuid,
    tables.runs.c.state,
    tables.runs.c.created_at.label("run_created_at"),
    tables.runs.c.updated_at.label("run_updated_at"),
    tables.runs.c.started_at,
    tables.runs.c.ended_at,
    tables.runs.c.nominal_start_time,
    tables.runs.c.nominal_end_time,
    tables.runs.c.parent_run_uuid,
]


class _RunView:
    """A row with run columns under their plain names (they are labelled apart from the node's)."""

    def __init__(self, row: Any) -> None:
        self.run_uuid = row.run_uuid
        self.state = row.state
        self.created_at = row.run_created_at
        self.updated_at = row.run_updated_at
        self.started_at = row.started_at
        self.ended_at = row.ended_at
        self.nominal_start_time = row.nominal_start_time
        self.nominal_end_time = row.nominal_end_time
        self.parent_run_uuid = row.parent_run_uuid


def _details_query(with_facets: bool) -> Any:
    n, d, j, r = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c
    columns = [n.id, n.kind, n.namespace, n.name, n.created_at, n.updated_at, d.fields, d.schema_time, *_RUN_COLUMNS]
    if with_facets:
        columns += [d.facets.label("dataset_facets"), j.facets.label("job_facets")]
    return (
        select(*columns)
        .select_from(tables.nodes)
        .outerjoin(tables.datasets, d.node_id == n.id)
        .outerjoin(tables.jobs, j.node_id == n.id)
        .outerjoin(tables.runs, r.run_uuid == j.latest_run_uuid)
    )


def _node_data(row: Any, with_facets: bool) -> dict[str, Any]:
    base = {
        "id": {"namespace": row.namespace, "name": row.name},
        "name": row.name,
        "namespace": row.namespace,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
    }
    if row.kind == "dataset":
        base.update(
            type="DB_TABLE",
            physicalName=row.name,
            sourceName=row.namespace,
            fields=_fields(row.fields),
            lastModifiedAt=iso(row.schema_time),
            tags=[],
            description=None,
        )
        if with_facets:
            base["facets"] = _json(row.dataset_facets, {})
    else:
        base.update(type="BATCH", simpleName=row.name, latestRun=_run(_RunView(row)), inputs=[], outputs=[])
        if with_facets:
            base["facets"] = _json(row.job_facets, {})
    return base


def node_details(conn: Connection, ids: list[int], with_facets: bool = False) -> dict[int, tuple[str, dict[str, Any]]]:
    """``id → (kind, data)`` for each node, ``data`` shaped like Marquez's graph node data.

    Jobs get their ``inputs``/``outputs`` (all of them, not only those in ``ids``).
    """
    found: dict[int, tuple[str, dict[str, Any]]] = {}
    query = _details_query(with_facets)
    for start in range(0, len(ids), CHUNK):
        for row in conn.execute(query.where(tables.nodes.c.id.in_(ids[start : start + CHUNK]))):
            found[row.id] = (row.kind, _node_data(row, with_facets))
    jobs = [node for node, (kind, _) in found.items() if kind == "job"]
    if jobs:
        _attach_io(conn, jobs, found)
    if with_facets:
        _attach_symlinks(conn, [node for node, (kind, _) in found.items() if kind == "dataset"], found)
    return found


def _attach_symlinks(conn: Connection, datasets: list[int], found: dict[int, tuple[str, dict[str, Any]]]) -> None:
    s = tables.symlinks.c
    for node in datasets:
        found[node][1]["symlinks"] = []
    for start in range(0, len(datasets), CHUNK):
        query = (
            select(s.dataset_id, s.namespace, s.name, s.type)
            .where(s.dataset_id.in_(datasets[start : start + CHUNK]))
            .order_by(s.namespace, s.name)
        )
        for node, namespace, name, kind in conn.execute(query):
            found[node][1]["symlinks"].append({"namespace": namespace, "name": name, "type": kind})


def _attach_io(conn: Connection, jobs: list[int], found: dict[int, tuple[str, dict[str, Any]]]) -> None:
    e, n = tables.edges.c, tables.nodes.c
    links: list[tuple[int, int, str]] = []
    for start in range(0, len(jobs), CHUNK):
        chunk = jobs[start : start + CHUNK]
        links += [
            (job, ds, "inputs")
            for ds, job in conn.execute(select(e.origin_id, e.destination_id).where(e.destination_id.in_(chunk)))
        ]
        links += [
            (job, ds, "outputs")
            for job, ds in conn.execute(select(e.origin_id, e.destination_id).where(e.origin_id.in_(chunk)))
        ]
    names = {node: (data["namespace"], data["name"]) for node, (_, data) in found.items()}
    missing = list({ds for _, ds, _ in links if ds not in names})
    for start in range(0, len(missing), CHUNK):
        query = select(n.id, n.namespace, n.name).where(n.id.in_(missing[start : start + CHUNK]))
        names.update((node, (ns, name)) for node, ns, name in conn.execute(query))
    for job, ds, key in sorted(links, key=lambda link: names[link[1]]):
        namespace, name = names[ds]
        found[job][1][key].append({"namespace": namespace, "name": name})


def subgraph(conn: Connection, picked: Any) -> tuple[dict[int, dict[str, Any]], list[tuple[int, int]]]:
    """Graph data of the nodes a walk picked and every edge among them, in one statement.

    ``picked`` selects ``(node_id, depth)`` (see :func:`..graph.nearest_nodes`). Returns ``id → node`` in
    Marquez's graph shape (``id``, ``type``, ``data``, empty ``inEdges``/``outEdges``), nearest first,
    and the ``(origin, destination)`` edges.
    """
    n, d, j, r, e = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c, tables.edges.c
    chosen = picked.cte("picked")
    node_rows = (
        select(
            literal("n").label("row"),
            chosen.c.node_id.label("a"),
            chosen.c.depth.label("b"),
            n.kind,
            n.namespace,
            n.name,
            iso_utc(n.updated_at).label("updated_at"),
            d.fields,
            r.run_uuid,
            r.state,
            iso_utc(r.started_at).label("started_at"),
            iso_utc(r.ended_at).label("ended_at"),
        )
        .join_from(chosen, tables.nodes, n.id == chosen.c.node_id)
        .outerjoin(tables.datasets, d.node_id == n.id)
        .outerjoin(tables.jobs, j.node_id == n.id)
        .outerjoin(tables.runs, r.run_uuid == j.latest_run_uuid)
    )
    origin, destination = chosen.alias("origin"), chosen.alias("destination")
    blank = [null() for _ in range(9)]
    edge_rows = (
        select(literal("e"), e.origin_id, e.destination_id, *blank)
        .join_from(tables.edges, origin, origin.c.node_id == e.origin_id)
        .join(destination, destination.c.node_id == e.destination_id)
    )
    # Every column is already an int or text: read the driver's tuples as they are (thousands of rows).
    result = conn.execute(union_all(node_rows, edge_rows))
    rows = result.cursor.fetchall()
    result.close()
    nodes = {
        row[1]: _graph_node(row)
        for row in sorted((row for row in rows if row[0] == "n"), key=lambda row: (row[2], row[1]))
    }
    return nodes, [(row[1], row[2]) for row in rows if row[0] == "e"]


def _graph_node(row: Any) -> dict[str, Any]:
    _, _, _, kind, namespace, name, updated_at, fields, run_uuid, state, started_at, ended_at = row
    data: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name},
        "name": name,
        "namespace": namespace,
        "updatedAt": updated_at,
    }
    if kind == "dataset":
        data["type"] = "DB_TABLE"
        data["fields"] = json.loads(fields) if fields else []
        return {"id": f"dataset:{namespace}:{name}", "type": "DATASET", "data": data, "inEdges": [], "outEdges": []}
    data["type"] = "BATCH"
    data["simpleName"] = name
    data["latestRun"] = (
        {"id": run_uuid, "state": state, "startedAt": started_at, "endedAt": ended_at} if run_uuid else None
    )
    return {"id": f"job:{namespace}:{name}", "type": "JOB", "data": data, "inEdges": [], "outEdges": []}


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
    details = node_details(conn, ids, with_facets=True)
    return [dict(details[node][1], nodeId=_node_id(kind, details[node][1])) for node in ids], total


def _node_id(kind: str, data: dict[str, Any]) -> str:
    return nodeids.node_id(kind, data["namespace"], data["name"])


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
    data = _run(row)
    assert data is not None
    data.update(
        jobNamespace=row.namespace,
        jobName=row.name,
        facets=_json(row.facets, {}),
    )
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


def column_details(conn: Connection, field_ids: list[int]) -> dict[int, tuple[int, str, str, str]]:
    """``field id → (dataset id, namespace, dataset name, field name)``."""
    f, n = tables.fields.c, tables.nodes.c
    found: dict[int, tuple[int, str, str, str]] = {}
    for start in range(0, len(field_ids), CHUNK):
        query = (
            select(f.id, f.dataset_id, n.namespace, n.name, f.name.label("field"))
            .join_from(tables.fields, tables.nodes, n.id == f.dataset_id)
            .where(f.id.in_(field_ids[start : start + CHUNK]))
        )
        found.update((r.id, (r.dataset_id, r.namespace, r.name, r.field)) for r in conn.execute(query))
    return found


def column_transformations(conn: Connection, pairs: list[tuple[int, int]]) -> dict[tuple[int, int], str | None]:
    """The stored transformation (JSON text) of each ``(source field, target field)`` edge."""
    c = tables.column_edges.c
    found: dict[tuple[int, int], str | None] = {}
    for start in range(0, len(pairs), 500):
        chunk = pairs[start : start + 500]
        condition = or_(*(and_(c.source_field_id == s, c.target_field_id == t) for s, t in chunk))
        found.update(
            ((s, t), x)
            for s, t, x in conn.execute(select(c.source_field_id, c.target_field_id, c.transformation).where(condition))
        )
    return found


def dataset_fields(conn: Connection, dataset_ids: list[int]) -> dict[int, dict[str, str | None]]:
    """``dataset id → {field name: type}`` from the latest schema."""
    d = tables.datasets.c
    found: dict[int, dict[str, str | None]] = {}
    for start in range(0, len(dataset_ids), CHUNK):
        query = select(d.node_id, d.fields).where(d.node_id.in_(dataset_ids[start : start + CHUNK]))
        for node, text in conn.execute(query):
            found[node] = {f["name"]: f.get("type") for f in _json(text, [])}
    return found
