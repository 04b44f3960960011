"""Marquez's ``Job`` objects from the store: one job, a page of jobs, a job's runs and versions.

A ``Job`` carries what the events said: ``type`` from the ``jobType`` facet
(:func:`..marquez_values.job_type`), ``location`` from ``sourceCodeLocation``, ``description`` from
``documentation``, ``facets`` (the latest event's that carried job facets), ``inputs`` and ``outputs`` (every
dataset an event of the job read or wrote: the graph's edges), ``latestRun`` (the run with the latest
event), ``latestRuns`` (the :data:`LATEST_RUNS` newest runs), ``currentVersion`` (the latest run's job
version, see :mod:`.marquez_runs`) and ``tags``. ``nodeId`` (``job:<namespace>:<name>``, the lineage graph's
id) is added for the lineage page; Marquez's clients ignore it. A page of jobs costs a fixed number of
statements whatever its size: no statement per job.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection, bindparam, func, literal, select, true, union_all

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.marquez_values import job_type
from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.ingest import node_key
from airflow_lineage_provider.consumer.store.marquez_runs import (
    RUN_COLUMNS,
    description,
    iso,
    run_object,
    run_versions,
    runs_query,
    version_location,
)
from airflow_lineage_provider.consumer.store.tags import node_tags
from airflow_lineage_provider.consumer.store.text import loads
from airflow_lineage_provider.consumer.store.visibility import Visible, namespace_in, scrub

#: How many of its newest runs a Job lists in ``latestRuns``.
LATEST_RUNS = 10
#: Jobs per statement reading their newest runs.
RUNS_CHUNK = 500
#: Marquez's run states, the values ``runState`` may take.
RUN_STATES = ("NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED")

_n, _j, _r, _e = tables.nodes.c, tables.jobs.c, tables.runs.c, tables.edges.c


def page(conn: Connection, query: Any, limit: int, offset: int) -> tuple[list[Any], int]:
    """The rows of ``query`` from ``offset`` (at most ``limit``) and how many rows it has in all."""
    total = conn.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar() or 0
    return list(conn.execute(query.limit(limit).offset(offset))), total


def find_job(conn: Connection, namespace: str, name: str, visible: Visible = None) -> int | None:
    """The node id of job ``namespace``/``name``, or None (also when its namespace is hidden)."""
    if visible is not None and namespace not in visible:
        return None
    return conn.execute(select(_n.id).where(_n.node_key == node_key("job", namespace, name))).scalar()


def list_jobs(
    conn: Connection,
    limit: int,
    offset: int,
    *,
    namespace: str | None = None,
    name_contains: str | None = None,
    states: list[str] | None = None,
    visible: Visible = None,
) -> tuple[list[dict[str, Any]], int]:
    """A page of Jobs by namespace and name, and how many there are; ``states``: only jobs whose latest run
    is in one of them."""
    query = select(_n.id).where(_n.kind == "job").order_by(_n.namespace, _n.name)
    if namespace is not None:
        query = query.where(_n.namespace == namespace)
    if name_contains:
        query = query.where(_n.name.contains(name_contains, autoescape=True))
    if states:
        query = (
            query.join(tables.jobs, _j.node_id == _n.id)
            .join(tables.runs, _r.run_uuid == _j.latest_run_uuid)
            .where(_r.state.in_(states))
        )
    if visible is not None:
        query = query.where(namespace_in(_n.namespace, visible, conn.dialect.name))
    rows, total = page(conn, query, limit, offset)
    ids = [row.id for row in rows]
    jobs = job_objects(conn, ids, visible)
    return [jobs[node] for node in ids], total


@cache
def _newest_runs_statement(dialect: str) -> Any:
    """The :data:`LATEST_RUNS` newest runs of each job of ``:ids`` (expanding), one statement for a whole page.

    Each job's runs are read newest first from its ``(job_id, created_at)`` index and no further than the
    :data:`LATEST_RUNS`-th, however many it has: a ``LATERAL`` subquery per job on PostgreSQL; on SQLite
    (no ``LATERAL``) the runs whose id is among the job's newest, a subquery correlated with the job.
    """
    ids = bindparam("ids", expanding=True)
    if dialect == "postgresql":
        jobs = select(_n.id.label("job")).where(_n.id.in_(ids)).subquery("page")
        newest = (
            runs_query()
            .where(_r.job_id == jobs.c.job)
            .order_by(_r.created_at.desc(), _r.run_uuid.desc())
            .limit(LATEST_RUNS)
            .lateral("newest")
        )
        return select(newest).select_from(jobs).join(newest, true())
    other = tables.runs.alias("other")
    ranked = (
        select(other.c.run_uuid)
        .where(other.c.job_id == _n.id)
        .order_by(other.c.created_at.desc(), other.c.run_uuid.desc())
        .limit(LATEST_RUNS)
        .correlate(tables.nodes)
    )
    # Joined by run id only (not by job id too): SQLite then looks each of the job's newest up by its key
    # instead of visiting every run of the job.
    return (
        select(*RUN_COLUMNS).select_from(tables.nodes).join(tables.runs, _r.run_uuid.in_(ranked)).where(_n.id.in_(ids))
    )


def _newest_runs(conn: Connection, ids: list[int], latest: dict[int, str]) -> dict[int, list[Any]]:
    """Each job's newest runs (newest first), and its latest run wherever it ranks: ``id → rows``."""
    found: dict[int, list[Any]] = {node: [] for node in ids}
    statement = _newest_runs_statement(conn.dialect.name)
    for start in range(0, len(ids), RUNS_CHUNK):
        for row in conn.execute(statement, {"ids": ids[start : start + RUNS_CHUNK]}):
            found[row.job_id].append(row)
    seen = {row.run_uuid for rows in found.values() for row in rows}
    missing = [run for run in latest.values() if run not in seen]
    if missing:
        for row in conn.execute(runs_query().where(_r.run_uuid.in_(missing))):
            found[row.job_id].append(row)
    for rows in found.values():
        rows.sort(key=lambda row: (row.created_at, row.run_uuid), reverse=True)
    return found


