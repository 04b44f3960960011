"""Column-lineage reads: a walk's start fields, the fields it reached, the edges among them and their types.

Datasets known under several names (:mod:`.identity`): with ``grouped``, the start fields of a dataset (of a
job's datasets) are those of every (visible) name of it, and :func:`shown_datasets` says under which name
each dataset is shown — its group's canonical name, or for a key that cannot see it the first visible name
(:func:`.nodes.representative`) — so that a field is shown once under that name.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, literal, select, union

from airflow_lineage_provider.consumer.store.graph import dataset_aliases
from airflow_lineage_provider.consumer.store.graph.nodes import CHUNK, representative
from airflow_lineage_provider.consumer.store.graph.walks import Declared, declared_filter
from airflow_lineage_provider.consumer.store.read.text import loads
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables


def _names(datasets: Any) -> Any:
    """Every name of the datasets ``datasets`` selects (a column ``dataset_id``): themselves, and the members of
    their groups."""
    m = tables.dataset_members.c
    members = select(m.member_id.label("dataset_id")).where(m.node_id.in_(select(datasets.c.dataset_id)))
    return union(select(datasets.c.dataset_id), members).subquery("dataset_names")


def dataset_field_ids(conn: Connection, dataset_id: int, grouped: bool = False, visible: Visible = None) -> list[int]:
    """Ids of a dataset's fields that take part in column lineage (``grouped``: of every name of it, in visible
    namespaces only when ``visible`` is given)."""
    f = tables.fields.c
    if not grouped:
        return list(conn.execute(select(f.id).where(f.dataset_id == dataset_id)).scalars())
    return _fields_of(conn, _names(select(literal(dataset_id).label("dataset_id")).subquery("dataset")), visible)


def _fields_of(conn: Connection, datasets: Any, visible: Visible) -> list[int]:
    """Ids of the fields of the datasets ``datasets`` selects (a column ``dataset_id``), visible ones only when
    ``visible`` is given, in id order."""
    f, n = tables.fields.c, tables.nodes.c
    query = select(f.id).join_from(tables.fields, datasets, f.dataset_id == datasets.c.dataset_id)
    if visible is not None:
        query = query.join(tables.nodes, n.id == f.dataset_id).where(
            namespace_in(n.namespace, visible, conn.dialect.name)
        )
    return list(conn.execute(query.order_by(f.id)).scalars())


def job_field_ids(conn: Connection, job_id: int, visible: Visible = None, grouped: bool = False) -> list[int]:
    """Ids of the fields taking part in column lineage of every dataset the job reads or writes (its inputs
    and outputs in the graph; ``grouped``: of every name of each), in visible namespaces only when ``visible``
    is given. One statement."""
    e = tables.edges.c
    datasets = union(
        select(e.origin_id.label("dataset_id")).where(e.destination_id == job_id),
        select(e.destination_id.label("dataset_id")).where(e.origin_id == job_id),
    ).subquery("job_datasets")
    return _fields_of(conn, _names(datasets) if grouped else datasets, visible)


def shown_datasets(conn: Connection, dataset_ids: list[int], visible: Visible) -> dict[int, tuple[int, str, str]]:
    """``dataset id → (id, namespace, name)`` of the name each of these datasets in a group is shown under
    (see the module); datasets in no group are left out."""
    groups = dataset_aliases.groups(conn, dataset_ids)
    seen = None if visible is None else frozenset(visible)
    found: dict[int, tuple[int, str, str]] = {}
    for dataset, group in groups.items():
        shown = representative(group, seen)
        names = {name.id: name for name in group.members}
        if shown is not None and shown in names:
            found[dataset] = (shown, names[shown].namespace, names[shown].name)
    return found


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


def edges_among(
    conn: Connection, field_ids: set[int] | dict[int, Any], declared: Declared = "include"
) -> list[tuple[int, int, Any, bool, bool]]:
    """``(source field, target field, transformations, declared, observed)`` of every column edge between two of
    the fields that ``declared`` keeps (see :func:`.graph.declared_filter`)."""
    c = tables.column_edges.c
    ids = list(field_ids)
    kept = declared_filter(tables.column_edges, declared)
    found = []
    for start in range(0, len(ids), CHUNK):
        query = select(
            c.source_field_id,
            c.target_field_id,
            c.transformation,
            c.declared_at.is_not(None),
            c.observed_at.is_not(None),
        ).where(c.source_field_id.in_(ids[start : start + CHUNK]))
        if kept is not None:
            query = query.where(kept)
        found += [(s, t, loads(x, None), bool(d), bool(o)) for s, t, x, d, o in conn.execute(query) if t in field_ids]
    return found


def field_types(
    conn: Connection, dataset_ids: list[int], shown: dict[int, tuple[int, str, str]] | None = None
) -> dict[int, dict[str, str | None]]:
    """``dataset id → {field name: type}`` from each dataset's latest schema; with ``shown`` (see
    :func:`shown_datasets`), the datasets shown as one have one answer: each field's type in the latest schema
    of any of them that has the field."""
    d = tables.datasets.c
    schemas: dict[int, tuple[float, dict[str, str | None]]] = {}
    for start in range(0, len(dataset_ids), CHUNK):
        query = select(d.node_id, d.fields, d.schema_time).where(d.node_id.in_(dataset_ids[start : start + CHUNK]))
        for node, text, time in conn.execute(query):
            when = time.timestamp() if time is not None else float("-inf")
            schemas[node] = (when, {f["name"]: f.get("type") for f in loads(text, [])})
    if not shown:
        return {node: types for node, (_time, types) in schemas.items()}
    together: dict[int, list[int]] = {}
    for node in schemas:
        together.setdefault(shown.get(node, (node,))[0], []).append(node)
    found: dict[int, dict[str, str | None]] = {}
    for nodes in together.values():
        merged: dict[str, str | None] = {}
        for node in sorted(nodes, key=lambda node: schemas[node][0], reverse=True):
            for name, kind in schemas[node][1].items():
                if merged.get(name) is None:
                    merged[name] = kind
        found.update((node, merged) for node in nodes)
    return found
