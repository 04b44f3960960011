"""Column-lineage reads: a walk's start fields, the fields it reached, the edges among them and their types."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select, union

from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.nodes import CHUNK
from airflow_lineage_provider.consumer.store.text import loads
from airflow_lineage_provider.consumer.store.visibility import Visible, namespace_in


def dataset_field_ids(conn: Connection, dataset_id: int) -> list[int]:
    """Ids of a dataset's fields that take part in column lineage."""
    return list(conn.execute(select(tables.fields.c.id).where(tables.fields.c.dataset_id == dataset_id)).scalars())


def job_field_ids(conn: Connection, job_id: int, visible: Visible = None) -> list[int]:
    """Ids of the fields taking part in column lineage of every dataset the job reads or writes (its inputs
    and outputs in the graph), in visible namespaces only when ``visible`` is given. One statement."""
    e, f, n = tables.edges.c, tables.fields.c, tables.nodes.c
    datasets = union(
        select(e.origin_id.label("dataset_id")).where(e.destination_id == job_id),
        select(e.destination_id.label("dataset_id")).where(e.origin_id == job_id),
    ).subquery("job_datasets")
    query = select(f.id).join_from(tables.fields, datasets, f.dataset_id == datasets.c.dataset_id)
    if visible is not None:
        query = query.join(tables.nodes, n.id == f.dataset_id).where(
            namespace_in(n.namespace, visible, conn.dialect.name)
        )
    return list(conn.execute(query.order_by(f.id)).scalars())


def field_details(conn: Connection, field_ids: list[int]) -> dict[int, tuple[int, str, str, str]]:
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


def edges_among(conn: Connection, field_ids: set[int] | dict[int, Any]) -> list[tuple[int, int, Any]]:
    """``(source field, target field, transformations)`` of every column edge between two of the fields."""
    c = tables.column_edges.c
    ids = list(field_ids)
    found = []
    for start in range(0, len(ids), CHUNK):
        query = select(c.source_field_id, c.target_field_id, c.transformation).where(
            c.source_field_id.in_(ids[start : start + CHUNK])
        )
        found += [(s, t, loads(x, None)) for s, t, x in conn.execute(query) if t in field_ids]
    return found


def field_types(conn: Connection, dataset_ids: list[int]) -> dict[int, dict[str, str | None]]:
    """``dataset id → {field name: type}`` from each dataset's latest schema."""
    d = tables.datasets.c
    found: dict[int, dict[str, str | None]] = {}
    for start in range(0, len(dataset_ids), CHUNK):
        query = select(d.node_id, d.fields).where(d.node_id.in_(dataset_ids[start : start + CHUNK]))
        for node, text in conn.execute(query):
            found[node] = {f["name"]: f.get("type") for f in loads(text, [])}
    return found