@cache
def _job_io_statement(dialect: str) -> Any:
    """The datasets each job of ``:ids`` (expanding) read and wrote: ``(job, key, namespace, name)`` rows.

    Each job's edges are read from the edge indexes, job by job: on PostgreSQL through a ``LATERAL``
    subquery (``OFFSET 0`` keeps the planner from turning it back into a join, which it would run as a hash
    join over every edge of the store).
    """
    job, dataset = tables.nodes.alias("job"), tables.nodes.alias("dataset")
    ids = bindparam("ids", expanding=True)

    def side(near: str, far: str, key: str) -> Any:
        columns = (job.c.id.label("job"), literal(key).label("key"), dataset.c.namespace, dataset.c.name)
        if dialect != "postgresql":
            edges = tables.edges
            return (
                select(*columns)
                .select_from(job)
                .join(edges, edges.c[near] == job.c.id)
                .join(dataset, dataset.c.id == edges.c[far])
                .where(job.c.id.in_(ids))
            )
        found = select(_e[far].label("dataset_id")).where(_e[near] == job.c.id).offset(0).lateral(f"{key}_edges")
        return (
            select(*columns)
            .select_from(job)
            .join(found, true())
            .join(dataset, dataset.c.id == found.c.dataset_id)
            .where(job.c.id.in_(ids))
        )

    return union_all(side("destination_id", "origin_id", "inputs"), side("origin_id", "destination_id", "outputs"))


def _job_io(conn: Connection, ids: list[int], visible: Visible) -> dict[int, dict[str, list[dict[str, str]]]]:
    """Every dataset each job read (``inputs``) and wrote (``outputs``), from the graph's edges, sorted."""
    found: dict[int, dict[str, list[dict[str, str]]]] = {node: {"inputs": [], "outputs": []} for node in ids}
    if not ids:
        return found
    rows = conn.execute(_job_io_statement(conn.dialect.name), {"ids": ids}).all()
    rows.sort(key=lambda row: (row.namespace, row.name))
    for job, key, namespace, name in rows:
        if visible is None or namespace in visible:
            found[job][key].append({"namespace": namespace, "name": name})
    return found


