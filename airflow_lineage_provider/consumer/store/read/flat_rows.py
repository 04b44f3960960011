"""The store as flat rows keyed by names: one row per job, dataset and run, and the lineage edges between names.

What Feast's OpenLineage consumer answers (``consumer/feast/``) is read from here: each row names its node by
namespace and name (no node ids), carries its latest facets as JSON text and its times as epoch milliseconds.
Edges are Feast's five kinds, between names: ``input`` (dataset → job) and ``output`` (job → dataset) from the
graph's edges, ``derived`` (input → output dataset through a job, from the io groups RunEvents were seen with),
``parent`` (the job a run's ``parent`` facet names → the run's job) and ``symlink`` (both ways between a dataset
and each name its ``symlinks`` facet gives it).

``visible`` (:mod:`.visibility`; None: every namespace) keeps rows in visible namespaces and edges whose two ends
are both visible.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from airflow_lineage_provider.consumer.store.read.json_paths import json_member, member_value
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in, scrub
from airflow_lineage_provider.consumer.store.schema import tables

Row = dict[str, Any]

#: Feast's custom dataset facets and the registry object type each names.
_FEAST_FACETS = (
    ("feast_onlineStore", "onlineStore"),
    ("feast_featureView", "featureView"),
    ("feast_featureService", "featureService"),
    ("feast_entity", "entity"),
    ("feast_dataSource", "dataSource"),
    ("feast_savedDataset", "savedDataset"),
)


def epoch_ms(value: datetime | None) -> int | None:
    """A stored time as epoch milliseconds (Feast's time columns)."""
    return None if value is None else int(value.timestamp() * 1000)


def _facets(text: str | None, visible: Visible = None) -> dict[str, Any]:
    """Stored facets decoded; with ``visible``, without the objects that name a hidden namespace."""
    value = json.loads(text) if text else {}
    if not isinstance(value, dict):
        return {}
    return value if visible is None else scrub(value, visible)


def _member(facets: dict[str, Any], facet: str, key: str) -> Any:
    value = facets.get(facet)
    return value.get(key) if isinstance(value, dict) else None


def _text(facets: dict[str, Any]) -> str | None:
    return json.dumps(facets) if facets else None


def feast_project(namespace: str) -> str:
    """The Feast project a namespace stands for, as Feast reads it without a namespace mapping: the authority's
    last path segment of ``scheme://authority/path``, else the last segment of ``a/b``, else the namespace."""
    if "://" in namespace:
        rest = namespace.split("://", 1)[1]
        return rest.split("/")[-1] if "/" in rest else rest
    return namespace.split("/")[-1] if "/" in namespace else namespace


def feast_object(namespace: str, name: str, facets: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """The Feast registry object a dataset is (type, name, project), from Feast's own facets or its naming of
    online stores and request sources; all None for any other dataset."""
    project = feast_project(namespace)
    for facet, kind in _FEAST_FACETS:
        if facet in facets:
            value = facets.get(facet) or {}
            named = (value.get("name") or value.get("feature_view")) if isinstance(value, dict) else None
            return kind, named or name, project
    if name.startswith("online_store_"):
        return "onlineStore", name[len("online_store_") :], project
    if name.startswith("request_source_"):
        return "dataSource", name, project
    return None, None, None


def _visible_nodes(conn: Connection, kind: str, visible: Visible, namespace: str | None) -> Any:
    n = tables.nodes.c
    query = select(tables.nodes).where(n.kind == kind)
    if namespace is not None:
        query = query.where(n.namespace == namespace)
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    return query


def _latest_producers(conn: Connection, ids: list[int]) -> dict[int, str]:
    """Each node's producer: the one seen last (of those that named it)."""
    if not ids:
        return {}
    p = tables.node_producers.c
    rows = conn.execute(select(p.node_id, p.producer, p.first_seen).where(p.node_id.in_(ids))).all()
    latest: dict[int, tuple[datetime, str]] = {}
    for node, producer, seen in rows:
        if node not in latest or seen >= latest[node][0]:
            latest[node] = (seen, producer)
    return {node: producer for node, (_, producer) in latest.items()}


def _job_producer(job_id: Any, latest_run: Any) -> Any:
    """SQL: a job's producer, that of its latest run's latest event, else of its declaration (its latest
    JobEvent); both read through indexed keys, one row each."""
    e, d = tables.events.c, tables.job_declarations.c
    of_run = (
        select(e.producer)
        .where(e.run_uuid == latest_run)
        .order_by(e.event_time.desc(), e.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    of_declaration = (
        select(e.producer)
        .join_from(tables.events, tables.job_declarations, d.event_key == e.event_key)
        .where(d.job_id == job_id)
        .limit(1)
        .scalar_subquery()
    )
    return func.coalesce(of_run, of_declaration)


def job_rows(conn: Connection, visible: Visible = None, namespace: str | None = None) -> list[Row]:
    """Every visible job (of ``namespace`` when given), most recently updated first."""
    j = tables.jobs.c
    nodes = _visible_nodes(conn, "job", visible, namespace).subquery()
    query = (
        select(nodes, j.facets, j.latest_run_uuid, _job_producer(nodes.c.id, j.latest_run_uuid).label("producer"))
        .join_from(nodes, tables.jobs, j.node_id == nodes.c.id, isouter=True)
        .order_by(nodes.c.updated_at.desc(), nodes.c.namespace, nodes.c.name)
    )
    rows = conn.execute(query).all()
    found = []
    for row in rows:
        facets = _facets(row.facets, visible)
        kind = _member(facets, "feast_jobKind", "kind")
        job_type = facets.get("jobType")
        if not kind and isinstance(job_type, dict):
            kind = job_type.get("processingType", job_type.get("integration"))
        found.append(
            {
                "job_namespace": row.namespace,
                "job_name": row.name,
                "job_type": kind,
                "producer": row.producer,
                "description": _member(facets, "documentation", "description"),
                "facets_json": _text(facets),
                "latest_run_id": row.latest_run_uuid,
                "updated_at": epoch_ms(row.updated_at),
            }
        )
    return found


def _completed_outputs(conn: Connection, ids: list[int]) -> dict[int, int]:
    """For each dataset, the completed runs that wrote it (Feast's ``current_version``)."""
    if not ids:
        return {}
    io, r = tables.run_io.c, tables.runs.c
    query = (
        select(io.dataset_id, func.count())
        .join_from(tables.run_io, tables.runs, r.run_uuid == io.run_uuid)
        .where(io.direction == "output", r.state == "COMPLETED", io.dataset_id.in_(ids))
        .group_by(io.dataset_id)
    )
    return {node: count for node, count in conn.execute(query)}


def dataset_rows(conn: Connection, visible: Visible = None, namespace: str | None = None) -> list[Row]:
    """Every visible dataset name (of ``namespace`` when given), most recently updated first."""
    d = tables.datasets.c
    nodes = _visible_nodes(conn, "dataset", visible, namespace).subquery()
    query = (
        select(nodes, d.facets)
        .join_from(nodes, tables.datasets, d.node_id == nodes.c.id, isouter=True)
        .order_by(nodes.c.updated_at.desc(), nodes.c.namespace, nodes.c.name)
    )
    rows = conn.execute(query).all()
    ids = [row.id for row in rows]
    producers, versions = _latest_producers(conn, ids), _completed_outputs(conn, ids)
    found = []
    for row in rows:
        facets = _facets(row.facets, visible)
        owners = _member(facets, "ownership", "owners")
        owner = owners[0] if isinstance(owners, list) and owners and isinstance(owners[0], dict) else {}
        kind, name, project = feast_object(row.namespace, row.name, facets)
        schema = facets.get("schema")
        found.append(
            {
                "dataset_namespace": row.namespace,
                "dataset_name": row.name,
                "source_type": _member(facets, "dataSource", "name"),
                "producer": producers.get(row.id),
                "description": _member(facets, "documentation", "description"),
                "schema_json": None if schema is None else json.dumps(schema),
                "facets_json": _text(facets),
                "feast_object_type": kind,
                "feast_object_name": name,
                "feast_project": project,
                "owner_name": owner.get("name"),
                "owner_type": owner.get("type"),
                "lifecycle_state": _member(facets, "lifecycleStateChange", "lifecycleStateChange"),
                "current_version": versions.get(row.id),
                "updated_at": epoch_ms(row.updated_at),
            }
        )
    return found


def namespaces(conn: Connection, visible: Visible = None) -> list[str]:
    """The namespaces of the visible jobs and datasets, sorted."""
    ns = tables.namespaces.c  # one row per namespace (:mod:`.write.namespaces`)
    query = select(ns.namespace)
    if visible is not None:
        query = query.where(namespace_in(ns.namespace, visible, conn.dialect.name))
    return sorted(name for name in conn.execute(query).scalars() if name)


#: A run's state as stored (Marquez's names) → the OpenLineage event type Feast shows; ``RUNNING`` is read from
#: the run's latest event (``START`` or ``RUNNING``).
EVENT_TYPE_OF_STATE = {"NEW": "OTHER", "COMPLETED": "COMPLETE", "FAILED": "FAIL", "ABORTED": "ABORT"}


def _running_types(conn: Connection, runs: list[str]) -> dict[str, str]:
    """The event type of each run's latest event (for runs still running: ``START`` or ``RUNNING``)."""
    if not runs:
        return {}
    e = tables.events.c
    rank = func.row_number().over(partition_by=e.run_uuid, order_by=(e.event_time.desc(), e.id.desc()))
    ranked = select(e.run_uuid, e.event_type, rank.label("rank")).where(e.run_uuid.in_(runs)).subquery()
    query = select(ranked.c.run_uuid, ranked.c.event_type).where(ranked.c.rank == 1)
    return {run: kind for run, kind in conn.execute(query)}


def _parent_ids(facets: dict[str, Any]) -> tuple[str | None, str | None]:
    """The parent run and the root run (the parent when no root is named) a run's ``parent`` facet names; a run
    whose job was scrubbed from the facets (a hidden namespace's) is not named."""
    parent = facets.get("parent") or facets.get("parentRun")
    if not isinstance(parent, dict) or not isinstance(parent.get("job"), dict):
        return None, None
    parent_run = _member(parent, "run", "runId")
    root = parent.get("root")
    root_run = _member(root, "run", "runId") if isinstance(root, dict) and isinstance(root.get("job"), dict) else None
    return parent_run, root_run or parent_run


def run_rows(
    conn: Connection,
    visible: Visible = None,
    job_namespace: str | None = None,
    job_name: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    run_id: str | None = None,
    run_ids: list[str] | None = None,
) -> list[Row]:
    """Runs of visible jobs (of one job namespace and/or name, or the runs named, when given), most recently
    updated first."""
    r, n = tables.runs.c, tables.nodes.c
    query = select(
        r.run_uuid, r.state, r.started_at, r.ended_at, r.facets, r.updated_at, n.namespace, n.name
    ).join_from(tables.runs, tables.nodes, n.id == r.job_id)
    if job_namespace is not None:
        query = query.where(n.namespace == job_namespace)
    if job_name is not None:
        query = query.where(n.name == job_name)
    if run_id is not None:
        query = query.where(r.run_uuid == run_id.lower())
    if run_ids is not None:
        query = query.where(r.run_uuid.in_(run_ids))
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    query = query.order_by(r.updated_at.desc(), r.run_uuid).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    rows = conn.execute(query).all()
    running = _running_types(conn, [row.run_uuid for row in rows if row.state == "RUNNING"])
    found = []
    for row in rows:
        facets = _facets(row.facets, visible)
        parent, root = _parent_ids(facets)
        found.append(
            {
                "run_id": row.run_uuid,
                "job_namespace": row.namespace,
                "job_name": row.name,
                "state": EVENT_TYPE_OF_STATE.get(row.state) or running.get(row.run_uuid, "START"),
                "started_at": epoch_ms(row.started_at),
                "ended_at": epoch_ms(row.ended_at),
                "facets_json": _text(facets),
                "parent_run_id": parent,
                "root_run_id": root,
                "updated_at": epoch_ms(row.updated_at),
            }
        )
    return found


def received_at(conn: Connection, keys: Iterable[str]) -> dict[str, int | None]:
    """When each stored event (by event key) was received, in epoch milliseconds."""
    wanted = list(keys)
    if not wanted:
        return {}
    e = tables.events.c
    rows = conn.execute(select(e.event_key, e.received_at).where(e.event_key.in_(wanted))).all()
    return {key: epoch_ms(at) for key, at in rows}


def _edge(source: tuple[str, str, str], target: tuple[str, str, str], kind: str, updated: datetime | None) -> Row:
    return {
        "source_type": source[0],
        "source_namespace": source[1],
        "source_name": source[2],
        "target_type": target[0],
        "target_namespace": target[1],
        "target_name": target[2],
        "edge_type": kind,
        "updated_at": epoch_ms(updated),
    }


def _graph_edges(conn: Connection) -> list[Row]:
    origin, destination = tables.nodes.alias("origin").c, tables.nodes.alias("destination").c
    e = tables.edges.c
    query = (
        select(origin.kind, origin.namespace, origin.name, destination.kind, destination.namespace, destination.name)
        .add_columns(e.last_seen)
        .join_from(tables.edges, origin.kind.table, origin.id == e.origin_id)
        .join(destination.kind.table, destination.id == e.destination_id)
    )
    found = []
    for o_kind, o_ns, o_name, d_kind, d_ns, d_name, seen in conn.execute(query):
        kind = "input" if o_kind == "dataset" else "output"
        found.append(_edge((o_kind, o_ns, o_name), (d_kind, d_ns, d_name), kind, seen))
    return found


def _derived_edges(conn: Connection) -> list[Row]:
    """Input → output dataset pairs of the io groups a RunEvent was seen with (a declaration's are not derived)."""
    g = tables.io_groups.c
    inputs, outputs = tables.io_members.alias("inputs"), tables.io_members.alias("outputs")
    source, target = tables.nodes.alias("source"), tables.nodes.alias("target")
    query = (
        select(source.c.namespace, source.c.name, target.c.namespace, target.c.name, func.max(g.last_seen))
        .join_from(tables.io_groups, inputs, and_(inputs.c.group_id == g.id, inputs.c.direction == "input"))
        .join(outputs, and_(outputs.c.group_id == g.id, outputs.c.direction == "output"))
        .join(source, source.c.id == inputs.c.dataset_id)
        .join(target, target.c.id == outputs.c.dataset_id)
        .where(g.observed_at.is_not(None))
        .group_by(source.c.namespace, source.c.name, target.c.namespace, target.c.name)
    )
    return [
        _edge(("dataset", s_ns, s_name), ("dataset", t_ns, t_name), "derived", seen)
        for s_ns, s_name, t_ns, t_name, seen in conn.execute(query)
    ]


def _parent_edges(conn: Connection) -> list[Row]:
    """The job a run's ``parent`` facet names → the run's job, once per pair (the latest run's time). The database
    reads the two names from each run with a parent and sends each pair once."""
    r, n, dialect = tables.runs.c, tables.nodes.c, conn.dialect.name
    parent_namespace = json_member(r.facets, ("parent", "job", "namespace"), dialect)
    parent_name = json_member(r.facets, ("parent", "job", "name"), dialect)
    query = (
        select(parent_namespace, parent_name, n.namespace, n.name, func.max(r.updated_at))
        .join_from(tables.runs, tables.nodes, n.id == r.job_id)
        .where(r.parent_run_uuid.is_not(None))
        .group_by(parent_namespace, parent_name, n.namespace, n.name)
    )
    edges = []
    for namespace_text, name_text, namespace, name, updated in conn.execute(query):
        parent = (member_value(namespace_text), member_value(name_text))
        if all(isinstance(part, str) and part for part in parent) and parent != (namespace, name):
            edges.append(_edge(("job", *parent), ("job", namespace, name), "parent", updated))
    return edges


def symlink_rows(conn: Connection, visible: Visible = None) -> list[Row]:
    """Each dataset's other names (its ``symlinks`` facet), as Feast lists them: ``link_type`` is the
    identifier's type."""
    s, n = tables.symlinks.c, tables.nodes.c
    query = (
        select(n.namespace, n.name, s.namespace.label("linked_namespace"), s.name.label("linked_name"), s.type)
        .add_columns(n.updated_at)
        .join_from(tables.symlinks, tables.nodes, n.id == s.dataset_id)
        .where(s.via == "symlink")
    )
    found = []
    for namespace, name, linked_namespace, linked_name, kind, updated in conn.execute(query):
        if (namespace, name) == (linked_namespace, linked_name):
            continue
        if visible is not None and not {namespace, linked_namespace} <= set(visible):
            continue
        found.append(
            {
                "dataset_namespace": namespace,
                "dataset_name": name,
                "linked_namespace": linked_namespace,
                "linked_name": linked_name,
                "link_type": kind or "symlink",
                "updated_at": epoch_ms(updated),
            }
        )
    return found


def lineage_edges(conn: Connection, visible: Visible = None) -> list[Row]:
    """Every edge between visible names: input, output, derived, parent, and both directions of each symlink."""
    found = _graph_edges(conn) + _derived_edges(conn) + _parent_edges(conn)
    for link in symlink_rows(conn, visible):
        named = ("dataset", link["dataset_namespace"], link["dataset_name"])
        linked = ("dataset", link["linked_namespace"], link["linked_name"])
        for source, target in ((named, linked), (linked, named)):
            found.append({**_edge(source, target, "symlink", None), "updated_at": link["updated_at"]})
    if visible is None:
        return found
    shown = set(visible)
    return [edge for edge in found if edge["source_namespace"] in shown and edge["target_namespace"] in shown]


def oldest_updates(conn: Connection) -> dict[str, datetime | None]:
    """The oldest update of any run, job and dataset (what a retention check would consider first)."""
    r, n = tables.runs.c, tables.nodes.c
    oldest: dict[str, datetime | None] = {"runs": conn.execute(select(func.min(r.updated_at))).scalar()}
    for kind in ("job", "dataset"):
        oldest[f"{kind}s"] = conn.execute(select(func.min(n.updated_at)).where(n.kind == kind)).scalar()
    return oldest
