"""Marquez's ``Job`` objects from the store: one job, a page of jobs, a job's runs and versions.

A ``Job`` carries what the events said: ``type`` from the ``jobType`` facet
(:func:`..store.graph.node_types.job_type`), ``location`` from ``sourceCodeLocation``, ``description`` from
``documentation``, ``facets`` (the latest event's that carried job facets), ``inputs`` and ``outputs`` (every
dataset an event of the job read or wrote: the graph's edges), ``latestRun`` (the run with the latest
event), ``latestRuns`` (the :data:`LATEST_RUNS` newest runs), ``currentVersion`` (the latest run's job
version, see :mod:`.runs`) and ``tags``. ``nodeId`` (``job:<namespace>:<name>``, the lineage graph's
id) is added for the lineage page; Marquez's clients ignore it. A page of jobs costs a fixed number of
statements whatever its size: no statement per job.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Connection, Text, and_, any_, bindparam, cast, func, literal, select, true
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.sql.elements import BindParameter, ColumnElement

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.marquez.runs import (
    RUN_COLUMNS,
    description,
    io_column,
    iso,
    json_rows,
    json_rows_value,
    run_object,
    run_versions,
    runs_with_io_query,
    version_location,
)
from airflow_lineage_provider.consumer.marquez.shapes import Job, JobVersion, NodeId, Run, VersionId
from airflow_lineage_provider.consumer.store.graph.node_types import job_type
from airflow_lineage_provider.consumer.store.graph.versioned_cache import VersionedCache
from airflow_lineage_provider.consumer.store.read import node_totals
from airflow_lineage_provider.consumer.store.read.queries import Admit, name_size, named, sized_page, stored_size
from airflow_lineage_provider.consumer.store.read.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.read.tags import NODE
from airflow_lineage_provider.consumer.store.read.text import loads
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in, scrub
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import node_key

#: How many of its newest runs a Job lists in ``latestRuns``.
LATEST_RUNS = 10
#: Jobs per statement reading their newest runs.
RUNS_CHUNK = 500
#: Marquez's run states, the values ``runState`` may take.
RUN_STATES = ("NEW", "RUNNING", "COMPLETED", "ABORTED", "FAILED")

_n, _j, _r, _e = tables.nodes.c, tables.jobs.c, tables.runs.c, tables.edges.c


def page(conn: Connection, query: Any, limit: int, offset: int, total: int | None = None) -> tuple[list[Any], int]:
    """The rows of ``query`` from ``offset`` (at most ``limit``) and how many rows it has in all (``total`` when
    known, else counted)."""
    if total is None:
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
    cache: JobObjects | None = None,
    admit: Admit | None = None,
) -> tuple[list[Job | msgspec.Raw], int]:
    """A page of Jobs by namespace and name, and how many there are; ``states``: only jobs whose latest run
    is in one of them.

    With ``cache`` (and no namespace limit), the Jobs come from it at their node's current version, as
    encoded JSON (:class:`msgspec.Raw`); only the jobs missing there are read and built. ``admit`` is told each
    Job's size before any is built: a cached one's, or what the store holds of the values it shows
    (:func:`job_sizes`).
    """
    query = select(_n.id, _n.version).where(_n.kind == "job").order_by(_n.namespace, _n.name)
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
    # Without a filter but namespaces, the total is the kept counts (.schema.node_counts), not a count of every job.
    kept = None if name_contains or states else node_totals.total(conn, "job", namespace, visible)
    rows, total = page(conn, query, limit, offset, kept)
    if cache is not None and visible is None:
        found: Mapping[int, Job | msgspec.Raw] = cached_job_objects(
            conn, {row.id: row.version for row in rows}, cache, admit
        )
    else:
        ids = [row.id for row in rows]
        if admit is not None:
            sizes = job_sizes(conn, ids)
            admit([sizes.get(node, 0) for node in ids])
        found = job_objects(conn, ids, visible)
    # A job gone since the page was chosen (a prune or reset committed in between) is left out.
    return [found[row.id] for row in rows if row.id in found], total - (len(rows) - len(found))


#: Jobs as encoded JSON by node id, at the version they were built at (see :mod:`.versioned_cache`).
JobObjects = VersionedCache[msgspec.Raw]


#: Largest encoded Job kept in :data:`JobObjects`: the cache is bounded by count, and a job whose facets hold
#: megabytes is rebuilt when listed rather than held for good.
CACHED_JOB_BYTES = 256 * 1024


def cached_job_objects(
    conn: Connection, versions: dict[int, int], cache: JobObjects, admit: Admit | None = None
) -> dict[int, msgspec.Raw]:
    """``id → Job`` (encoded) for the jobs of ``versions`` (``id → node version`` read in this transaction):
    from ``cache`` at those versions, the others built (with no namespace limit) and kept there when small
    (:data:`CACHED_JOB_BYTES`); ``admit`` is told their sizes, in the order of ``versions``, before any is built."""
    found, missing = cache.lookup(versions)
    if admit is not None:
        sizes = {node: len(job) for node, job in found.items()}
        if missing:
            sizes.update(job_sizes(conn, missing))
        admit([sizes.get(node, 0) for node in versions])
    if missing:
        built = [(node, versions[node], msgspec.Raw(_encode(job))) for node, job in job_objects(conn, missing).items()]
        cache.keep([item for item in built if len(item[2]) <= CACHED_JOB_BYTES])
        found.update((node, job) for node, _, job in built)
    return found


#: Bytes of a Job without its names and stored values (members, times, its version id; a little over), of a Run
#: in it (``latestRuns``, ``latestRun``) without its job's names and facets, of a dataset among its ``inputs`` or
#: ``outputs`` without its names, and of an input or output of a newest run as read to compute its version.
JOB_BYTES, RUN_BYTES, EDGE_BYTES, IO_BYTES = 512, 512, 32, 24


#: Bytes of the names of a dataset a newest run read or wrote, for a job without edges (see :func:`job_sizes`).
NAMES_BYTES = 128
#: What each edge adds to the sum of a job's edges' bytes besides them: the sum carries their count too, above
#: 32 bits (no job's edges name 4 GiB of datasets), so one subquery per edge index gives both.
EDGE_COUNTED = 1 << 32


def job_sizes(conn: Connection, ids: list[int]) -> dict[int, int]:
    """``id → bytes`` a Job shows or is built from, read without loading them (an upper bound of the encoded Job
    within a small factor): its names and facets, each dataset it read or wrote (``inputs``, ``outputs``: the
    graph's edges, by the far end's names), its tags, and its newest runs with their facets (counted twice:
    ``latestRun`` repeats one of ``latestRuns``), the job facets each run's version is computed from and the
    datasets each run read and wrote (read to compute that version; counted from ``lineage_run_io``'s key, each
    with the average names of the job's edges — a run's datasets are among them — instead of looking each up)."""
    found: dict[int, int] = {}
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL jit = off")  # as for the page itself (:func:`_job_objects`)
    statement = _job_sizes_statement(conn.dialect.name)
    for start in range(0, len(ids), RUNS_CHUNK):
        for node, fixed, counted_edges, io_count in conn.execute(statement, {"ids": ids[start : start + RUNS_CHUNK]}):
            edge_count, edges = divmod(int(counted_edges), EDGE_COUNTED)
            names = -(-edges // edge_count) - EDGE_BYTES if edge_count else NAMES_BYTES
            found[node] = int(fixed) + edges + int(io_count) * (IO_BYTES + names)
    return found


def _names_size(dataset: Any, dialect: str) -> ColumnElement[int]:
    return name_size(dataset.c.namespace, dialect) + name_size(dataset.c.name, dialect)


def _edges_size(node: Any, dialect: str) -> ColumnElement[int]:
    """SQL: the bytes of the datasets job ``node`` read and wrote (the edges on either side of it, from the edge
    indexes) — their names, :data:`EDGE_BYTES` more each — plus their count times :data:`EDGE_COUNTED`."""
    sizes = []
    for near, far in (("destination_id", "origin_id"), ("origin_id", "destination_id")):
        rows, dataset = named(dialect, _e[far], tables.edges, f"sized_{far}")
        # BIGINT: psycopg (3) sends a plain Python int as INTEGER, and the count's factor is past 32 bits.
        each = literal(EDGE_COUNTED, BigInteger) + EDGE_BYTES + _names_size(dataset, dialect)
        total = select(func.sum(each)).select_from(rows).where(_e[near] == node)
        sizes.append(func.coalesce(total.scalar_subquery(), 0))
    return sizes[0] + sizes[1]


@cache
def _job_sizes_statement(dialect: str) -> Any:
    """``(job id, bytes but the edges and runs' datasets, bytes of the edges with their count (:func:`_edges_size`),
    datasets of its newest runs)`` for the jobs of ``:ids`` (expanding): see :func:`job_sizes`. A job's newest
    runs come from its ``(job_id, created_at)`` index, no further than the :data:`LATEST_RUNS`-th; their datasets
    from ``lineage_run_io``'s key, the edges from the edge indexes."""
    names = _names_size(tables.nodes, dialect)
    newest = (
        select(_r.run_uuid, _r.facets, _r.job_facets)
        .where(_r.job_id == _n.id)
        .order_by(_r.created_at.desc())
        .limit(LATEST_RUNS)
        .correlate(tables.nodes)
        .subquery("newest")
    )
    io = tables.run_io.c
    io_count = select(func.count()).select_from(tables.run_io).where(io.run_uuid == newest.c.run_uuid).correlate(newest)
    run_facets, job_facets = stored_size(newest.c.facets, dialect), stored_size(newest.c.job_facets, dialect)
    run_bytes = 2 * (RUN_BYTES + names + run_facets) + job_facets
    runs_bytes = select(func.sum(run_bytes)).select_from(newest).scalar_subquery()
    runs_io = select(func.sum(io_count.scalar_subquery())).select_from(newest).scalar_subquery()
    own = select(stored_size(_j.facets, dialect)).where(_j.node_id == _n.id).scalar_subquery()
    t = tables.node_tags.c
    tags = select(func.sum(4 + name_size(t.tag, dialect))).where(t.node_id == _n.id, t.field_key == NODE)
    ids: BindParameter[Any] = bindparam("ids", expanding=True)
    fixed = (
        JOB_BYTES
        + 4 * names
        + func.coalesce(own, 0)
        + func.coalesce(tags.scalar_subquery(), 0)
        + func.coalesce(runs_bytes, 0)
    )
    return select(_n.id, fixed, _edges_size(_n.id, dialect), func.coalesce(runs_io, 0)).where(_n.id.in_(ids))


