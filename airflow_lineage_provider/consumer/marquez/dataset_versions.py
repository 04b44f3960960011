"""Marquez's ``DatasetVersion``: one version of a dataset per run that wrote it, newest first.

A run wrote a dataset when one of its events listed it as an output. Its version holds what that run's
events said of the output: the fields of the latest ``schema`` facet among them, and the facets of all of
them merged by facet name (a later event's facet replaces an earlier one's), as Marquez keeps every facet
of a version. The version's id is :func:`.datasets.version_id` — a UUID 5 of the dataset and the
run — so a run's version keeps its id whatever events of the run arrive later, and
``GET .../versions/{version}`` finds it again without storing anything: the dataset's writing runs are
hashed until one matches (cheap: no event is read for that).

``createdAt``: the time of the run's first event that listed the output (the run's first event time when
retention pruned its events); order: the run's first event time, newest first (ties by run id).
``createdByRun``: the run as the jobs API shows it (:func:`.runs.run_objects`). ``description``: the
``documentation`` facet of the version (the schema requires the member: ``""`` without one). ``tags`` is left
out: Marquez's description types it as a string where Marquez answers a list, and no value satisfies both;
the fields carry their tags.

A dataset known under several names (:mod:`..store.graph.dataset_aliases`) has the versions of every (visible)
name, shown under its representative's name; each version's id is still that of the name the run wrote (so it
never changes when names join or part), and its ``physicalName`` is that name.

Bounded work: a page of versions is chosen in SQL — the runs of the jobs that wrote the dataset (its incoming
edges, ``ix_lineage_runs_job``) that wrote one of its names (``lineage_run_io``'s key), newest first, with their
count — and sized before anything of it is read: the bytes of the page runs' stored events and facets
(``admit``, :mod:`..answer_limits`). Only the events of the page's runs are read (``ix_lineage_events_run_uuid``)
and decoded. ``GET .../versions/{version}`` hashes the writing runs (:func:`.datasets.writes`).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, bindparam, func, select
from sqlalchemy.sql.elements import BindParameter

from airflow_lineage_provider.consumer.marquez.datasets import (
    NamedWrite,
    Write,
    dataset_names,
    description,
    marquez_fields,
    named_writes,
    version_id,
    writes,
)
from airflow_lineage_provider.consumer.marquez.runs import run_objects, runs_query
from airflow_lineage_provider.consumer.marquez.shapes import DatasetVersion, VersionId
from airflow_lineage_provider.consumer.store.graph.node_types import dataset_type
from airflow_lineage_provider.consumer.store.read import tags
from airflow_lineage_provider.consumer.store.read.queries import Admit, stored_size
from airflow_lineage_provider.consumer.store.read.sources import source_of
from airflow_lineage_provider.consumer.store.read.text import iso
from airflow_lineage_provider.consumer.store.read.visibility import Visible, scrub
from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.store.write import facet_readers

#: Run ids per ``IN (...)`` list when reading events.
_EVENTS_CHUNK = 900
#: Bytes of a DatasetVersion without its names and stored values (members, times, ids, its run's members; a
#: little over).
VERSION_BYTES = 1024


class _Written:
    """What the events of one run said about the output."""

    def __init__(self) -> None:
        self.first: datetime | None = None
        self.fields: list[dict[str, Any]] | None = None
        self.facets: dict[str, Any] = {}


def _written(conn: Connection, run_ids: list[str], names: set[tuple[str, str]]) -> dict[str, _Written]:
    """What the events of each run said about the outputs named by one of ``names`` (``(namespace, name)``)."""
    e = tables.events.c
    found: dict[str, _Written] = {}
    for start in range(0, len(run_ids), _EVENTS_CHUNK):
        query = (
            select(e.run_uuid, e.event_time, *payloads.payload_columns())
            .where(e.run_uuid.in_(run_ids[start : start + _EVENTS_CHUNK]))
            .order_by(e.event_time, e.id)
        )
        for run_uuid, event_time, *stored in conn.execute(query):
            try:
                event = json.loads(payloads.text_of(conn, *stored))  # the decoder that accepted the event at ingest
            except (ValueError, RecursionError):
                continue
            outputs = event.get("outputs") if isinstance(event, dict) else None
            for output in outputs if isinstance(outputs, list) else ():
                if not isinstance(output, dict) or (output.get("namespace"), output.get("name")) not in names:
                    continue
                seen = found.setdefault(run_uuid, _Written())
                seen.first = event_time if seen.first is None else min(seen.first, event_time)
                facets = output.get("facets")
                if isinstance(facets, dict):
                    seen.facets.update(facets)
                    fields = facet_readers.schema_fields(facets)
                    if fields is not None:
                        seen.fields = fields
    return found


def _field_tags(conn: Connection, names: list[tuple[int, str, str]]) -> dict[str, list[str]]:
    """The tags on each field, by field name, over every name of the dataset."""
    merged: dict[str, set[str]] = {}
    for on_fields in tags.fields_tags(conn, [node for node, _, _ in names]).values():
        for field, field_tags in on_fields.items():
            merged.setdefault(field, set()).update(field_tags)
    return {field: sorted(field_tags) for field, field_tags in merged.items()}


def _versions(
    conn: Connection, names: list[tuple[int, str, str]], page: list[NamedWrite], visible: Visible
) -> list[DatasetVersion]:
    """The versions ``page`` (runs with the name each wrote) of the dataset with ``names`` (representative first)."""
    shown = None if visible is None else frozenset(visible)
    _, namespace, name = names[0]
    run_ids = [write.run_uuid for write, _, _ in page]
    found = {row.run_uuid: row for row in conn.execute(runs_query().where(tables.runs.c.run_uuid.in_(run_ids)))}
    # A run gone since the page was chosen (a prune or reset committed in between) is left out.
    page = [item for item in page if item[0].run_uuid in found]
    rows = [found[write.run_uuid] for write, _, _ in page]
    written = _written(conn, [row.run_uuid for row in rows], {(ns, written_as) for _, ns, written_as in names})
    field_tags = _field_tags(conn, names)
    runs = run_objects(conn, rows, shown)
    versions = []
    for (_, written_ns, written_name), row, run in zip(page, rows, runs, strict=True):
        seen = written.get(row.run_uuid, _Written())
        version = version_id(written_ns, written_name, row.run_uuid)
        versions.append(
            DatasetVersion(
                id=VersionId(namespace=namespace, name=name, version=version),
                type=dataset_type(seen.facets, written_ns),
                name=name,
                physical_name=written_name,
                created_at=iso(seen.first or row.created_at),
                version=version,
                namespace=namespace,
                source_name=source_of(seen.facets, written_ns)[0],
                fields=marquez_fields(seen.fields or [], field_tags),
                description=description(seen.facets) or "",
                created_by_run=run,
                facets=seen.facets if shown is None else scrub(seen.facets, shown),
            )
        )
    return versions


def _named_writes(
    conn: Connection, dataset_id: int, namespace: str, name: str, visible: Visible
) -> tuple[list[tuple[int, str, str]], list[NamedWrite]]:
    """The dataset's (visible) names, and the runs that wrote any of them, newest first."""
    names = dataset_names(conn, dataset_id, namespace, name, visible)
    written = writes(conn, [node for node, _, _ in names], visible)
    return names, named_writes(written, names)


