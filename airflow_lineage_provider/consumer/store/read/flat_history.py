"""What happened to a dataset or a run, as flat rows keyed by names (:mod:`.flat_rows`): a dataset's versions (one
per completed run that wrote it), its column lineage, and the runs of one execution tree.

Read for Feast's consumer API (``consumer/feast/``). ``visible`` (:mod:`.visibility`; None: every namespace) keeps
what lies in visible namespaces.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, and_, or_, select

from airflow_lineage_provider.consumer.store.read.flat_rows import Row, epoch_ms, run_rows
from airflow_lineage_provider.consumer.store.read.visibility import Visible, scrub
from airflow_lineage_provider.consumer.store.schema import payloads, tables


def _dataset_id(conn: Connection, namespace: str, name: str, visible: Visible) -> int | None:
    if visible is not None and namespace not in visible:
        return None
    n = tables.nodes.c
    query = select(n.id).where(n.kind == "dataset", n.namespace == namespace, n.name == name)
    return conn.execute(query).scalar()


def _output_facets(payload: str, namespace: str, name: str) -> dict[str, Any]:
    """The facets an event gives its output ``namespace``/``name``."""
    for output in json.loads(payload).get("outputs") or ():
        if isinstance(output, dict) and (output.get("namespace"), output.get("name")) == (namespace, name):
            facets = output.get("facets")
            return facets if isinstance(facets, dict) else {}
    return {}


def dataset_versions(
    conn: Connection, namespace: str, name: str, visible: Visible, limit: int, offset: int
) -> tuple[list[Row], int]:
    """A dataset's versions, newest first: one per stored COMPLETE event of a run that wrote it, numbered from 1 in
    event time order, with the schema and facets that event gave it; and how many there are."""
    dataset = _dataset_id(conn, namespace, name, visible)
    if dataset is None:
        return [], 0
    io, r, e = tables.run_io.c, tables.runs.c, tables.events.c
    writers = select(io.run_uuid).where(io.dataset_id == dataset, io.direction == "output")
    query = (
        select(e.id, e.run_uuid, e.received_at, *payloads.payload_columns())
        .join_from(tables.events, tables.runs, r.run_uuid == e.run_uuid)
        .where(e.run_uuid.in_(writers), e.event_type == "COMPLETE", r.state == "COMPLETED")
        .order_by(e.event_time, e.id)
    )
    versions = []
    for number, (event_id, run, received, *stored) in enumerate(conn.execute(query), start=1):
        facets = _output_facets(payloads.text_of(conn, *stored), namespace, name)
        if visible is not None:
            facets = scrub(facets, visible)
        versions.append(
            {
                "version_id": event_id,
                "dataset_namespace": namespace,
                "dataset_name": name,
                "version": number,
                "created_by_run_id": run,
                "schema": facets.get("schema"),
                "facets": facets or None,
                "created_at": epoch_ms(received),
            }
        )
    versions.reverse()
    return versions[offset : offset + limit], len(versions)


def _transformations(text: str | None) -> tuple[str | None, str | None, str | None]:
    """(type, description, all as JSON) of a column edge's stored ``transformations`` list; the older
    field-level ``transformationType`` form gives none, as Feast reads only the list."""
    found = json.loads(text) if text else None
    if not isinstance(found, list) or not found:
        return None, None, None
    first = found[0] if isinstance(found[0], dict) else {}
    return first.get("type"), first.get("description"), json.dumps(found)


def column_rows(conn: Connection, namespace: str, name: str, direction: str, visible: Visible) -> list[Row]:
    """The column lineage a run showed into the dataset's fields (``upstream``), out of them (``downstream``), or
    both, each row with its ``direction``."""
    source_field, target_field = tables.fields.alias("source_field"), tables.fields.alias("target_field")
    source, target = tables.nodes.alias("source"), tables.nodes.alias("target")
    c = tables.column_edges.c
    query = (
        select(
            target.c.namespace,
            target.c.name,
            target_field.c.name,
            source.c.namespace,
            source.c.name,
            source_field.c.name,
            c.transformation,
            c.last_seen,
        )
        .join_from(tables.column_edges, source_field, source_field.c.id == c.source_field_id)
        .join(target_field, target_field.c.id == c.target_field_id)
        .join(source, source.c.id == source_field.c.dataset_id)
        .join(target, target.c.id == target_field.c.dataset_id)
        .where(c.observed_at.is_not(None))
    )
    into = and_(target.c.namespace == namespace, target.c.name == name)
    out_of = and_(source.c.namespace == namespace, source.c.name == name)
    found = []
    for row in conn.execute(query.where(or_(into, out_of))):
        t_ns, t_name, t_field, s_ns, s_name, s_field, transformation, seen = row
        if visible is not None and not {t_ns, s_ns} <= set(visible):
            continue
        kind, description, listed = _transformations(transformation)
        line = {
            "dataset_namespace": t_ns,
            "dataset_name": t_name,
            "output_field": t_field,
            "input_namespace": s_ns,
            "input_name": s_name,
            "input_field": s_field,
            "transformation_type": kind,
            "transformation_description": description,
            "transformations_json": listed,
            "run_id": None,
            "updated_at": epoch_ms(seen),
        }
        if direction in ("both", "upstream") and (t_ns, t_name) == (namespace, name):
            found.append({**line, "direction": "upstream"})
        if direction in ("both", "downstream") and (s_ns, s_name) == (namespace, name):
            found.append({**line, "direction": "downstream"})
    return sorted(found, key=lambda line: line["direction"] != "upstream")


def run_tree(conn: Connection, run_id: str, visible: Visible) -> list[Row]:
    """Every visible run of the execution tree ``run_id`` belongs to: its root (the root its ``parent`` facet
    names, or itself) and the runs below it through their parents, earliest started first."""
    found = run_rows(conn, visible, run_id=run_id, limit=1)
    root = (found[0]["root_run_id"] if found else None) or run_id.lower()
    r = tables.runs.c
    tree, frontier = {root}, [root]
    while frontier:
        children = conn.execute(select(r.run_uuid).where(r.parent_run_uuid.in_(frontier))).scalars().all()
        frontier = [child for child in children if child not in tree]
        tree.update(frontier)
    rows = run_rows(conn, visible, run_ids=sorted(tree))
    return sorted(rows, key=lambda row: (row["started_at"] is None, row["started_at"] or 0))