_encode = msgspec.json.Encoder().encode


@cache
def _newest_runs_statement(dialect: str) -> Any:
    """The :data:`LATEST_RUNS` newest runs of each job of ``:ids`` (expanding), one statement for a whole page.

    Each job's runs are read newest first from its ``(job_id, created_at)`` index and no further than the
    :data:`LATEST_RUNS`-th, however many it has: a ``LATERAL`` subquery per job on PostgreSQL; on SQLite
    (no ``LATERAL``) the runs whose id is among the job's newest, a subquery correlated with the job.
    """
    if dialect == "postgresql":
        # The ids as an array: reading them from lineage_nodes would scan it whole until it is analyzed.
        jobs = (
            func.unnest(bindparam("ids", type_=postgresql.ARRAY(BigInteger)))
            .table_valued("job")
            .render_derived(name="page")
        )
        newest = (
            runs_with_io_query(dialect)
            .where(_r.job_id == jobs.c.job)
            .order_by(_r.created_at.desc(), _r.run_uuid.desc())
            .limit(LATEST_RUNS)
            .lateral("newest")
        )
        return select(newest).select_from(jobs).join(newest, true())
    ids: BindParameter[Any] = bindparam("ids", expanding=True)
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
        select(*RUN_COLUMNS, io_column(dialect))
        .select_from(tables.nodes)
        .join(tables.runs, _r.run_uuid.in_(ranked))
        .where(_n.id.in_(ids))
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
        for row in conn.execute(runs_with_io_query(conn.dialect.name).where(_r.run_uuid.in_(missing))):
            found[row.job_id].append(row)
    for rows in found.values():
        rows.sort(key=lambda row: (row.created_at, row.run_uuid), reverse=True)
    return found


