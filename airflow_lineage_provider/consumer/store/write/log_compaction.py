"""Giving the ingest log's disk space back once it is drained (PostgreSQL).

Every event deferred apply logs is a row of ``lineage_pending_events`` inserted by its ingest and deleted by the
transaction that applies it (:mod:`.deferred_apply`): the table only ever holds what is pending, but its files keep
what a backlog once made them. PostgreSQL reclaims a deleted row's heap space for reuse, yet a B-tree never gives
its pages back to the file system, and where autovacuum is off or behind the dead index entries pile up too: a bulk
load leaves the empty log's files tens of megabytes large, and they are read by the log's lookups (the max and min
of ``seq`` that every read starts with, the applier's oldest-first scan).

:func:`compact_drained_log`, called by the applier when it finds the log empty, truncates the log when its files
have grown past :data:`COMPACT_LOG_BYTES` and it is still empty under an ``ACCESS EXCLUSIVE`` lock taken without
waiting: an ingest logging events or another process's applier holds a lock on the table, so neither is ever made
to wait behind it, and the truncation is simply tried at the next drain. ``TRUNCATE`` keeps the ``seq`` sequence
(no ``RESTART IDENTITY``), so sequence numbers still only grow, which reads waiting for what was logged before them
rely on. A read's look at the log waits for the few milliseconds the truncation holds the lock.

SQLite needs none of it: a deleted row's pages go to the database file's free list and the next inserts reuse them.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, text

from airflow_lineage_provider.consumer.store.schema import tables

#: Size of the ingest log's files (table and indexes) past which a drained log is truncated. The log's bounds
#: keep its live rows to a megabyte or two (10,000 events by default), so a log past this is mostly dead space;
#: below it a truncation would cost more (new files, a lock) than the space is worth.
COMPACT_LOG_BYTES = 8 * 1024 * 1024
#: Events an applier applies between two looks at the log's size (the log grows by a few hundred bytes per
#: event logged, so fewer could not have brought it past :data:`COMPACT_LOG_BYTES` since a truncation).
CHECK_AFTER_EVENTS = 1_000

_SIZE = text("SELECT pg_total_relation_size(CAST(:name AS regclass))")


def log_bytes(conn: Connection) -> int:
    """Bytes of the ingest log's files on PostgreSQL: its table, TOAST and indexes."""
    return int(conn.execute(_SIZE, {"name": tables.pending_events.name}).scalar() or 0)


def compact_drained_log(conn: Connection, threshold: int | None = None) -> bool:
    """Truncate the ingest log in ``conn``'s transaction when the store is PostgreSQL, the log's files are larger
    than ``threshold`` bytes (default :data:`COMPACT_LOG_BYTES`), its ``ACCESS EXCLUSIVE`` lock is free at once,
    and it holds no row. Whether it did; when the lock is not free this raises and the transaction is failed (the
    caller rolls it back)."""
    if conn.dialect.name != "postgresql":
        return False
    if log_bytes(conn) <= (COMPACT_LOG_BYTES if threshold is None else threshold):
        return False
    name = tables.pending_events.name
    conn.exec_driver_sql(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE NOWAIT")
    if conn.execute(select(tables.pending_events.c.seq).limit(1)).first() is not None:
        return False
    conn.exec_driver_sql(f"TRUNCATE {name}")
    return True
