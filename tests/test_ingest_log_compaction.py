"""The ingest log gives its disk space back once drained (:mod:`...store.write.log_compaction`).

On real PostgreSQL: an applier that drained a log whose files grew past the bound truncates it, the log's
sequence numbers keep growing afterwards and what was applied stays readable byte for byte; a log holding a row,
or locked by another transaction, is not truncated and the truncation never waits for the lock. On real SQLite the
drained log is left to SQLite's free list (nothing truncated), with the same answers.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import OperationalError
from support.consumer_helpers import dataset, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer.ingest.service import write_events
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write import log_compaction
from airflow_lineage_provider.consumer.store.write.failures import sqlstate
from airflow_lineage_provider.consumer.store.write.ingest import log_events
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

pytest_plugins = ("support.consumer_fixtures",)

#: Events per ingest, and ingests, of the load that grows the log.
BATCH, BATCHES = 50, 6


def _events(prefix: str, count: int) -> list[LineageEvent]:
    return [
        parse_event(run_event("COMPLETE", f"{prefix}_{n}", inputs=[dataset(f"{prefix}_{n}_in")], time=n))
        for n in range(count)
    ]


def _log_files(store: LineageStore) -> tuple[int, int]:
    """The log's files on PostgreSQL: its table's file node (a truncation gives it a new one) and their bytes."""
    with store.engine.connect() as conn:
        node = conn.execute(
            sa.text("SELECT pg_relation_filenode(CAST(:t AS regclass))"), {"t": "lineage_pending_events"}
        )
        return int(node.scalar() or 0), log_compaction.log_bytes(conn)


def _pending(store: LineageStore) -> list[int]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(sa.select(tables.pending_events.c.seq).order_by(tables.pending_events.c.seq)).scalars()
        )


@pytest.fixture
def compacting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every drain after an applied event looks at the log, and any size is past the bound."""
    monkeypatch.setattr(log_compaction, "CHECK_AFTER_EVENTS", 1)
    monkeypatch.setattr(log_compaction, "COMPACT_LOG_BYTES", 0)


@pytest.mark.usefixtures("compacting")
def test_a_drained_log_is_truncated_on_postgresql_and_its_sequence_keeps_growing(store_url: str) -> None:
    store = LineageStore(store_url, ingest_apply="deferred")
    assert store.deferred is not None
    try:
        sent: list[LineageEvent] = []
        for number in range(BATCHES):
            batch = _events(f"load{number}", BATCH)
            write_events(store, batch)
            sent += batch
        with store.read() as conn:  # waits until the applier drained the log
            stored = conn.execute(sa.select(tables.events.c.payload)).scalars().all()
            jobs = conn.execute(sa.select(sa.func.count()).where(tables.nodes.c.kind == "job")).scalar()
        # What was applied is all there, its raw events byte for byte, whatever happened to the log.
        assert sorted(stored) == sorted(event.payload for event in sent)
        assert jobs == len(sent)
        assert _pending(store) == []
        postgres = store.engine.dialect.name == "postgresql"
        if postgres:
            wait_until(lambda: store.deferred.statistics.log_compactions >= 1, "the drained log was never truncated")  # type: ignore[union-attr]
            size = _log_files(store)[1]
            # An empty table's files: the heap's none, a page per index (a log that was only drained keeps pages
            # for every row it held).
            assert size <= 3 * 8192, size
        else:
            assert store.deferred.statistics.log_compactions == 0
    finally:
        store.dispose()
    if not postgres:
        return  # SQLite's log numbers its rows by rowid, from the largest held: an empty log starts again at 1
    # The sequence goes on from where it was: a row logged now comes after every row logged before.
    later = LineageStore(store_url, ingest_apply="inline")
    try:
        with later.write() as conn:
            log_events(conn, _events("later", 1))
        assert _pending(later)[0] > BATCH * BATCHES
    finally:
        later.dispose()


@pytest.mark.postgres
def test_a_log_still_holding_a_row_is_not_truncated(pg_store_url: str) -> None:
    store = LineageStore(pg_store_url, ingest_apply="inline")
    try:
        with store.write() as conn:
            log_events(conn, _events("pending", 2))
        node, _ = _log_files(store)
        with store.write() as conn:
            assert not log_compaction.compact_drained_log(conn, threshold=0)
        assert len(_pending(store)) == 2
        assert _log_files(store)[0] == node
    finally:
        store.dispose()