def _io_columns(dialect: str) -> tuple[Any, Any]:
    """Columns ``inputs`` and ``outputs`` of a query on job nodes: the datasets each job read and wrote (the
    graph's edges), ``[[namespace, name], ...]``, each a subquery on an edge index."""
    columns = []
    for near, far, key in (("destination_id", "origin_id", "inputs"), ("origin_id", "destination_id", "outputs")):
        rows, dataset = named(dialect, _e[far], tables.edges, f"{key}_dataset")
        names = json_rows(dialect, dataset.c.namespace, dataset.c.name)
        found = select(names).select_from(rows).where(_e[near] == _n.id)
        columns.append(found.scalar_subquery().label(key))
    return columns[0], columns[1]


def _tags_column(dialect: str) -> Any:
    """Column ``tags`` of a query on job nodes: the tags on the job itself (as :func:`..tags.node_tags`)."""
    t = tables.node_tags.c
    names: ColumnElement[Any]
    if dialect == "postgresql":  # ordered as node_tags orders them (the column's collation)
        names = cast(func.json_agg(aggregate_order_by(t.tag, t.tag)), Text)
    else:  # sorted in Python: SQLite's BINARY collation is code point order, as Python's
        names = func.json_group_array(t.tag)
    return select(names).where(t.node_id == _n.id, t.field_key == NODE).scalar_subquery().label("tags")


