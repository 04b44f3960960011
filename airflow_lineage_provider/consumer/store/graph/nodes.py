"""Jobs and datasets: lookup by Marquez node id, and their full details in Marquez's shape.

A node's ``type`` is what its facets say (:mod:`.node_types`: ``jobType``, ``datasetType``,
``dataSource``), Marquez's ``BATCH`` / ``DB_TABLE`` when they say nothing.

``visible`` (see :mod:`.visibility`) limits what a namespace-limited key gets: a hidden node is not
found, and details leave out inputs, outputs and symlinks in hidden namespaces, and facet objects that
name one. None shows everything, with the same statements as before.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.store.graph import dataset_aliases
from airflow_lineage_provider.consumer.store.graph.node_types import dataset_type, job_type
from airflow_lineage_provider.consumer.store.read.text import iso, loads
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in, scrub
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import field_key, node_key

#: Ids per ``IN (...)`` list (SQLite accepts 32,766 parameters per statement).
CHUNK = 5000


def find_node(conn: Connection, kind: str, rest: str, visible: Visible = None) -> tuple[int, str, str] | None:
    """``(id, namespace, name)`` of the job or dataset whose id is ``<kind>:<rest>``, or None.

    When several splits of ``rest`` name existing nodes, the one with the longest namespace wins; with
    ``visible``, only nodes in those namespaces are candidates (a hidden node is None, as a missing one).
    """
    candidates = [node_key(kind, ns, name) for ns, name in nodeids.splits(rest, 2)]
    if not candidates:
        return None
    n = tables.nodes.c
    found = conn.execute(select(n.id, n.namespace, n.name).where(n.node_key.in_(candidates))).all()
    if visible is not None:
        found = [row for row in found if row[1] in visible]
    if not found:
        return None
    node_id, namespace, name = max(found, key=lambda row: len(row[1]))
    return node_id, namespace, name


def find_field(
    conn: Connection, rest: str, visible: Visible = None, grouped: bool = False
) -> tuple[int, str, str, str] | None:
    """``(field_id, namespace, dataset, field)`` for ``datasetField:<rest>``, or None (also when hidden).

    Two statements whatever the id: every split's dataset looked up at once, then every candidate field
    (:func:`nodeids.parse` bounds the splits). The first split, in :func:`nodeids.splits` order, that names
    a stored field wins. ``grouped`` (a store with datasets known under several names, :mod:`.identity`):
    when no split names a stored field, the field of that name of another (visible) name of a split's dataset
    is found instead, by a third statement (Spark's columns of a table Airflow names by the metastore).
    """
    splits = [(namespace, name, field) for namespace, name, field in nodeids.splits(rest, 3)]
    keys = {node_key("dataset", namespace, name): (namespace, name) for namespace, name, _ in splits}
    if not keys:
        return None
    n = tables.nodes.c
    rows = conn.execute(select(n.id, n.namespace, n.name).where(n.node_key.in_(list(keys)))).all()
    datasets = {(namespace, name): node for node, namespace, name in rows if visible is None or namespace in visible}
    candidates = [
        (field_key(datasets[(namespace, name)], field), namespace, name, field)
        for namespace, name, field in splits
        if (namespace, name) in datasets
    ]
    if not candidates:
        return None
    f = tables.fields.c
    query = select(f.field_key, f.id).where(f.field_key.in_([key for key, *_ in candidates]))
    stored = {key: field_id for key, field_id in conn.execute(query)}
    for key, namespace, name, field in candidates:
        if key in stored:
            return stored[key], namespace, name, field
    if grouped:
        return _field_of_another_name(conn, datasets, splits, visible)
    return None


def _field_of_another_name(
    conn: Connection, datasets: dict[tuple[str, str], int], splits: list[tuple[str, str, str]], visible: Visible
) -> tuple[int, str, str, str] | None:
    """The first split's field stored under another (visible) name of its dataset, as :func:`find_field`."""
    f, m, n = tables.fields.c, tables.dataset_members.c, tables.nodes.c
    wanted = [
        (datasets[(namespace, name)], field) for namespace, name, field in splits if (namespace, name) in datasets
    ]
    query = (
        select(m.node_id, f.name, func.min(f.id))
        .join_from(tables.dataset_members, tables.fields, f.dataset_id == m.member_id)
        .where(
            m.node_id.in_(sorted({dataset for dataset, _ in wanted})),
            f.name.in_(sorted({field for _, field in wanted})),
        )
        .group_by(m.node_id, f.name)
    )
    if visible is not None:
        query = query.join(tables.nodes, n.id == m.member_id)
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    stored = {(dataset, field): field_id for dataset, field, field_id in conn.execute(query)}
    for namespace, name, field in splits:
        found = stored.get((datasets.get((namespace, name)), field))
        if found is not None:
            return found, namespace, name, field
    return None


def representative(group: dataset_aliases.Group, visible: Visible) -> int | None:
    """The node a dataset in ``group`` is shown as: the canonical name, or for a key seeing ``visible`` only and
    not it, the first visible name by namespace and name (as listings show it, :mod:`.dataset_aliases`); None
    when no name is visible."""
    shown = group.shown(visible)
    return shown[0].id if shown else None


def run_data(row: Any, created_at: Any, updated_at: Any) -> dict[str, Any] | None:
    """A run in Marquez's shape from a row with the ``lineage_runs`` columns (None without a run)."""
    if row.run_uuid is None:
        return None
    duration = None
    if row.started_at is not None and row.ended_at is not None:
        duration = int((row.ended_at - row.started_at).total_seconds() * 1000)
    return {
        "id": row.run_uuid,
        "state": row.state,
        "createdAt": iso(created_at),
        "updatedAt": iso(updated_at),
        "startedAt": iso(row.started_at),
        "endedAt": iso(row.ended_at),
        "nominalStartTime": iso(row.nominal_start_time),
        "nominalEndTime": iso(row.nominal_end_time),
        "durationMs": duration,
        "parentRunId": row.parent_run_uuid,
    }


def _details_query() -> Any:
    n, d, j, r = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c
    return (
        select(
            n.id,
            n.kind,
            n.namespace,
            n.name,
            n.created_at,
            n.updated_at,
            d.fields,
            d.schema_time,
            d.facets.label("dataset_facets"),
            j.facets.label("job_facets"),
            r.run_uuid,
            r.state,
            r.created_at.label("run_created_at"),
            r.updated_at.label("run_updated_at"),
            r.started_at,
            r.ended_at,
            r.nominal_start_time,
            r.nominal_end_time,
            r.parent_run_uuid,
        )
        .select_from(tables.nodes)
        .outerjoin(tables.datasets, d.node_id == n.id)
        .outerjoin(tables.jobs, j.node_id == n.id)
        .outerjoin(tables.runs, r.run_uuid == j.latest_run_uuid)
    )


def _node_data(row: Any, visible: Visible = None) -> dict[str, Any]:
    data = {
        "id": {"namespace": row.namespace, "name": row.name},
        "name": row.name,
        "namespace": row.namespace,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "nodeId": nodeids.node_id(row.kind, row.namespace, row.name),
    }
    if row.kind == "dataset":
        facets = loads(row.dataset_facets, {})
        data.update(
            type=dataset_type(facets, row.namespace),
            physicalName=row.name,
            sourceName=row.namespace,
            fields=loads(row.fields, []),
            lastModifiedAt=iso(row.schema_time),
            tags=[],
            description=None,
            facets=facets if visible is None else scrub(facets, visible),
            symlinks=[],
        )
    else:
        facets = loads(row.job_facets, {})
        latest = run_data(row, row.run_created_at, row.run_updated_at)
        data.update(type=job_type(facets), simpleName=row.name, latestRun=latest, inputs=[], outputs=[])
        data["facets"] = facets if visible is None else scrub(facets, visible)
    return data


def visible_facets(text: str | None, visible: Visible) -> dict[str, Any]:
    """Stored facets (JSON text) decoded, without the objects naming a hidden namespace when ``visible``."""
    facets = loads(text, {})
    return facets if visible is None else scrub(facets, visible)


def node_details(conn: Connection, ids: list[int], visible: Visible = None) -> dict[int, dict[str, Any]]:
    """``id → data`` for each node in Marquez's shape, with facets; jobs with all their inputs and outputs,
    datasets with their symlinks (with ``visible``: only those in visible namespaces, see the module)."""
    found: dict[int, dict[str, Any]] = {}
    kinds: dict[str, list[int]] = {"job": [], "dataset": []}
    query = _details_query()
    visible = None if visible is None else frozenset(visible)
    for start in range(0, len(ids), CHUNK):
        for row in conn.execute(query.where(tables.nodes.c.id.in_(ids[start : start + CHUNK]))):
            found[row.id] = _node_data(row, visible)
            kinds[row.kind].append(row.id)
    _attach_io(conn, kinds["job"], found, visible)
    _attach_symlinks(conn, kinds["dataset"], found, visible)
    return found


def _attach_symlinks(
    conn: Connection, datasets: list[int], found: dict[int, dict[str, Any]], visible: Visible = None
) -> None:
    s = tables.symlinks.c
    for start in range(0, len(datasets), CHUNK):
        query = (
            select(s.dataset_id, s.namespace, s.name, s.type)
            .where(s.dataset_id.in_(datasets[start : start + CHUNK]), s.via == "symlink")
            .order_by(s.namespace, s.name)
        )
        for node, namespace, name, kind in conn.execute(query):
            if visible is not None and namespace not in visible:
                continue
            found[node]["symlinks"].append({"namespace": namespace, "name": name, "type": kind})


def _attach_io(conn: Connection, jobs: list[int], found: dict[int, dict[str, Any]], visible: Visible = None) -> None:
    e, n = tables.edges.c, tables.nodes.c
    links: list[tuple[int, int, str]] = []
    for start in range(0, len(jobs), CHUNK):
        chunk = jobs[start : start + CHUNK]
        inputs = select(e.origin_id, e.destination_id).where(e.destination_id.in_(chunk))
        outputs = select(e.origin_id, e.destination_id).where(e.origin_id.in_(chunk))
        links += [(job, ds, "inputs") for ds, job in conn.execute(inputs)]
        links += [(job, ds, "outputs") for job, ds in conn.execute(outputs)]
    names = {node: (data["namespace"], data["name"]) for node, data in found.items()}
    missing = list({ds for _, ds, _ in links if ds not in names})
    for start in range(0, len(missing), CHUNK):
        query = select(n.id, n.namespace, n.name).where(n.id.in_(missing[start : start + CHUNK]))
        names.update((node, (ns, name)) for node, ns, name in conn.execute(query))
    links = [link for link in links if link[1] in names]  # a dataset gone since its edge was read: left out
    for job, ds, key in sorted(links, key=lambda link: names[link[1]]):
        namespace, name = names[ds]
        if visible is not None and namespace not in visible:
            continue
        found[job][key].append({"namespace": namespace, "name": name})