def job_objects(conn: Connection, ids: list[int], visible: Visible = None) -> dict[int, dict[str, Any]]:
    """``id → Job`` for each job of ``ids`` (see the module docstring for what each field says)."""
    if not ids:
        return {}
    visible = None if visible is None else frozenset(visible)
    query = (
        select(_n.id, _n.namespace, _n.name, _n.created_at, _n.updated_at, _j.facets, _j.latest_run_uuid)
        .join_from(tables.nodes, tables.jobs, _j.node_id == _n.id, isouter=True)
        .where(_n.id.in_(ids), _n.kind == "job")
    )
    rows = list(conn.execute(query))
    latest = {row.id: row.latest_run_uuid for row in rows if row.latest_run_uuid}
    runs = _newest_runs(conn, [row.id for row in rows], latest)
    versions = run_versions(conn, [run for found in runs.values() for run in found])
    io, tags = _job_io(conn, [row.id for row in rows], visible), node_tags(conn, [row.id for row in rows])
    jobs = {}
    for row in rows:
        facets = loads(row.facets, {})
        shown = facets if visible is None else scrub(facets, visible)
        newest = {run.run_uuid: run_object(run, versions[run.run_uuid], visible) for run in runs[row.id]}
        latest = newest.get(row.latest_run_uuid) if row.latest_run_uuid else None
        data = {
            "id": {"namespace": row.namespace, "name": row.name},
            "type": job_type(facets),
            "name": row.name,
            "simpleName": row.name,
            "createdAt": iso(row.created_at),
            "updatedAt": iso(row.updated_at),
            "namespace": row.namespace,
            "inputs": io[row.id]["inputs"],
            "outputs": io[row.id]["outputs"],
            "location": version_location(facets),
            "description": description(facets),
            "latestRun": latest,
            "latestRuns": list(newest.values())[:LATEST_RUNS],
            "facets": shown,
            "currentVersion": None if latest is None else latest["jobVersion"]["version"],
            "tags": tags.get(row.id, []),
            "nodeId": nodeids.node_id("job", row.namespace, row.name),
        }
        jobs[row.id] = {key: value for key, value in data.items() if value is not None}
    return jobs


def list_job_runs(conn: Connection, job_id: int, limit: int, offset: int, visible: Visible = None) -> tuple[list, int]:
    """A page of a job's Runs, newest first (by creation, then run id), and how many it has."""
    query = runs_query().where(_r.job_id == job_id).order_by(_r.created_at.desc(), _r.run_uuid.desc())
    rows, total = page(conn, query, limit, offset)
    versions = run_versions(conn, rows)
    visible = None if visible is None else frozenset(visible)
    return [run_object(row, versions[row.run_uuid], visible) for row in rows], total


def job_versions(conn: Connection, job_id: int, visible: Visible = None) -> list[dict[str, Any]]:
    """Every version of a job as Marquez's ``JobVersion``, newest first (by its first run).

    ``createdAt`` is when the first run of the version was created, ``latestRun`` its newest run.
    """
    rows = list(conn.execute(runs_query().where(_r.job_id == job_id)))
    versions = run_versions(conn, rows)
    first: dict[str, Any] = {}
    newest: dict[str, Any] = {}
    for row in rows:
        version = versions[row.run_uuid].id
        if version not in first or row.created_at < first[version].created_at:
            first[version] = row
        known = newest.get(version)
        if known is None or (row.created_at, row.run_uuid) > (known.created_at, known.run_uuid):
            newest[version] = row
    visible = None if visible is None else frozenset(visible)
    order = sorted(first, key=lambda version: (first[version].created_at, version), reverse=True)
    return [_version_object(versions[newest[v].run_uuid], first[v], newest[v], visible) for v in order]


def _version_object(version: Any, first: Any, latest: Any, visible: Visible) -> dict[str, Any]:
    def ids(pairs: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
        return [{"namespace": ns, "name": name} for ns, name in pairs if visible is None or ns in visible]

    data = {
        "id": {"namespace": latest.namespace, "name": latest.name, "version": version.id},
        "name": latest.name,
        "version": version.id,
        "createdAt": iso(first.created_at),
        "namespace": latest.namespace,
        "type": job_type(version.facets),
        "inputs": ids(version.inputs),
        "outputs": ids(version.outputs),
        "location": version_location(version.facets),
        "description": description(version.facets),
        "latestRun": run_object(latest, version, visible),
        "facets": version.facets if visible is None else scrub(version.facets, visible),
    }
    return {key: value for key, value in data.items() if value is not None}