def _tags(value: Any, dialect: str) -> list[str]:
    tags = json_rows_value(value)
    return tags if dialect == "postgresql" else sorted(tags)


def _datasets(value: Any, visible: Visible) -> list[NodeId]:
    """An ``inputs`` or ``outputs`` column as Marquez's dataset ids, sorted, the hidden ones left out."""
    pairs = sorted((namespace, name) for namespace, name in json_rows_value(value))
    return [NodeId(namespace=ns, name=name) for ns, name in pairs if visible is None or ns in visible]


def job_objects(conn: Connection, ids: list[int], visible: Visible = None) -> dict[int, Job]:
    """``id → Job`` for each job of ``ids`` (see the module docstring for what each field says)."""
    if not ids:
        return {}
    return _job_objects(conn, ids, visible)


@cache
def _jobs_statement(dialect: str) -> Any:
    """The page's jobs (``:ids``) with their facets, latest run, inputs, outputs and tags: built once."""
    inputs, outputs = _io_columns(dialect)
    if dialect == "postgresql":  # one array parameter, not a list rendered anew for every page
        each_id = any_(bindparam("ids", type_=postgresql.ARRAY(BigInteger)))
        node_in, job_in = _n.id == each_id, _j.node_id == each_id
    else:
        ids: BindParameter[Any] = bindparam("ids", expanding=True)
        node_in, job_in = _n.id.in_(ids), _j.node_id.in_(ids)
    columns = (iso_utc(_n.created_at).label("created_at"), iso_utc(_n.updated_at).label("updated_at"))
    return (
        select(_n.id, _n.namespace, _n.name, *columns, _j.facets, _j.latest_run_uuid)
        .add_columns(inputs, outputs, _tags_column(dialect))
        # The page's ids on both sides: PostgreSQL would otherwise hash every row of lineage_jobs.
        .join_from(tables.nodes, tables.jobs, and_(_j.node_id == _n.id, job_in), isouter=True)
        .where(node_in, _n.kind == "job")
    )


