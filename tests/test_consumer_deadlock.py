"""A real PostgreSQL deadlock between an ingest and another writer: the ingest is retried and stored, and
nothing reaches the sender as an error.

Another transaction locks the two node rows an ingest will upsert, in the opposite order: the ingest
holds the first and waits for the second while the other transaction asks for the first. PostgreSQL
breaks the cycle by aborting the transaction that waited longest (the ingest, whose ``deadlock_timeout``
expires first); the consumer retries it once the other transaction has committed.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer.service import prune_now, store_events
from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.ingest import node_key
from airflow_lineage_provider.consumer.validation import parse_event

pytestmark = pytest.mark.postgres
pytest_plugins = ("support.consumer_fixtures",)


def test_an_ingest_chosen_as_deadlock_victim_is_retried_and_stored(
    pg_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = LineageStore(pg_store_url)
    other = create_store_engine(pg_store_url)
    try:
        outputs = [dataset("orders")]
        store_events(store, [parse_event(run_event("COMPLETE", "load", outputs=outputs))])
        first, second = sorted([node_key("job", "pipelines", "load"), node_key("dataset", "warehouse", "orders")])

        ingest_waits = threading.Event()
        failures: list[BaseException] = []

        def lock_in_the_opposite_order() -> None:
            try:
                with other.connect() as conn, conn.begin():
                    conn.exec_driver_sql("SET LOCAL deadlock_timeout = '30s'")  # let the ingest be the victim
                    lock = "SELECT id FROM lineage_nodes WHERE node_key = %(key)s FOR UPDATE"
                    conn.exec_driver_sql(lock, {"key": second})
                    ingest_waits.wait(30)
                    conn.exec_driver_sql(lock, {"key": first})  # closes the cycle
            except BaseException as error:  # reported by the test thread
                failures.append(error)

        locker = threading.Thread(target=lock_in_the_opposite_order)
        locker.start()
        time.sleep(0.3)  # the other transaction holds the second row

        def report_when_the_ingest_waits() -> None:
            with other.connect() as conn:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    waiting = conn.exec_driver_sql(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE 'INSERT INTO lineage_nodes%%'"
                    ).scalar_one()
                    conn.rollback()
                    if waiting:
                        ingest_waits.set()
                        return
                    time.sleep(0.05)

        watcher = threading.Thread(target=report_when_the_ingest_waits)
        watcher.start()
        caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.service")
        result, errors = store_events(store, [parse_event(run_event("COMPLETE", "load", outputs=outputs, time=60))])
        watcher.join(30)
        locker.join(30)

        assert not failures, failures
        assert ingest_waits.is_set(), "the ingest never waited for the locked node row"
        assert (result.stored, errors) == (1, {})
        assert "retrying a lineage ingest after a conflict with another writer (1): deadlock detected" in caplog.text
        with store.read() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM lineage_runs").scalar_one() == 2
    finally:
        store.dispose()
        other.dispose()


def test_retention_chosen_as_deadlock_victim_is_retried_and_logged(
    pg_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = LineageStore(pg_store_url)
    other = create_store_engine(pg_store_url)
    try:
        outputs = [dataset("orders")]
        old, latest = run_event("COMPLETE", "load", outputs=outputs), run_event("COMPLETE", "load", time=60)
        store_events(store, [parse_event(old), parse_event(latest)])
        old_run = old["run"]["runId"]
        prune_waits = threading.Event()
        failures: list[BaseException] = []

        def lock_in_the_opposite_order() -> None:
            try:
                with other.connect() as conn, conn.begin():
                    conn.exec_driver_sql("SET LOCAL deadlock_timeout = '30s'")  # let retention be the victim
                    io = "SELECT run_uuid FROM lineage_run_io WHERE run_uuid = %(run)s FOR UPDATE"
                    conn.exec_driver_sql(io, {"run": old_run})
                    prune_waits.wait(30)
                    conn.exec_driver_sql("SELECT id FROM lineage_events FOR UPDATE")  # closes the cycle
            except BaseException as error:  # reported by the test thread
                failures.append(error)

        locker = threading.Thread(target=lock_in_the_opposite_order)
        locker.start()
        time.sleep(0.3)

        def report_when_retention_waits() -> None:
            with other.connect() as conn:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    waiting = conn.exec_driver_sql(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE 'DELETE FROM lineage_run_io%%'"
                    ).scalar_one()
                    conn.rollback()
                    if waiting:
                        prune_waits.set()
                        return
                    time.sleep(0.05)

        watcher = threading.Thread(target=report_when_retention_waits)
        watcher.start()
        caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.service")
        result = prune_now(store, days=1)
        watcher.join(30)
        locker.join(30)

        assert not failures, failures
        assert prune_waits.is_set(), "retention never waited for the locked run row"
        assert (result.events, result.runs) == (2, 1)
        assert "retrying lineage retention after a conflict with another writer (1): deadlock detected" in caplog.text
    finally:
        store.dispose()
        other.dispose()
