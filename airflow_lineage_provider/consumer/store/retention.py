"""Retention: prune raw events and finished-with runs older than a cut-off; never the current graph.

Jobs, datasets, edges, schemas and column lineage stay. Each job's latest run stays too, so the graph
keeps its ``latestRun``. Idempotency holds within the retention window: an event re-sent after its copy
was pruned is stored again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, delete, or_, select

from airflow_lineage_provider.consumer.store import tables


@dataclass(frozen=True)
class PruneResult:
    """How many rows retention removed."""

    events: int
    runs: int


def prune(conn: Connection, older_than: datetime) -> PruneResult:
    """Delete events that happened or arrived before ``older_than``, and runs whose last event is before it.

    An event is kept at most the retention period after it arrived, whatever its ``eventTime`` says: one
    stored with a far-future time (before the consumer refused them) is pruned like any other.
    """
    e = tables.events.c
    events = conn.execute(delete(tables.events).where(or_(e.event_time < older_than, e.received_at < older_than)))
    events = events.rowcount
    latest = select(tables.jobs.c.latest_run_uuid).where(tables.jobs.c.latest_run_uuid.is_not(None))
    stale = select(tables.runs.c.run_uuid).where(
        and_(tables.runs.c.updated_at < older_than, tables.runs.c.run_uuid.not_in(latest))
    )
    conn.execute(delete(tables.run_io).where(tables.run_io.c.run_uuid.in_(stale)))
    runs = conn.execute(delete(tables.runs).where(tables.runs.c.run_uuid.in_(stale))).rowcount
    return PruneResult(events=events or 0, runs=runs or 0)
