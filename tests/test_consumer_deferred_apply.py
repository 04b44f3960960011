"""Deferred apply (``ingest_apply="deferred"``): events committed to an ingest log, answered, applied in batches.

On real SQLite and PostgreSQL: the answer's counts are those of inline apply, a read right after an ingest sees
its events (the read barrier), what a process logged and never applied is applied when the store is opened
again, a value the database refuses sets only its own event aside (a real trigger refuses it), retention keeps
what is still pending, and a whole-store reset empties the log. The server killed mid-load is in
``test_consumer_grouped_ingest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.service import reset_now, write_events
from airflow_lineage_provider.consumer.store import LineageStore, tables
from airflow_lineage_provider.consumer.store.ingest import log_events
from airflow_lineage_provider.consumer.store.retention import prune, statistics
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def deferred(store_url: str) -> Iterator[LineageStore]:
    store = LineageStore(store_url, ingest_apply="deferred")
    yield store
    store.dispose()


def _events(jobs: list[str], time: float = 0) -> list[LineageEvent]:
    return [
        parse_event(
            run_event("COMPLETE", job, inputs=[dataset(f"{job}_in")], outputs=[dataset(f"{job}_out")], time=time)
        )
        for job in jobs
    ]


def _count(store: LineageStore, table: sa.Table) -> int:
    with store.read() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0


def _graph(store: LineageStore) -> tuple[set[str], int]:
    """The job names of the graph, and its edges (read through the barrier)."""
    with store.read() as conn:
        n = tables.nodes.c
        jobs = set(conn.execute(sa.select(n.name).where(n.kind == "job")).scalars())
        edges = conn.execute(sa.select(sa.func.count()).select_from(tables.edges)).scalar() or 0
    return jobs, edges


def test_an_ingest_is_counted_as_inline_and_a_read_right_after_sees_it(deferred: LineageStore) -> None:
    events = _events(["a", "b"])
    result = write_events(deferred, [*events, events[0]])
    assert (result.stored, result.duplicates) == (2, 1)
    assert _graph(deferred) == ({"a", "b"}, 4)  # the read waited for the applier
    assert write_events(deferred, events).duplicates == 2  # posted again: nothing logged twice
    assert _count(deferred, tables.pending_events) == 0
    assert deferred.deferred is not None and deferred.deferred.statistics.events == 2


def test_what_a_stopped_process_logged_is_applied_when_the_store_is_opened_again(store_url: str) -> None:
    """A process logged events and died before its applier ran (only the log transaction committed): the next
    process to open the store applies them, and its first read waits for that."""
    first = LineageStore(store_url)  # inline: no applier of its own
    with first.write() as conn:
        log_events(conn, _events(["left", "behind"]))
    assert _count(first, tables.pending_events) == 2
    assert _graph(first) == (set(), 0)  # logged, not applied
    first.dispose()
    reopened = LineageStore(store_url, ingest_apply="deferred")
    try:
        assert _graph(reopened) == ({"left", "behind"}, 4)
        assert _count(reopened, tables.pending_events) == 0
    finally:
        reopened.dispose()


def test_an_event_the_graph_refuses_is_set_aside_and_the_rest_of_its_batch_applied(store_url: str) -> None:
    """A trigger (a real refusal by the database) rejects one job's node: that event alone is set aside with the
    reason, counted by the store's statistics, and the others of the batch are applied."""
    store = LineageStore(store_url)
    with store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER poisoned BEFORE INSERT ON lineage_nodes WHEN NEW.name = 'poison'"
                " BEGIN SELECT RAISE(ABORT, 'poisoned name'); END"
            )
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION poisoned() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned name'; END IF; RETURN NEW; END $$"
            )
            conn.exec_driver_sql(
                "CREATE TRIGGER poisoned BEFORE INSERT ON lineage_nodes FOR EACH ROW EXECUTE FUNCTION poisoned()"
            )
    with store.write() as conn:  # one batch for the applier: two good events and the poisoned one
        log_events(conn, _events(["good1", "poison", "good2"]))
    store.dispose()
    deferred = LineageStore(store_url, ingest_apply="deferred")
    try:
        assert _graph(deferred)[0] == {"good1", "good2"}
        with deferred.read() as conn:
            held = statistics(conn)
            reasons = conn.execute(sa.select(tables.unapplied_events.c.reason)).scalars().all()
        assert (held.pending, held.unapplied, held.events) == (0, 1, 3)  # its raw event stays stored
        assert len(reasons) == 1 and "poisoned name" in reasons[0]
        assert deferred.deferred is not None and deferred.deferred.statistics.split == 1
    finally:
        deferred.dispose()


