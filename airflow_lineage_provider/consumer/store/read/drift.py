"""Drift between declared and observed lineage, per job (``GET /api/v1/drift``, see docs/declared-lineage.md).

A job with a declaration (its latest JobEvent named datasets, see :mod:`.declarations`) drifts when, among its
job↔dataset edges:

* a declared edge was not observed in the window (``declaredNotObserved``): ``declared_at`` set and
  ``observed_at`` NULL or before the window's start, and, for a templated name (``totals_{{ ds_nodash }}``), no
  rendering of it (``totals_20260201``) observed with the same job in the window, and not itself a rendering of
  a pattern the job declared (:mod:`.templated_names`);
* an edge observed in the window is not declared (``observedNotDeclared``): ``observed_at`` in the window and
  ``declared_at`` NULL (a rendering of a declared templated name is declared by it).

A job nobody declared, or whose latest JobEvent retired it, has no drift. The window is the last ``days`` days
before now, by event time. Jobs come in (namespace, name) order, a page at a time: one statement reads the page's
jobs (those with drift), one counts them, one reads their drifting edges (inputs by the edges' destination
index, outputs by their key). A key limited to namespace patterns sees the jobs in its namespaces and, of each,
the edges to datasets it can see.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, and_, exists, func, literal, not_, or_, select, union_all
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.read.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.read.visibility import namespace_in
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write import templated_names


@dataclass(frozen=True)
class _Side:
    """One direction of a job's edges: the edge column at the job and the one at the dataset."""

    direction: str
    at_job: str
    at_dataset: str


_SIDES = (_Side("input", "destination_id", "origin_id"), _Side("output", "origin_id", "destination_id"))


def _drifting(edge: Any, side: _Side, since: datetime) -> ColumnElement[bool]:
    """SQL: the edge is declared and not observed since ``since`` (nor, for a templated name, any rendering of it:
    :mod:`.templated_names`), or observed since then and never declared."""
    declared, observed = edge.c.declared_at, edge.c.observed_at
    return or_(
        and_(
            declared.is_not(None),
            or_(observed.is_(None), observed < since),
            not_(templated_names.realised(edge, side.at_job, side.at_dataset, since)),
            not_(templated_names.rendering(edge, side.at_job, side.at_dataset)),
        ),
        and_(declared.is_(None), observed >= since),
    )


def _edges_of(side: _Side, since: datetime, visible: Collection[str] | None, dialect: str) -> Any:
    """``(edge, dataset, conditions)``: the drifting edges of ``side`` (any job's; the caller says which) and
    their (visible) datasets."""
    edge, dataset = tables.edges.alias(f"{side.direction}_edge"), tables.nodes.alias(f"{side.direction}_dataset")
    conditions = [dataset.c.id == edge.c[side.at_dataset], _drifting(edge, side, since)]
    if visible is not None:
        conditions.append(namespace_in(dataset.c.namespace, visible, dialect))
    return edge, dataset, conditions


def _jobs(since: datetime, namespace: str | None, visible: Collection[str] | None, dialect: str) -> Any:
    """The declared jobs with drift (``id, namespace, name``), unordered."""
    job = tables.nodes.alias("job")
    has_drift = []
    for side in _SIDES:
        edge, dataset, conditions = _edges_of(side, since, visible, dialect)
        at_job = edge.c[side.at_job] == job.c.id
        has_drift.append(exists(select(literal(1)).select_from(edge).join(dataset, and_(*conditions)).where(at_job)))
    declaration = tables.job_declarations.c
    declared = exists(select(literal(1)).where(declaration.job_id == job.c.id, declaration.empty == 0))
    chosen = [job.c.kind == "job", declared, or_(*has_drift)]
    if namespace is not None:
        chosen.append(job.c.namespace == namespace)
    if visible is not None:
        chosen.append(namespace_in(job.c.namespace, visible, dialect))
    return select(job.c.id, job.c.namespace, job.c.name).where(*chosen)


@dataclass
class DriftPage:
    """A page of jobs with drift (``jobs`` in the API's shape) and how many jobs have drift."""

    jobs: list[dict[str, Any]]
    totalCount: int


def drift(
    conn: Connection,
    days: int,
    limit: int,
    offset: int,
    namespace: str | None = None,
    visible: Collection[str] | None = None,
    now: datetime | None = None,
) -> DriftPage:
    """Jobs whose declared and observed lineage differ in the last ``days`` days (see the module), a page of
    ``limit`` after ``offset``, only in ``namespace`` if given, as a key seeing ``visible`` namespaces sees them
    (None: every one)."""
    dialect = conn.dialect.name
    since = (now or datetime.now(timezone.utc)) - timedelta(days=days)
    jobs = _jobs(since, namespace, visible, dialect).subquery("drifting")
    total = conn.execute(select(func.count()).select_from(jobs)).scalar() or 0
    page = conn.execute(
        select(jobs.c.id, jobs.c.namespace, jobs.c.name)
        .order_by(jobs.c.namespace, jobs.c.name)
        .limit(limit)
        .offset(offset)
    ).all()
    if not page:
        return DriftPage([], total)
    answers: dict[int, dict[str, Any]] = {
        job_id: {"job": {"namespace": ns, "name": name}, "declaredNotObserved": [], "observedNotDeclared": []}
        for job_id, ns, name in page
    }
    ids = list(answers)
    parts = []
    for side in _SIDES:
        edge, dataset, conditions = _edges_of(side, since, visible, dialect)
        at_job = edge.c[side.at_job]
        conditions.append(at_job.in_(ids))
        parts.append(
            select(
                at_job.label("job_id"),
                literal(side.direction).label("direction"),
                dataset.c.namespace,
                dataset.c.name,
                iso_utc(edge.c.declared_at).label("declared_at"),
                iso_utc(edge.c.observed_at).label("observed_at"),
            )
            .select_from(edge)
            .join(dataset, and_(*conditions))
        )
    rows = conn.execute(union_all(*parts)).all()
    for job_id, direction, ns, name, declared_at, observed_at in sorted(rows, key=lambda row: row[1:4]):
        item = {
            "direction": direction,
            "namespace": ns,
            "name": name,
            "declaredAt": declared_at,
            "lastObservedAt": observed_at,
        }
        answers[job_id]["declaredNotObserved" if declared_at is not None else "observedNotDeclared"].append(item)
    return DriftPage(list(answers.values()), total)
