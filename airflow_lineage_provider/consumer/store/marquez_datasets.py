"""Marquez's ``Dataset``: one dataset, or a namespace's datasets paged, from what the events said.

Every value comes from the stored events (see docs/marquez-api.md, "Datasets, versions, sources and tags"):

* ``type``: :func:`..marquez_values.dataset_type` of the stored facets (``datasetType``, ``dataSource``, the
  namespace's scheme); ``sourceName``: :func:`.sources.source_of`;
* ``fields``: the latest ``schema`` facet (by event time), each with the tags put on it; a field whose type
  the facet does not say is ``UNKNOWN`` (Marquez's ``FieldType.UNKNOWN``);
* ``facets``: as stored (the facets of the latest event that gave the dataset facets); ``description``: its
  ``documentation`` facet; ``lastLifecycleState``: its ``lifecycleStateChange`` facet; ``deleted``: whether
  that state is ``DROP`` (Marquez marks a dataset deleted on a DROP);
* ``lastModifiedAt``: the end of the latest COMPLETED run that wrote the dataset (Marquez: "last modified by
  a successful run"); ``currentVersion``: the version (:func:`version_id`) of the latest run that wrote it.
  Both are absent while no run wrote it (Marquez serializes without nulls).

A run "wrote" a dataset when one of its events listed it as an output (``lineage_run_io``). The runs are
found from the dataset through the graph's indexes — its incoming edges (``ix_lineage_edges_destination``)
give the jobs that wrote it, their runs (``ix_lineage_runs_job``), each checked against ``lineage_run_io``'s
key — so a page of datasets costs one statement for all of them, whatever the size of the store.

``visible`` (see :mod:`.visibility`): a dataset in a hidden namespace is not found; runs of jobs in hidden
namespaces count for nothing (no version, no ``lastModifiedAt``); facets lose objects naming a hidden namespace.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, and_, func, select

from airflow_lineage_provider.consumer.marquez_values import dataset_type
from airflow_lineage_provider.consumer.store import tables, tags
from airflow_lineage_provider.consumer.store.ingest import node_key
from airflow_lineage_provider.consumer.store.nodes import CHUNK, visible_facets
from airflow_lineage_provider.consumer.store.sources import source_of
from airflow_lineage_provider.consumer.store.text import iso, loads
from airflow_lineage_provider.consumer.store.visibility import Visible, namespace_in

#: The namespace of dataset version UUIDs (``uuid5(VERSIONS, namespace NUL name NUL run id)``).
VERSIONS = uuid.UUID("6f1d5c2e-8a43-5b9e-9c1a-3e7d2b40a8f1")
#: Marquez's word for a field type the schema does not say.
UNKNOWN_TYPE = "UNKNOWN"


def version_id(namespace: str, name: str, run_uuid: str) -> str:
    """The version of dataset ``namespace``/``name`` written by run ``run_uuid``: a UUID 5, the same for every
    event of the run, in every store (see docs/marquez-api.md)."""
    return str(uuid.uuid5(VERSIONS, f"{namespace}\x00{name}\x00{run_uuid.lower()}"))


def _facet_text(facets: dict[str, Any], facet: str, key: str) -> str | None:
    value = facets.get(facet)
    text = value.get(key) if isinstance(value, dict) else None
    return text if isinstance(text, str) and text else None


def description(facets: dict[str, Any]) -> str | None:
    """The ``documentation`` facet's description."""
    return _facet_text(facets, "documentation", "description")


def lifecycle_state(facets: dict[str, Any]) -> str | None:
    """The ``lifecycleStateChange`` facet's state (``CREATE``, ``OVERWRITE``, ``DROP``, ...)."""
    return _facet_text(facets, "lifecycleStateChange", "lifecycleStateChange")