@pytest.mark.postgres
def test_a_log_under_the_bound_or_locked_by_an_ingest_is_left_alone_without_waiting(pg_store_url: str) -> None:
    store = LineageStore(pg_store_url, ingest_apply="inline")
    try:
        node, size = _log_files(store)
        with store.write() as conn:
            assert not log_compaction.compact_drained_log(conn, threshold=size)  # not past the bound
        with store.engine.connect() as ingest:
            with ingest.begin():
                ingest.exec_driver_sql("LOCK TABLE lineage_pending_events IN ROW EXCLUSIVE MODE")  # as an insert does
                started = time.monotonic()
                with pytest.raises(OperationalError) as refused, store.write() as conn:
                    log_compaction.compact_drained_log(conn, threshold=0)
                assert time.monotonic() - started < 5
                assert sqlstate(refused.value) == "55P03"  # lock_not_available: NOWAIT
        assert _log_files(store)[0] == node
        with store.write() as conn:  # once the lock is free
            assert log_compaction.compact_drained_log(conn, threshold=0)
        assert _log_files(store)[0] != node
    finally:
        store.dispose()


@pytest.mark.usefixtures("compacting")
def test_a_read_looking_at_the_log_for_a_moment_does_not_put_the_truncation_off(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read woken by the applier looks at the log just as the applier finds it drained: its share of the lock,
    held for a moment, makes the truncation's ``NOWAIT`` fail. The applier tries again shortly instead of leaving
    it to a drain that may not come for long."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "COMPACT_PAUSE_SECONDS", 0.2)  # tries over 0.8 s; the read lets go at 0.1
    store = LineageStore(pg_store_url, ingest_apply="deferred")
    assert store.deferred is not None
    try:
        node = _log_files(store)[0]
        with store.engine.connect() as reader:
            reader.execute(sa.select(tables.pending_events.c.seq).limit(1))  # its transaction holds a share
            releasing = threading.Timer(0.1, reader.rollback)
            releasing.start()
            started = time.monotonic()
            store.deferred._compact_log()
            releasing.join()
        assert time.monotonic() - started >= 0.1
        assert store.deferred.statistics.log_compactions == 1
        assert _log_files(store)[0] != node
    finally:
        store.dispose()


def test_sqlite_never_truncates(tmp_path: Path) -> None:
    """SQLite reuses a deleted row's pages from its free list: nothing to truncate, and no PostgreSQL statement."""
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}", ingest_apply="inline")
    try:
        with store.write() as conn:
            log_events(conn, _events("kept", 1))
        with store.write() as conn:
            conn.execute(sa.delete(tables.pending_events))
            assert not log_compaction.compact_drained_log(conn, threshold=0)
        assert _pending(store) == []
    finally:
        store.dispose()


@pytest.mark.postgres
@pytest.mark.usefixtures("compacting")
def test_an_applier_whose_role_may_not_truncate_applies_on_and_stops_trying(
    pg_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's tables belong to another role, which granted this one reads and writes but not ``TRUNCATE``: the
    applier applies everything, says once that the log keeps its size, and never takes the log's lock again."""
    owner = LineageStore(pg_store_url, ingest_apply="inline")
    role = f"alp_no_truncate_{uuid.uuid4().hex[:10]}"
    with owner.engine.begin() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
        conn.exec_driver_sql(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    url = sa.make_url(pg_store_url).set(username=role).render_as_string(hide_password=False)
    store = LineageStore(url, ingest_apply="deferred")
    assert store.deferred is not None
    try:
        with caplog.at_level(logging.WARNING):
            for number in range(3):
                write_events(store, _events(f"load{number}", BATCH))
                with store.read() as conn:
                    assert (
                        conn.execute(sa.select(sa.func.count()).select_from(tables.events)).scalar()
                        == (number + 1) * BATCH
                    )
                wait_until(lambda: not store.deferred.running, "the applier never ended")  # type: ignore[union-attr]
        assert _pending(store) == []
        assert store.deferred.statistics.log_compactions == 0
        assert caplog.text.count("cannot be truncated") == 1
    finally:
        store.dispose()
        with owner.engine.begin() as conn:
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        owner.dispose()