def _job_objects(conn: Connection, ids: list[int], visible: Visible) -> dict[int, Job]:
    visible = None if visible is None else frozenset(visible)
    if conn.dialect.name == "postgresql":
        # Without statistics (a store just loaded, autovacuum off) the planner's cost estimates for these
        # per-job subqueries pass jit_above_cost, and compiling them costs as much as the page itself. For
        # the rest of this read transaction only.
        conn.exec_driver_sql("SET LOCAL jit = off")
    query = _jobs_statement(conn.dialect.name)
    rows = list(conn.execute(query, {"ids": ids}))
    latest = {row.id: row.latest_run_uuid for row in rows if row.latest_run_uuid}
    runs = _newest_runs(conn, [row.id for row in rows], latest)
    versions = run_versions(conn, [run for found in runs.values() for run in found])
    jobs: dict[int, Job] = {}
    for row in rows:
        facets = loads(row.facets, {})
        shown = facets if visible is None else scrub(facets, visible)
        newest = {run.run_uuid: run_object(run, versions[run.run_uuid], visible) for run in runs[row.id]}
        latest_run = newest.get(row.latest_run_uuid) if row.latest_run_uuid else None
        version = None if latest_run is None or latest_run.job_version is None else latest_run.job_version.version
        jobs[row.id] = Job(
            id=NodeId(namespace=row.namespace, name=row.name),
            type=job_type(facets),
            name=row.name,
            simple_name=row.name,
            created_at=iso(row.created_at),
            updated_at=iso(row.updated_at),
            namespace=row.namespace,
            inputs=_datasets(row.inputs, visible),
            outputs=_datasets(row.outputs, visible),
            location=version_location(facets),
            description=description(facets),
            latest_run=latest_run,
            latest_runs=list(newest.values())[:LATEST_RUNS],
            facets=shown,
            current_version=version,
            tags=_tags(row.tags, conn.dialect.name),
            node_id=nodeids.node_id("job", row.namespace, row.name),
        )
    return jobs


def list_job_runs(
    conn: Connection, job_id: int, limit: int, offset: int, visible: Visible = None, admit: Admit | None = None
) -> tuple[list[Run], int]:
    """A page of a job's Runs, newest first (by creation, then run id), and how many it has; ``admit`` is told the
    size of each run's stored facets (and of the job facets its version is computed from) before they are read."""
    dialect = conn.dialect.name
    query = select(_r.run_uuid).where(_r.job_id == job_id).order_by(_r.created_at.desc(), _r.run_uuid.desc())
    size = stored_size(_r.facets, dialect) + stored_size(_r.job_facets, dialect)
    listed, total = sized_page(conn, query, size, limit, offset, admit)
    ids = [row.run_uuid for row in listed]
    read = {row.run_uuid: row for row in conn.execute(runs_with_io_query(dialect).where(_r.run_uuid.in_(ids)))}
    rows = [read[run] for run in ids if run in read]  # the others gone since the page was chosen
    versions = run_versions(conn, rows)
    visible = None if visible is None else frozenset(visible)
    return [run_object(row, versions[row.run_uuid], visible) for row in rows], total - (len(ids) - len(rows))


#: Bytes of a JobVersion without its names and stored values (members, times, ids, its run's members; a little
#: over).
VERSION_BYTES = 1024
#: Versions per statement when looking for one version among all of a job's.
VERSIONS_CHUNK = 100


def _io_key(dialect: str) -> Any:
    """SQL: what a run (of :data:`tables.runs`) read and wrote, as canonical text — its ``lineage_run_io`` rows in
    key order — so that two runs have the same text exactly when they have the same inputs and outputs."""
    io = tables.run_io.c
    item = io.direction + ":" + cast(io.dataset_id, Text)
    if dialect == "postgresql":
        said = func.string_agg(item, aggregate_order_by(literal(","), io.dataset_id, io.direction))
        return select(said).where(io.run_uuid == _r.run_uuid).scalar_subquery()
    # SQLite keeps the order of a subquery that an aggregate reads (it is not flattened into it).
    rows = select(item.label("item")).where(io.run_uuid == _r.run_uuid).order_by(io.dataset_id, io.direction)
    listed = rows.correlate(tables.runs).subquery("said")
    return select(func.group_concat(listed.c.item, ",")).scalar_subquery()


def _facets_key(dialect: str) -> Any:
    """SQL: what a run's version is computed from of its job facets, comparable in a ``PARTITION BY``: on
    PostgreSQL the MD5 of the text as :func:`.runs._job_facets` reads it (NUL as U+FFFD), on SQLite the
    text."""
    if dialect != "postgresql":
        return _r.job_facets
    return func.md5(func.replace(_r.job_facets, "\\u0000", "\\ufffd"))