def marquez_fields(fields: list[dict[str, Any]], field_tags: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Stored schema fields (``{name, type, tags, description, fields?}``) in Marquez's shape, without nulls,
    with the tags put on each top-level field."""
    return [_field(item, field_tags.get(item["name"], [])) for item in fields]


def _field(item: dict[str, Any], field_tags: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": item["name"], "type": item.get("type") or UNKNOWN_TYPE, "tags": field_tags}
    if item.get("description"):
        out["description"] = item["description"]
    if item.get("fields"):
        out["fields"] = [_field(sub, []) for sub in item["fields"]]
    return out


def writer_runs(dataset: Any, dialect: str, visible: Visible = None) -> tuple[Any, Any, Any]:
    """The runs that wrote ``dataset`` (a node id or a correlated column): ``(statement, runs, job)``, the
    statement selecting ``runs.run_uuid`` (choose others with ``with_only_columns``) from the ``runs`` alias
    of ``lineage_runs`` joined to the ``job`` alias of ``lineage_nodes``."""
    e, r, io = tables.edges.alias("w_edges"), tables.runs.alias("w_runs"), tables.run_io.alias("w_io")
    job = tables.nodes.alias("w_job")
    query = (
        select(r.c.run_uuid)
        .select_from(e)
        .join(r, r.c.job_id == e.c.origin_id)
        .join(
            io,
            and_(io.c.run_uuid == r.c.run_uuid, io.c.dataset_id == e.c.destination_id, io.c.direction == "output"),
        )
        .join(job, job.c.id == r.c.job_id)
        .where(e.c.destination_id == dataset)
    )
    if visible is not None:
        query = query.where(namespace_in(job.c.namespace, visible, dialect))
    return query, r, job


def _details_query(dialect: str, visible: Visible) -> Any:
    n, d = tables.nodes.c, tables.datasets.c
    writes, r, _job = writer_runs(n.id, dialect, visible)
    last_modified = writes.with_only_columns(func.max(r.c.ended_at)).where(r.c.state == "COMPLETED").scalar_subquery()
    current_run = (
        writes.with_only_columns(r.c.run_uuid)
        .order_by(r.c.created_at.desc(), r.c.run_uuid.desc())
        .limit(1)
        .scalar_subquery()
    )
    return (
        select(
            n.id,
            n.namespace,
            n.name,
            n.created_at,
            n.updated_at,
            d.fields,
            d.facets,
            last_modified.label("last_modified"),
            current_run.label("current_run"),
        )
        .select_from(tables.nodes)
        .outerjoin(tables.datasets, d.node_id == n.id)
    )


def _dataset(
    row: Any, node_tags: list[str], field_tags: dict[str, list[str]], visible: frozenset[str] | None
) -> dict[str, Any]:
    facets = loads(row.facets, {})
    data: dict[str, Any] = {
        "id": {"namespace": row.namespace, "name": row.name},
        "type": dataset_type(facets, row.namespace),
        "name": row.name,
        "physicalName": row.name,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "namespace": row.namespace,
        "sourceName": source_of(facets, row.namespace)[0],
        "fields": marquez_fields(loads(row.fields, []), field_tags),
        "tags": node_tags,
    }
    if row.last_modified is not None:
        data["lastModifiedAt"] = iso(row.last_modified)
    state = lifecycle_state(facets)
    if state is not None:
        data["lastLifecycleState"] = state
    text = description(facets)
    if text is not None:
        data["description"] = text
    data["facets"] = visible_facets(row.facets, visible)
    if row.current_run is not None:
        data["currentVersion"] = version_id(row.namespace, row.name, row.current_run)
    data["deleted"] = state is not None and state.upper() == "DROP"
    return data


def datasets(conn: Connection, ids: list[int], visible: Visible = None) -> dict[int, dict[str, Any]]:
    """``id → Dataset`` (Marquez's shape) for the datasets ``ids``: three statements per :data:`CHUNK` ids."""
    shown = None if visible is None else frozenset(visible)
    query = _details_query(conn.dialect.name, visible)
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        rows = conn.execute(query.where(tables.nodes.c.id.in_(chunk))).all()
        on_nodes = tags.node_tags(conn, chunk)
        on_fields = tags.fields_tags(conn, chunk)
        for row in rows:
            found[row.id] = _dataset(row, on_nodes.get(row.id, []), on_fields.get(row.id, {}), shown)
    return found


def find_dataset(conn: Connection, namespace: str, name: str, visible: Visible = None) -> int | None:
    """The node id of dataset ``namespace``/``name``, or None (also when its namespace is hidden)."""
    if visible is not None and namespace not in visible:
        return None
    n = tables.nodes.c
    return conn.execute(select(n.id).where(n.node_key == node_key("dataset", namespace, name))).scalar()


def has_field(conn: Connection, dataset_id: int, field: str) -> bool:
    """Whether the dataset's latest schema has the top-level field ``field`` (the fields a Dataset shows)."""
    d = tables.datasets.c
    stored = conn.execute(select(d.fields).where(d.node_id == dataset_id)).scalar()
    return any(item.get("name") == field for item in loads(stored, []))


def namespace_exists(conn: Connection, namespace: str, visible: Visible = None) -> bool:
    """Whether a job or dataset lives in ``namespace`` (and ``visible`` shows it)."""
    if visible is not None and namespace not in visible:
        return False
    n = tables.nodes.c
    query = select(n.id).where(n.kind.in_(("job", "dataset")), n.namespace == namespace).limit(1)
    return conn.execute(query).first() is not None


def list_datasets(
    conn: Connection, namespace: str, limit: int, offset: int, visible: Visible = None
) -> tuple[list[dict[str, Any]], int]:
    """The datasets of ``namespace`` by name, a page of them, and how many there are."""
    if visible is not None and namespace not in visible:
        return [], 0
    n = tables.nodes.c
    where = and_(n.kind == "dataset", n.namespace == namespace)
    total = conn.execute(select(func.count()).select_from(tables.nodes).where(where)).scalar_one()
    ids = list(conn.execute(select(n.id).where(where).order_by(n.name).limit(limit).offset(offset)).scalars())
    found = datasets(conn, ids, visible)
    return [found[node] for node in ids], total
