"""Events deferred apply set aside (``lineage_unapplied_events``): listing them, and putting them back in the log.

An event is set aside when the graph could not take it alone (the database refused a value of its, or the
apply failed on it: :mod:`.deferred_apply`); its raw event stays in ``lineage_events``. Once the cause is gone
— a trigger dropped, a bug fixed by an upgrade — :func:`requeue` puts every set-aside event whose raw event is
still stored back in the ingest log, in the order they were set aside, for the applier to apply (one it refuses
again is set aside again, with the new reason). A namespace reset or a prune that deletes a set-aside event's raw
event removes its row too (:func:`forget_gone`); requeue removes and counts any left.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, delete, exists, func, insert, select

from airflow_lineage_provider.consumer.store.schema import tables


@dataclass(frozen=True)
class Unapplied:
    """One set-aside event: its key, when and why it was set aside, and what its raw event says it is."""

    event_key: str
    failed_at: datetime
    reason: str
    event_type: str | None
    event_time: datetime | None
    job_namespace: str | None
    job_name: str | None
    producer: str | None


def count_unapplied(conn: Connection) -> int:
    """How many events are set aside."""
    return conn.execute(select(func.count()).select_from(tables.unapplied_events)).scalar() or 0


def unapplied(conn: Connection, limit: int) -> tuple[list[Unapplied], int]:
    """The ``limit`` most recently set-aside events (newest first), and how many there are in all."""
    u, e = tables.unapplied_events.c, tables.events.c
    query = (
        select(u.event_key, u.failed_at, u.reason, e.event_type, e.event_time, e.job_namespace, e.job_name, e.producer)
        .select_from(tables.unapplied_events.outerjoin(tables.events, e.event_key == u.event_key))
        .order_by(u.failed_at.desc(), u.event_key)
        .limit(limit)
    )
    return [Unapplied(*row) for row in conn.execute(query)], count_unapplied(conn)


@dataclass(frozen=True)
class Requeued:
    """What :func:`requeue` did: events put back in the ingest log, and set-aside rows whose raw event had gone."""

    requeued: int
    gone: int


def forget_gone(conn: Connection) -> int:
    """Remove the set-aside rows whose raw event has gone (a reset or a prune deleted it): nothing is left to apply
    or show of them. How many went."""
    u, e = tables.unapplied_events.c, tables.events.c
    gone = ~exists().where(e.event_key == u.event_key)
    return conn.execute(delete(tables.unapplied_events).where(gone)).rowcount or 0


def requeue(conn: Connection) -> Requeued:
    """Put every set-aside event whose raw event is stored back in the ingest log (oldest set aside first) and
    remove the set-aside rows, in the open transaction of ``conn``."""
    u, e, p = tables.unapplied_events.c, tables.events.c, tables.pending_events.c
    stored = exists().where(e.event_key == u.event_key)
    pending = exists().where(p.event_key == u.event_key)  # never expected: a set-aside event is not pending
    again = select(u.event_key).where(stored, ~pending).order_by(u.failed_at, u.event_key)
    # RETURNING, not rowcount: an INSERT's rowcount is gone once SQLAlchemy closes the cursor on psycopg (3).
    inserted = insert(tables.pending_events).from_select(["event_key"], again).returning(p.event_key)
    requeued = len(conn.execute(inserted).all())
    total = conn.execute(delete(tables.unapplied_events)).rowcount or 0
    return Requeued(requeued=requeued, gone=total - requeued)