def _writers(conn: Connection, names: list[tuple[int, str, str]], visible: Visible) -> list[int]:
    """The jobs (in ``visible`` namespaces) that wrote any of ``names``: the names' incoming edges."""
    e, n = tables.edges.c, tables.nodes.c
    jobs = sorted(
        set(conn.execute(select(e.origin_id).where(e.destination_id.in_([i for i, _, _ in names]))).scalars())
    )
    if visible is None or not jobs:
        return jobs
    shown = frozenset(visible)
    return [
        job for job, namespace in conn.execute(select(n.id, n.namespace).where(n.id.in_(jobs))) if namespace in shown
    ]


def _page_writes(
    conn: Connection, names: list[tuple[int, str, str]], limit: int, offset: int, visible: Visible, admit: Admit | None
) -> tuple[list[NamedWrite], int]:
    """A page of the runs that wrote any of ``names`` (representative first), newest first (by creation, then run
    id), each with the first of the names it wrote, and how many there are; ``admit`` is told what each version
    shows of the store (its run's stored events and facets, and names) before anything of it is read.

    Chosen in SQL: the writers' runs (``ix_lineage_runs_job``) with an output row for one of the names
    (``lineage_run_io``'s key, a lookup per run: a subquery with ``LIMIT``, never a semi-join that PostgreSQL
    without statistics could start from a scan of the table), the count riding along with the page."""
    jobs = _writers(conn, names, visible)
    if not jobs:
        return [], 0
    dialect, ids = conn.dialect.name, [node for node, _, _ in names]
    chosen, page = _writes_statements(dialect)
    rows = conn.execute(page, {"jobs": jobs, "names": ids, "limit": limit, "offset": offset}).all()
    if rows:
        total = rows[0].total
    elif offset == 0:
        total = 0
    else:  # a page past the end carries no count: count apart
        counted = select(func.count()).select_from(chosen.order_by(None).subquery())
        total = conn.execute(counted, {"jobs": jobs, "names": ids}).scalar() or 0
    if admit is not None:
        longest = max(2 * (len(ns.encode()) + len(name.encode())) for _, ns, name in names)
        admit([longest + row.size for row in rows])
    under: dict[str, int] = {}
    rank = {node: index for index, (node, _, _) in enumerate(names)}
    if rows:
        for run_uuid, node in conn.execute(_wrote_as(dialect), {"runs": [row.run_uuid for row in rows], "names": ids}):
            if run_uuid not in under or rank[node] < rank[under[run_uuid]]:
                under[run_uuid] = node
    named = {node: (namespace, name) for node, namespace, name in names}
    return [
        (Write(row.run_uuid, row.state, row.created_at, row.ended_at), *named[under[row.run_uuid]])
        for row in rows
        if row.run_uuid in under  # its rows gone since the page was chosen: the run is left out
    ], total


