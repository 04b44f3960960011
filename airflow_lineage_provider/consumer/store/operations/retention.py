"""Retention: prune raw events and finished-with runs older than a cut-off; never the current graph.

Jobs, datasets, edges, schemas and column lineage stay. Each job's latest run stays too, so the graph
keeps its ``latestRun``. Idempotency holds within the retention window: an event re-sent after its copy
was pruned is stored again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, delete, exists, func, insert, not_, or_, select
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.graph.versioned_cache import bump_versions
from airflow_lineage_provider.consumer.store.read.visibility import event_names_hidden_namespace, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.unapplied import count_unapplied, forget_gone


@dataclass(frozen=True)
class PruneResult:
    """How many rows retention removed."""

    events: int
    runs: int


def prune(conn: Connection, older_than: datetime, visible: Collection[str] | None = None) -> PruneResult:
    """Delete events that happened or arrived before ``older_than``, and runs whose last event is before it.

    An event is kept at most the retention period after it arrived, whatever its ``eventTime`` says: one
    stored with a far-future time (before the consumer refused them) is pruned like any other. An event still
    waiting to be applied (:mod:`.deferred_apply`) is kept for the next prune; one set aside as unapplicable is
    pruned like any other, and its set-aside row goes with it.

    ``visible`` (a namespace-limited key's visible namespaces, :mod:`.visibility`) confines the prune to what
    lies wholly inside them: events that name no other namespace (the events listing's rule), and runs whose
    job and every input and output are in them. None (every namespace) builds the statements without it.
    """
    e = tables.events.c
    if visible is not None and not visible:
        return PruneResult(events=0, runs=0)  # a key that sees no node holds nothing to prune
    logged = select(tables.pending_events.c.event_key)  # not applied yet (deferred apply): kept until it is
    old = and_(or_(e.event_time < older_than, e.received_at < older_than), e.event_key.not_in(logged))
    if visible is not None:
        old = and_(old, not_(event_names_hidden_namespace(visible, conn.dialect.name)))
    deleted = conn.execute(delete(tables.events).where(old))
    events = deleted.rowcount
    if events:
        forget_gone(conn)  # set-aside rows (deferred apply) of the events that went
    latest = select(tables.jobs.c.latest_run_uuid).where(tables.jobs.c.latest_run_uuid.is_not(None))
    stale_where = and_(tables.runs.c.updated_at < older_than, tables.runs.c.run_uuid.not_in(latest))
    if visible is not None:
        stale_where = and_(stale_where, _run_inside(visible, conn.dialect.name))
    stale = select(tables.runs.c.run_uuid).where(stale_where)
    # Jobs losing runs show fewer runs (a Job lists its newest): entries kept by version are stale.
    bump_versions(conn, select(tables.runs.c.job_id).where(tables.runs.c.run_uuid.in_(stale)).distinct())
    conn.execute(delete(tables.run_io).where(tables.run_io.c.run_uuid.in_(stale)))
    runs = conn.execute(delete(tables.runs).where(tables.runs.c.run_uuid.in_(stale))).rowcount
    return PruneResult(events=events or 0, runs=runs or 0)


def _run_inside(visible: Collection[str], dialect: str) -> ColumnElement[bool]:
    """A run (of ``lineage_runs``) whose job and every input and output live in ``visible`` namespaces.

    Aliases, correlated to the run only: the statements this goes into update ``lineage_nodes`` and delete
    from ``lineage_run_io``, which must not be taken for the tables read here.
    """
    r, io = tables.runs, tables.run_io.alias("io_of_run")
    job, dataset = tables.nodes.alias("job_of_run"), tables.nodes.alias("dataset_of_run")
    job_inside = select(1).where(job.c.id == r.c.job_id, namespace_in(job.c.namespace, visible, dialect)).correlate(r)
    io_outside = (
        select(1)
        .select_from(io.join(dataset, dataset.c.id == io.c.dataset_id))
        .where(io.c.run_uuid == r.c.run_uuid, not_(namespace_in(dataset.c.namespace, visible, dialect)))
        .correlate(r)
    )
    return and_(exists(job_inside), not_(exists(io_outside)))


#: What can start a prune: the consumer's timer, ``POST /api/v1/retention``, or an ingest.
TRIGGERS = ("timer", "api", "ingest")
#: The triggers of scheduled prunes (with the configured ``retention_days``), which the timer counts from.
SCHEDULED = ("timer", "ingest")

#: How many prune records the store keeps (the oldest go as new ones come).
KEPT_PRUNES = 100


@dataclass(frozen=True)
class PruneRecord:
    """One prune as ``lineage_prunes`` keeps it: when, the cut-off, what started it, what it removed."""

    pruned_at: datetime
    cutoff: datetime
    trigger: str
    events: int
    runs: int
    duration_seconds: float


def record_prune(conn: Connection, record: PruneRecord) -> None:
    """Append ``record`` to ``lineage_prunes`` and drop the records older than the latest :data:`KEPT_PRUNES`."""
    if record.trigger not in TRIGGERS:
        raise ValueError(f"a prune is triggered by one of {', '.join(TRIGGERS)}, not {record.trigger!r}")
    p = tables.prunes.c
    conn.execute(
        insert(tables.prunes).values(
            pruned_at=record.pruned_at,
            cutoff=record.cutoff,
            triggered_by=record.trigger,
            events=record.events,
            runs=record.runs,
            duration_us=round(record.duration_seconds * 1_000_000),
        )
    )
    kept = select(p.id).order_by(p.id.desc()).limit(KEPT_PRUNES).scalar_subquery()
    oldest_kept = select(func.min(p.id)).where(p.id.in_(kept))
    conn.execute(delete(tables.prunes).where(p.id < oldest_kept.scalar_subquery()))


def recent_prunes(conn: Connection, limit: int) -> list[PruneRecord]:
    """The latest ``limit`` prune records, newest first."""
    p = tables.prunes.c
    query = select(p.pruned_at, p.cutoff, p.triggered_by, p.events, p.runs, p.duration_us)
    rows = conn.execute(query.order_by(p.pruned_at.desc(), p.id.desc()).limit(limit))
    return [
        PruneRecord(at, cutoff, trigger, events=events, runs=runs, duration_seconds=micros / 1_000_000)
        for at, cutoff, trigger, events, runs, micros in rows
    ]


def last_scheduled_prune(conn: Connection) -> datetime | None:
    """When the latest scheduled prune (:data:`SCHEDULED`) ran, by any process; None before the first."""
    p = tables.prunes.c
    return conn.execute(select(func.max(p.pruned_at)).where(p.triggered_by.in_(SCHEDULED))).scalar()


@dataclass(frozen=True)
class StoreStatistics:
    """What the store holds: rows of each kind, and the span of its raw events (None when it has none)."""

    events: int
    runs: int
    jobs: int
    datasets: int
    oldest_event_time: datetime | None
    newest_event_time: datetime | None
    oldest_received_at: datetime | None
    newest_received_at: datetime | None
    #: Events logged and not applied to the graph yet, and those set aside as unapplicable (deferred apply,
    #: :mod:`.deferred_apply`; both 0 with inline apply).
    pending: int = 0
    unapplied: int = 0


def statistics(conn: Connection) -> StoreStatistics:
    """Counts of events, runs, jobs and datasets, and the oldest and newest event by ``eventTime`` and by arrival.

    Five statements: the events' count and span in one pass (``eventTime`` bounds from its index), the runs'
    count, the nodes counted per kind from the index on kind, namespace, name, and the ingest log's two counts.
    """
    e, n = tables.events.c, tables.nodes.c
    span = conn.execute(
        select(
            func.count(),
            func.min(e.event_time),
            func.max(e.event_time),
            func.min(e.received_at),
            func.max(e.received_at),
        )
    ).one()
    runs = conn.execute(select(func.count()).select_from(tables.runs)).scalar() or 0
    kinds: dict[str, int] = dict(
        conn.execute(select(n.kind, func.count()).where(n.kind.in_(("job", "dataset"))).group_by(n.kind)).all()
    )
    return StoreStatistics(
        events=span[0] or 0,
        runs=runs,
        jobs=kinds.get("job", 0),
        datasets=kinds.get("dataset", 0),
        oldest_event_time=span[1],
        newest_event_time=span[2],
        oldest_received_at=span[3],
        newest_received_at=span[4],
        pending=conn.execute(select(func.count()).select_from(tables.pending_events)).scalar() or 0,
        unapplied=count_unapplied(conn),
    )