def test_retention_keeps_an_event_until_it_is_applied(store_url: str) -> None:
    from datetime import datetime, timedelta, timezone

    store = LineageStore(store_url)
    try:
        with store.write() as conn:
            log_events(conn, _events(["old"]))  # eventTime 2024: older than any cut-off below
        cutoff = datetime.now(timezone.utc) + timedelta(days=1)
        with store.write() as conn:
            assert prune(conn, cutoff).events == 0  # pending: kept
        with store.write() as conn:
            conn.execute(sa.delete(tables.pending_events))  # as if applied
        with store.write() as conn:
            assert prune(conn, cutoff).events == 1
    finally:
        store.dispose()


def test_a_whole_store_reset_applies_then_empties_the_log(deferred: LineageStore) -> None:
    write_events(deferred, _events(["a"]))
    reset_now(deferred, None)
    assert _graph(deferred) == (set(), 0)
    assert _count(deferred, tables.events) == 0
    assert _count(deferred, tables.pending_events) == 0


def test_the_http_api_answers_from_the_graph_right_after_each_post(store_url: str) -> None:
    """Through the app (grouped ingest, routes): each POST is readable by the next GET, and the retention
    statistics show the ingest log's counts."""
    app = create_app(store_url=store_url, anonymous=Access.ADMIN, ingest_apply="deferred")
    try:
        with TestClient(app) as client:
            for n in range(5):
                event: dict[str, Any] = run_event("COMPLETE", f"job{n}", outputs=[dataset(f"out{n}")])
                assert client.post("/api/v1/lineage", json=event).status_code == 201
                jobs = client.get("/api/v1/namespaces/pipelines/jobs", params={"limit": 100}).json()["jobs"]
                assert f"job{n}" in {job["name"] for job in jobs}
            held = client.get("/api/v1/retention").json()["statistics"]
            assert (held["pendingEvents"], held["unappliedEvents"]) == (0, 0)
    finally:
        app.state.store.dispose()


def test_an_unknown_ingest_apply_is_refused_naming_the_choices(store_url: str) -> None:
    with pytest.raises(ValueError, match="ingest_apply must be one of inline, deferred, got 'later'"):
        create_app(store_url=store_url, anonymous=Access.ADMIN, ingest_apply="later")


@pytest.mark.postgres
def test_a_read_that_waits_too_long_for_the_applier_is_answered_503(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session holds a pending row locked (as another process's applier would, stuck): this process's
    applier skips it, and a read waiting for it is answered 503 with Retry-After once the wait runs out — then
    served as soon as the row is applied."""
    from airflow_lineage_provider.consumer.store import deferred_apply

    monkeypatch.setattr(deferred_apply, "READ_WAIT_SECONDS", 0.5)
    app = create_app(store_url=pg_store_url, anonymous=Access.ADMIN, ingest_apply="deferred")
    store: LineageStore = app.state.store
    try:
        with store.write() as conn:
            log_events(conn, _events(["held"]))
        holder = store.engine.connect()
        holder.execute(sa.select(tables.pending_events.c.seq).with_for_update())  # locked until rolled back
        with TestClient(app) as client:
            answer = client.get("/api/v1/namespaces/pipelines/jobs")
            assert answer.status_code == 503 and answer.headers["Retry-After"] == "30"
            assert "has not applied the events logged before this read" in answer.json()["detail"]
            holder.rollback()
            holder.close()
            jobs = client.get("/api/v1/namespaces/pipelines/jobs").json()["jobs"]
            assert {job["name"] for job in jobs} == {"held"}
    finally:
        store.dispose()