@cache
def _writes_statements(dialect: str) -> tuple[Any, Any]:
    """The runs of ``:jobs`` (expanding) that wrote one of the datasets ``:names`` (expanding), newest first, each
    with ``total`` (how many there are); and a page of them (``:limit``, ``:offset``) with each one's ``size`` (its
    events' and facets' bytes, :data:`VERSION_BYTES` more): built once (see :func:`_page_writes`)."""
    r, io, e = tables.runs.c, tables.run_io.c, tables.events.c
    names: BindParameter[Any] = bindparam("names", expanding=True)
    jobs: BindParameter[Any] = bindparam("jobs", expanding=True)
    wrote = (
        select(io.dataset_id)
        .where(io.run_uuid == r.run_uuid, io.dataset_id.in_(names), io.direction == "output")
        .limit(1)
        .scalar_subquery()
    )
    chosen = (
        select(r.run_uuid, r.state, r.created_at, r.ended_at, func.count().over().label("total"))
        .where(r.job_id.in_(jobs), wrote.is_not(None))
        .order_by(r.created_at.desc(), r.run_uuid.desc())
    )
    page = chosen.limit(bindparam("limit")).offset(bindparam("offset")).subquery("write_page")
    events = select(func.sum(payloads.size_of(dialect))).where(e.run_uuid == page.c.run_uuid)
    facets = select(stored_size(r.facets, dialect)).where(r.run_uuid == page.c.run_uuid)
    size = VERSION_BYTES + func.coalesce(events.scalar_subquery(), 0) + func.coalesce(facets.scalar_subquery(), 0)
    return chosen, select(page, size.label("size")).order_by(page.c.created_at.desc(), page.c.run_uuid.desc())


@cache
def _wrote_as(dialect: str) -> Any:
    """``(run, dataset)`` of each of the datasets ``:names`` (expanding) the runs ``:runs`` (expanding) wrote."""
    io = tables.run_io.c
    runs: BindParameter[Any] = bindparam("runs", expanding=True)
    names: BindParameter[Any] = bindparam("names", expanding=True)
    return select(io.run_uuid, io.dataset_id).where(
        io.run_uuid.in_(runs), io.dataset_id.in_(names), io.direction == "output"
    )


def list_versions(
    conn: Connection,
    dataset_id: int,
    namespace: str,
    name: str,
    limit: int,
    offset: int,
    visible: Visible = None,
    admit: Admit | None = None,
) -> tuple[list[DatasetVersion], int]:
    """The versions of the dataset (node ``dataset_id``, named ``namespace``/``name``), newest first, a page of
    them, and how many there are; a dataset known under several names has the versions of every (visible)
    name and shows them under its representative's name (see the module docstring). ``admit`` is told each
    version's size before anything of it is read."""
    names = dataset_names(conn, dataset_id, namespace, name, visible)
    if not names:
        return [], 0
    page, total = _page_writes(conn, names, limit, offset, visible, admit)
    versions = _versions(conn, names, page, visible)
    return versions, total - (len(page) - len(versions))


def get_version(
    conn: Connection, dataset_id: int, namespace: str, name: str, version: str, visible: Visible = None
) -> DatasetVersion | None:
    """The version ``version`` of the dataset, or None when no (visible) run of it has that id."""
    wanted = version.strip().lower()
    names, written = _named_writes(conn, dataset_id, namespace, name, visible)
    match = [item for item in written if version_id(item[1], item[2], item[0].run_uuid) == wanted]
    return _versions(conn, names, match[:1], visible)[0] if match and names else None