@cache
def _versions_query(dialect: str) -> Any:
    """The versions of job ``:job_id``, newest first (by their first run, then their newest run's id): ``run_uuid`` (the
    version's newest run), ``first`` (its first run's creation) and ``total`` (how many versions it has).

    A version is the runs with the same inputs, outputs and job facets (:mod:`.runs`): grouped in SQL by
    :func:`_io_key` and :func:`_facets_key`, from the job's runs (``ix_lineage_runs_job``) and their
    ``lineage_run_io`` keys — nothing of the runs is loaded."""
    keyed = (
        select(_r.run_uuid, _r.created_at, _io_key(dialect).label("io_key"), _facets_key(dialect).label("facets_key"))
        .where(_r.job_id == bindparam("job_id"))
        .subquery("keyed")
    )
    part = (keyed.c.io_key, keyed.c.facets_key)
    newest_first = (keyed.c.created_at.desc(), keyed.c.run_uuid.desc())
    ranked = select(
        keyed.c.run_uuid,
        func.min(keyed.c.created_at).over(partition_by=part).label("first"),
        func.row_number().over(partition_by=part, order_by=newest_first).label("rank"),
    ).subquery("ranked")
    return (
        select(ranked.c.run_uuid, ranked.c.first, func.count().over().label("total"))
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.first.desc(), ranked.c.run_uuid.desc())
    )


def _version_rows(conn: Connection, job_id: int, limit: int, offset: int, admit: Admit | None) -> tuple[list[Any], int]:
    """A page of the job's versions (:func:`_versions_query`) as ``(run_uuid, first, size)`` rows, and how many
    versions the job has; ``size``: what the version shows of the store, read without loading it (its run's
    facets, its job facets — twice: ``description`` and ``location`` repeat parts of them — and its inputs' and
    outputs' names), told to ``admit``."""
    dialect = conn.dialect.name
    rows = list(conn.execute(_version_rows_statement(dialect), {"job_id": job_id, "limit": limit, "offset": offset}))
    if rows:
        total = rows[0].total
    elif offset == 0:
        total = 0
    else:  # a page past the end carries no count: count apart
        counted = select(func.count()).select_from(_versions_query(dialect).order_by(None).subquery())
        total = conn.execute(counted, {"job_id": job_id}).scalar() or 0
    if admit is not None:
        admit([row.size for row in rows])
    return rows, total


@cache
def _version_rows_statement(dialect: str) -> Any:
    """:func:`_version_rows`'s statement (``:job_id``, ``:limit``, ``:offset``): built once."""
    page = _versions_query(dialect).limit(bindparam("limit")).offset(bindparam("offset")).subquery("version_page")
    io = tables.run_io
    io_rows, io_dataset = named(dialect, io.c.dataset_id, io, "version_io")
    io_bytes = (
        select(func.sum(EDGE_BYTES + _names_size(io_dataset, dialect)))
        .select_from(io_rows)
        .where(io.c.run_uuid == page.c.run_uuid)
        .scalar_subquery()
    )
    size = (
        VERSION_BYTES
        + 3 * _names_size(tables.nodes, dialect)
        + stored_size(_r.facets, dialect)
        + 2 * stored_size(_r.job_facets, dialect)
        + func.coalesce(io_bytes, 0)
    )
    return (
        select(page.c.run_uuid, iso_utc(page.c.first).label("first"), page.c.total, size.label("size"))
        .select_from(page.join(tables.runs, _r.run_uuid == page.c.run_uuid).join(tables.nodes, _n.id == _r.job_id))
        .order_by(page.c.first.desc(), page.c.run_uuid.desc())
    )


def _version_objects(conn: Connection, rows: list[Any], visible: Visible) -> list[JobVersion]:
    """The JobVersions of ``rows`` (``run_uuid`` of each version's newest run, ``first``), in their order; a run
    gone since the rows were read (a prune or reset committed in between) is left out."""
    ids = [row.run_uuid for row in rows]
    read = {run.run_uuid: run for run in conn.execute(_runs_statement(conn.dialect.name), {"ids": ids})}
    versions = run_versions(conn, read.values())
    shown = None if visible is None else frozenset(visible)
    return [
        _version_object(versions[row.run_uuid], row.first, read[row.run_uuid], shown)
        for row in rows
        if row.run_uuid in read
    ]


