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
key (:func:`writes`) — so a page of datasets costs a fixed number of statements, each an index lookup, and
reads the runs of the jobs that wrote them, not the store.

``visible`` (see :mod:`.visibility`): a dataset in a hidden namespace is not found; runs of jobs in hidden
namespaces count for nothing (no version, no ``lastModifiedAt``); facets lose objects naming a hidden namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from airflow_lineage_provider.consumer.marquez_values import dataset_type
from airflow_lineage_provider.consumer.store import tables, tags
from airflow_lineage_provider.consumer.store.ingest import node_key
from airflow_lineage_provider.consumer.store.sources import source_of
from airflow_lineage_provider.consumer.store.text import iso, loads
from airflow_lineage_provider.consumer.store.visibility import Visible, scrub

#: The namespace of dataset version UUIDs (``uuid5(VERSIONS, namespace NUL name NUL run id)``).
VERSIONS = uuid.UUID("6f1d5c2e-8a43-5b9e-9c1a-3e7d2b40a8f1")
#: Ids per ``IN (...)`` list.
_CHUNK = 900
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


@dataclass(frozen=True)
class Write:
    """A run that wrote a dataset: what the dataset's ``lastModifiedAt``, ``currentVersion`` and versions need."""

    run_uuid: str
    state: str
    created_at: datetime
    ended_at: datetime | None


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def writes(conn: Connection, dataset_ids: list[int], visible: Visible = None) -> dict[int, list[Write]]:
    """The runs that wrote each dataset (of jobs in ``visible`` namespaces), newest first: ``{id: [Write]}``.

    Stepwise, one table per statement and each statement an index lookup whatever the planner knows (a
    PostgreSQL without statistics would otherwise start from a scan of ``lineage_run_io``): the datasets'
    incoming edges (``ix_lineage_edges_destination``) give the jobs that wrote them, the jobs' runs come from
    ``ix_lineage_runs_job``, and ``lineage_run_io``'s key says which of those runs wrote which dataset.
    """
    e, r, io, n = tables.edges.c, tables.runs.c, tables.run_io.c, tables.nodes.c
    writers: set[int] = set()
    for chunk in _chunks(dataset_ids):
        writers.update(conn.execute(select(e.origin_id).where(e.destination_id.in_(chunk))).scalars())
    jobs = sorted(writers)
    if visible is not None:
        shown = frozenset(visible)
        jobs = [
            job
            for chunk in _chunks(jobs)
            for job, namespace in conn.execute(select(n.id, n.namespace).where(n.id.in_(chunk)))
            if namespace in shown
        ]
    runs: dict[str, Write] = {}
    for chunk in _chunks(jobs):
        query = select(r.run_uuid, r.state, r.created_at, r.ended_at).where(r.job_id.in_(chunk))
        runs.update((row.run_uuid, Write(*row)) for row in conn.execute(query))
    found: dict[int, list[Write]] = {}
    for datasets_chunk in _chunks(dataset_ids):
        for chunk in _chunks(list(runs)):
            query = select(io.run_uuid, io.dataset_id).where(
                io.run_uuid.in_(chunk), io.dataset_id.in_(datasets_chunk), io.direction == "output"
            )
            for run_uuid, dataset in conn.execute(query):
                found.setdefault(dataset, []).append(runs[run_uuid])
    for written in found.values():
        written.sort(key=lambda write: (write.created_at, write.run_uuid), reverse=True)
    return found


def _details_query() -> Any:
    n, d = tables.nodes.c, tables.datasets.c
    return select(n.id, n.namespace, n.name, n.created_at, n.updated_at, d.fields, d.facets).outerjoin_from(
        tables.nodes, tables.datasets, d.node_id == n.id
    )


def _dataset(
    row: Any,
    node_tags: list[str],
    field_tags: dict[str, list[str]],
    written: list[Write],
    visible: frozenset[str] | None,
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
    completed = [write.ended_at for write in written if write.state == "COMPLETED" and write.ended_at is not None]
    if completed:
        data["lastModifiedAt"] = iso(max(completed))
    state = lifecycle_state(facets)
    if state is not None:
        data["lastLifecycleState"] = state
    text = description(facets)
    if text is not None:
        data["description"] = text
    data["facets"] = facets if visible is None else scrub(facets, visible)
    if written:
        data["currentVersion"] = version_id(row.namespace, row.name, written[0].run_uuid)
    data["deleted"] = state is not None and state.upper() == "DROP"
    return data


def datasets(conn: Connection, ids: list[int], visible: Visible = None) -> dict[int, dict[str, Any]]:
    """``id → Dataset`` (Marquez's shape) for the datasets ``ids``: a fixed number of statements per
    :data:`_CHUNK` ids (see :func:`writes`)."""
    shown = None if visible is None else frozenset(visible)
    query = _details_query()
    found: dict[int, dict[str, Any]] = {}
    for chunk in _chunks(ids):
        rows = conn.execute(query.where(tables.nodes.c.id.in_(chunk))).all()
        on_nodes = tags.node_tags(conn, chunk)
        on_fields = tags.fields_tags(conn, chunk)
        written = writes(conn, chunk, visible)
        for row in rows:
            node = row.id
            found[node] = _dataset(row, on_nodes.get(node, []), on_fields.get(node, {}), written.get(node, []), shown)
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
