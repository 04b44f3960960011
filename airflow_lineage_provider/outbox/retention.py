"""Pruning the outbox: events every destination has (delivered or exported), once old enough.

Pending and dead-lettered events are never pruned, nor is anything while the outbox has no destination
(nobody has received those events yet).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, and_, delete, func, select

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.tables import DELIVERED, deliveries, destinations, events, sequencer

CHUNK = 5_000


def prunable_ids(conn: Connection, cutoff: datetime, limit: int = CHUNK) -> list[int]:
    """Ids of events stored before ``cutoff`` that every destination has."""
    conn.execute(select(sequencer.c.last_seq).where(sequencer.c.id == 1).with_for_update())  # no new destination
    destination_count = conn.execute(select(func.count()).select_from(destinations)).scalar_one()
    if not destination_count:
        return []
    delivered = (
        select(func.count())
        .where(and_(deliveries.c.event_id == events.c.id, deliveries.c.status == DELIVERED))
        .scalar_subquery()
    )
    query = (
        select(events.c.id)
        .where(events.c.stored_at < cutoff, events.c.seq.is_not(None), delivered == destination_count)
        .order_by(events.c.id)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def prune(engine: Engine, older_than_days: float, now: datetime | None = None) -> int:
    """Delete events stored more than ``older_than_days`` ago that every destination has; return how many."""
    if older_than_days < 0:
        raise ValueError(f"older_than_days={older_than_days!r} must not be negative")
    cutoff = (now or store.utcnow()) - timedelta(days=older_than_days)
    removed = 0
    while True:
        with engine.begin() as conn:
            ids = prunable_ids(conn, cutoff)
            if not ids:
                return removed
            conn.execute(delete(deliveries).where(deliveries.c.event_id.in_(ids)))
            conn.execute(delete(events).where(events.c.id.in_(ids)))
        removed += len(ids)