@cache
def _runs_statement(dialect: str) -> Any:
    """The runs of ``:ids`` (expanding) as :func:`.runs.runs_with_io_query` reads them: built once."""
    ids: BindParameter[Any] = bindparam("ids", expanding=True)
    return runs_with_io_query(dialect).where(_r.run_uuid.in_(ids))


@cache
def _content_statement(dialect: str) -> Any:
    """What the versions of the runs of ``:ids`` (expanding) are computed from (:func:`.runs.run_versions`),
    without their facets: built once."""
    ids: BindParameter[Any] = bindparam("ids", expanding=True)
    content = select(_r.run_uuid, _r.job_facets, _n.namespace, _n.name, io_column(dialect))
    return content.join_from(tables.runs, tables.nodes, _n.id == _r.job_id).where(_r.run_uuid.in_(ids))


def list_job_versions(
    conn: Connection, job_id: int, limit: int, offset: int, visible: Visible = None, admit: Admit | None = None
) -> tuple[list[JobVersion], int]:
    """A page of the job's versions as Marquez's ``JobVersion``, newest first (by its first run; ties by its newest
    run's id), and how many it has; ``admit`` is told each version's size before anything of it is loaded.

    ``createdAt`` is when the first run of the version was created, ``latestRun`` its newest run.
    """
    rows, total = _version_rows(conn, job_id, limit, offset, admit)
    found = _version_objects(conn, rows, visible)
    return found, total - (len(rows) - len(found))


def job_versions(conn: Connection, job_id: int, visible: Visible = None) -> list[JobVersion]:
    """Every version of a job (:func:`list_job_versions`), newest first."""
    found: list[JobVersion] = []
    while True:
        page, total = list_job_versions(conn, job_id, VERSIONS_CHUNK, len(found), visible)
        found += page
        if not page or len(found) >= total:
            return found


def find_job_version(conn: Connection, job_id: int, version: str, visible: Visible = None) -> JobVersion | None:
    """The job's version ``version`` as Marquez's ``JobVersion``, or None: the job's versions are looked through
    :data:`VERSIONS_CHUNK` at a time, reading what a version id is computed from (inputs, outputs and job facets of
    its newest run), and only the one found is built."""
    wanted, offset = version.lower(), 0
    dialect = conn.dialect.name
    while True:
        rows, total = _version_rows(conn, job_id, VERSIONS_CHUNK, offset, None)
        ids = [row.run_uuid for row in rows]
        versions = run_versions(conn, list(conn.execute(_content_statement(dialect), {"ids": ids}))) if ids else {}
        for row in rows:
            found = versions.get(row.run_uuid)
            if found is not None and found.id == wanted:
                built = _version_objects(conn, [row], visible)
                return built[0] if built else None
        offset += len(rows)
        if not rows or offset >= total:
            return None


def _version_object(version: Any, first: str, latest: Any, visible: Visible) -> JobVersion:
    """A JobVersion: ``version`` (its content), ``first`` (when its first run was created, ISO text), ``latest``
    (its newest run, a row of :func:`.runs.runs_with_io_query`)."""

    def ids(pairs: tuple[tuple[str, str], ...]) -> list[NodeId]:
        return [NodeId(namespace=ns, name=name) for ns, name in pairs if visible is None or ns in visible]

    return JobVersion(
        id=VersionId(namespace=latest.namespace, name=latest.name, version=version.id),
        name=latest.name,
        version=version.id,
        created_at=iso(first),
        namespace=latest.namespace,
        type=job_type(version.facets),
        inputs=ids(version.inputs),
        outputs=ids(version.outputs),
        location=version_location(version.facets),
        description=description(version.facets),
        latest_run=run_object(latest, version, visible),
        facets=version.facets if visible is None else scrub(version.facets, visible),
    )
