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
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from support.consumer_helpers import dataset, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer.ingest.service import prune_now, store_events
from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.write.ingest import node_key
from airflow_lineage_provider.consumer.validation import parse_event

pytestmark = pytest.mark.postgres
pytest_plugins = ("support.consumer_fixtures",)
T = TypeVar("T")


def as_deadlock_victim(
    other: Any,
    hold: Callable[[Any], None],
    close_cycle: Callable[[Any], None],
    waiter: str | tuple[str, ...],
    work: Callable[[], T],
) -> T:
    """Run ``work`` while another transaction on ``other`` makes it a deadlock victim.

    The other transaction runs ``hold`` (locks what ``work`` will want), waits until a statement starting
    with ``waiter`` (one of them) waits for a lock, then runs ``close_cycle`` (asks for what ``work`` holds). Its
    ``deadlock_timeout`` is long, so PostgreSQL aborts ``work``'s transaction, which must be retried.
    """
    holding = threading.Event()
    victim_waits = threading.Event()
    failures: list[BaseException] = []

    def lock_in_the_opposite_order() -> None:
        try:
            with other.connect() as conn, conn.begin():
                conn.exec_driver_sql("SET LOCAL deadlock_timeout = '30s'")  # let work be the victim
                hold(conn)
                holding.set()
                victim_waits.wait(30)
                close_cycle(conn)
        except BaseException as error:  # reported by the test thread
            failures.append(error)
            holding.set()

    def report_when_work_waits() -> None:
        with other.connect() as conn:

            def work_waits() -> bool:
                waiting = conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ANY(%(q)s)",
                    {"q": [start + "%" for start in ((waiter,) if isinstance(waiter, str) else waiter)]},
                ).scalar_one()
                conn.rollback()
                return bool(waiting)

            try:
                wait_until(work_waits, f"no {waiter} statement ever waited for the locked rows", interval=0.05)
            except AssertionError:  # reported by the test thread: the event stays unset
                return
            victim_waits.set()

    locker = threading.Thread(target=lock_in_the_opposite_order)
    locker.start()
    assert holding.wait(30), "the other transaction never held its rows"
    watcher = threading.Thread(target=report_when_work_waits)
    watcher.start()
    result = work()
    watcher.join(30)
    locker.join(30)
    assert not failures, failures
    assert victim_waits.is_set(), f"no {waiter} statement ever waited for the locked rows"
    return result


def test_an_ingest_chosen_as_deadlock_victim_is_retried_and_stored(
    pg_store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = LineageStore(pg_store_url, ingest_apply="inline")  # the graph's upserts in the ingest's transaction
    other = create_store_engine(pg_store_url)
    try:
        outputs = [dataset("orders")]
        store_events(store, [parse_event(run_event("COMPLETE", "load", outputs=outputs))])
        first, second = sorted([node_key("job", "pipelines", "load"), node_key("dataset", "warehouse", "orders")])
        lock = "SELECT id FROM lineage_nodes WHERE node_key = %(key)s FOR UPDATE"
        caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.ingest.service")
        result, errors = as_deadlock_victim(
            other,
            hold=lambda conn: conn.exec_driver_sql(lock, {"key": second}),
            close_cycle=lambda conn: conn.exec_driver_sql(lock, {"key": first}),
            waiter=("INSERT INTO lineage_nodes",),
            work=lambda: store_events(store, [parse_event(run_event("COMPLETE", "load", outputs=outputs, time=60))]),
        )
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
    store = LineageStore(pg_store_url, ingest_apply="inline")  # the graph's upserts in the ingest's transaction
    other = create_store_engine(pg_store_url)
    try:
        outputs = [dataset("orders")]
        old, latest = run_event("COMPLETE", "load", outputs=outputs), run_event("COMPLETE", "load", time=60)
        store_events(store, [parse_event(old), parse_event(latest)])
        io = "SELECT run_uuid FROM lineage_run_io WHERE run_uuid = %(run)s FOR UPDATE"
        caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.ingest.service")
        result = as_deadlock_victim(
            other,
            hold=lambda conn: conn.exec_driver_sql(io, {"run": old["run"]["runId"]}),
            close_cycle=lambda conn: conn.exec_driver_sql("SELECT id FROM lineage_events FOR UPDATE"),
            waiter="DELETE FROM lineage_run_io",
            work=lambda: prune_now(store, days=1),
        )
        assert (result.events, result.runs) == (2, 1)
        assert "retrying lineage retention after a conflict with another writer (1): deadlock detected" in caplog.text
    finally:
        store.dispose()
        other.dispose()
