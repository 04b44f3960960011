"""Deferred apply (``ingest_apply="deferred"``): events committed to an ingest log, answered, applied in batches.

On real SQLite and PostgreSQL: the answer's counts are those of inline apply, a read right after an ingest sees
its events (the read barrier), what a process logged and never applied is applied when the store is opened
again, a value the database refuses sets only its own event aside (a real trigger refuses it), retention keeps
what is still pending, and a whole-store reset empties the log. The server killed mid-load is in
``test_consumer_grouped_ingest.py``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event
from support.environment import PG_URL
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.ingest.service import reset_now, write_events
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.operations.retention import prune, statistics
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import log_events
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
    first = LineageStore(store_url, ingest_apply="inline")  # inline: no applier of its own
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


def _poison_trigger(store: LineageStore) -> None:
    """A real refusal by the database: a trigger rejecting the job node named ``poison``."""
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


def test_an_event_the_graph_refuses_is_set_aside_and_the_rest_of_its_batch_applied(store_url: str) -> None:
    """A trigger (a real refusal by the database) rejects one job's node: that event alone is set aside with the
    reason, counted by the store's statistics, and the others of the batch are applied."""
    store = LineageStore(store_url, ingest_apply="inline")
    _poison_trigger(store)
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

    store = LineageStore(store_url, ingest_apply="inline")
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
    with pytest.raises(ValueError, match="ingest_apply must be one of auto, inline, deferred, got 'later'"):
        create_app(store_url=store_url, anonymous=Access.ADMIN, ingest_apply="later")


def _namespaces(answer: Any) -> set[str]:
    return {namespace["name"] for namespace in answer.json()["namespaces"]}


@pytest.mark.postgres
def test_a_read_that_waits_too_long_for_the_applier_answers_from_what_is_applied_saying_how_far_behind(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session holds a pending row locked (as another process's applier would, stuck): this process's
    applier skips it. A read waiting for it answers once the wait runs out, from the graph as applied, with
    ``Lineage-Pending-Events``; a write that reads the graph (a prune) is refused 503 with Retry-After. Once the
    row is applied, reads see it and carry no header."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "READ_WAIT_SECONDS", 0.5)
    app = create_app(store_url=pg_store_url, anonymous=Access.ADMIN, ingest_apply="deferred")
    store: LineageStore = app.state.store
    holder: sa.Connection | None = None
    try:
        with store.write() as conn:
            log_events(conn, _events(["held"]))
        holder = store.engine.connect()
        holder.execute(sa.select(tables.pending_events.c.seq).with_for_update())  # locked until rolled back
        with TestClient(app) as client:
            answer = client.get("/api/v1/namespaces")
            assert answer.status_code == 200, answer.text
            assert _namespaces(answer) == set() and answer.headers["Lineage-Pending-Events"] == "1"
            walk = client.get("/api/v1/lineage", params={"nodeId": "job:pipelines:held"})
            assert walk.headers.get("Lineage-Pending-Events") == "1", (walk.status_code, walk.text)
            prune = client.post("/api/v1/retention", params={"days": 30})
            assert prune.status_code == 503 and prune.headers["Retry-After"] == "30"
            assert "has not applied the events logged before this read" in prune.json()["detail"]
            assert store.deferred is not None and store.deferred.statistics.stale_reads == 2
            holder.rollback()
            holder.close()
            answer = client.get("/api/v1/namespaces/pipelines/jobs")
            assert {job["name"] for job in answer.json()["jobs"]} == {"held"}
            assert "Lineage-Pending-Events" not in answer.headers
    finally:
        if holder is not None and not holder.closed:
            holder.close()  # a failed assertion must not leave the applier's rows locked for dispose() to wait on
        store.dispose()


@pytest.mark.postgres
def test_a_read_behind_a_bulk_load_answers_at_once_from_what_is_applied(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More events logged before a read than it waits for (a bulk load, a backlog replayed after an outage): the
    read does not wait for the applier at all (no waited read counted) and says about how many it did not see."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "READ_WAIT_EVENTS", 2)
    app = create_app(store_url=pg_store_url, anonymous=Access.ADMIN, ingest_apply="deferred")
    store: LineageStore = app.state.store
    holder: sa.Connection | None = None
    try:
        with store.write() as conn:
            log_events(conn, _events(["a", "b", "c", "d", "e"]))
        holder = store.engine.connect()
        holder.execute(sa.select(tables.pending_events.c.seq).with_for_update())
        with TestClient(app) as client:
            assert store.deferred is not None
            waited = store.deferred.statistics.waited_reads
            answer = client.get("/api/v1/namespaces")
            assert answer.status_code == 200 and _namespaces(answer) == set()
            assert answer.headers["Lineage-Pending-Events"] == "5"
            assert store.deferred.statistics.waited_reads == waited
            holder.rollback()
            holder.close()
            wait_until(lambda: _count(store, tables.pending_events) == 0, "the applier to apply the five events")
            answer = client.get("/api/v1/namespaces/pipelines/jobs")
            assert {job["name"] for job in answer.json()["jobs"]} == {"a", "b", "c", "d", "e"}
            assert "Lineage-Pending-Events" not in answer.headers
    finally:
        if holder is not None and not holder.closed:
            holder.close()  # a failed assertion must not leave the applier's rows locked for dispose() to wait on
        store.dispose()


@pytest.mark.postgres
def test_events_another_applier_held_then_let_go_are_applied_without_another_request(pg_store_url: str) -> None:
    """Another process's applier holds pending rows and ends without applying them (its process killed, its
    connection cut): this process's applier, which skipped them, keeps looking while the log holds events, long
    after its linger, and applies them once they are free — no ingest or read has to come and wake it."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    store = LineageStore(pg_store_url, ingest_apply="deferred")
    holder: sa.Connection | None = None
    try:
        with store.write() as conn:
            log_events(conn, _events(["held_x", "held_y"]))
        holder = store.engine.connect()
        holder.execute(sa.select(tables.pending_events.c.seq).with_for_update())
        assert store.deferred is not None
        store.deferred.wake()
        time.sleep(deferred_apply.LINGER_SECONDS * 2.5)  # past the linger after which an idle applier ends
        assert store.deferred.running, "the applier stopped while the log still held events"
        holder.rollback()
        holder.close()

        def pending() -> int:  # counted apart from store.read(), which would wake the applier itself
            with store.engine.connect() as conn:
                return conn.execute(sa.select(sa.func.count()).select_from(tables.pending_events)).scalar_one()

        wait_until(lambda: pending() == 0, "the let-go events to be applied", timeout=10)
        wait_until(lambda: not store.deferred.running, "the applier to end once the log is empty", timeout=10)
        assert _graph(store)[0] == {"held_x", "held_y"}
    finally:
        if holder is not None and not holder.closed:
            holder.close()
        store.dispose()


def test_disposing_the_store_applies_what_is_pending_at_once_and_ends_the_applier(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The applier would wait a minute for more events; disposing the store (what the app's shutdown does) makes
    it apply what is pending now, end, and give its connection back."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "APPLY_DELAY_SECONDS", 60.0)
    store = LineageStore(store_url, ingest_apply="deferred")
    assert store.deferred is not None
    write_events(store, _events(["last"]))
    assert store.deferred.running
    store.dispose()
    assert not store.deferred.running
    inline = LineageStore(store_url, ingest_apply="inline")
    try:
        assert _graph(inline) == ({"last"}, 2)
        assert _count(inline, tables.pending_events) == 0
    finally:
        inline.dispose()


def test_disposing_a_store_that_fails_ends_its_retrying_applier_and_keeps_the_log(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph's tables are gone from under the applier (it retries, as for any failure of the store itself):
    disposing the store ends the retries, without waiting out the pause between them (made an hour here, so a
    dispose that waited it out never returns within the test's wait); the logged event stays pending for the
    next start."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "MAX_RETRY_PAUSE_SECONDS", 3600.0)
    store = LineageStore(store_url, ingest_apply="deferred")
    assert store.deferred is not None
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE lineage_edges RENAME TO lineage_edges_away")
    write_events(store, _events(["stuck"]))
    wait_until(lambda: store.deferred.statistics.store_failures >= 3, "the applier never retried")  # type: ignore[union-attr]
    disposing = threading.Thread(target=store.dispose, daemon=True)
    disposing.start()
    wait_until(lambda: not disposing.is_alive(), "dispose() waited out the applier's retry pause")
    assert not store.deferred.running
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE lineage_edges_away RENAME TO lineage_edges")
        assert conn.execute(sa.select(sa.func.count()).select_from(tables.pending_events)).scalar() == 1
    store.dispose()


@pytest.mark.postgres
def test_deferred_stores_opened_and_disposed_leave_no_connection_open(pg_store_url: str) -> None:
    """Twenty deferred stores in turn, each ingesting, reading and disposed: none leaves a PostgreSQL session
    behind (an applier that outlived its store kept one each, until the server refused new clients)."""
    name = f"alp_leak_{uuid.uuid4().hex[:8]}"
    url = f"{pg_store_url}&application_name={name}"
    watcher = sa.create_engine(PG_URL)
    sessions = sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
    try:
        for n in range(20):
            store = LineageStore(url, ingest_apply="deferred")
            write_events(store, _events([f"job{n}"]))
            assert _graph(store)[0] >= {f"job{n}"}
            store.dispose()

            def left() -> int:
                with watcher.connect() as conn:
                    return int(conn.execute(sessions, {"name": name}).scalar() or 0)

            # A closed session's backend leaves pg_stat_activity shortly after.
            wait_until(
                lambda: left() == 0, f"sessions of store {n} still open after dispose()", detail=lambda: str(left())
            )
    finally:
        watcher.dispose()


def test_collect_lineages_walker_waits_for_what_a_deferred_server_logged_to_be_applied(store_url: str) -> None:
    """CollectLineageOperator's reader never applies the ingest log (that is the consumer's): it waits for the
    consumer's applier to apply what was logged before the walk, so it does not walk a graph behind a 201."""
    from airflow_lineage_provider.consumer.reads import LineageWalker

    server = LineageStore(store_url, ingest_apply="deferred")
    with server.write(applied=False) as conn:
        log_events(conn, _events(["upstream_job"]))  # logged, answered; applied by the server's applier
    server.deferred.wake()  # type: ignore[union-attr]
    walker = LineageWalker(store_url)
    try:
        out = walker.dataset_id("warehouse", "upstream_job_out")
        assert out is not None
        [row] = walker.table_edges(out, "upstream", depth=1, max_nodes=10, since=None)
        assert row["target_table"] == "warehouse/upstream_job_in"
    finally:
        walker.close()
        server.dispose()


def test_collect_lineages_walker_never_applies_and_reads_what_is_applied_when_no_one_applies(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With no consumer applying (its applier behind or stopped), the reader waits its bounded time, then reads the
    graph as applied and says how far behind it is; the log stays for the consumer."""
    from airflow_lineage_provider.consumer.reads import LineageWalker

    server = LineageStore(store_url, ingest_apply="inline")  # logs without applying
    with server.write() as conn:
        log_events(conn, _events(["upstream_job"]))
    server.dispose()
    walker = LineageWalker(store_url)
    walker.store.applied_wait = 0.2
    try:
        with caplog.at_level("WARNING"):
            assert walker.dataset_id("warehouse", "upstream_job_out") is None  # not applied: not in the graph
        assert "events logged before this read are not applied yet" in caplog.text
        with walker.store.read() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.pending_events)).scalar() > 0
    finally:
        walker.close()


def test_an_event_whose_apply_raises_is_set_aside_and_the_store_stays_readable(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault no real input produces today — the apply code raising on one event (a bug) — is simulated: that
    event alone is set aside with the error, the rest of its batch is applied, and reads are answered (an
    applier that died on it would have left every later read waiting 30 s and answered 503)."""
    from airflow_lineage_provider.consumer.store.write import ingest

    add = ingest._Changes.add

    def failing_add(self: Any, event: LineageEvent) -> None:
        if event.job is not None and event.job.name == "buggy":
            raise KeyError("a bug in applying this event")
        add(self, event)

    monkeypatch.setattr(ingest._Changes, "add", failing_add)
    store = LineageStore(store_url, ingest_apply="deferred")
    try:
        write_events(store, _events(["fine1", "buggy", "fine2"]))
        assert _graph(store)[0] == {"fine1", "fine2"}
        with store.read() as conn:
            held = statistics(conn)
            [reason] = conn.execute(sa.select(tables.unapplied_events.c.reason)).scalars().all()
        assert (held.pending, held.unapplied, held.events) == (0, 1, 3)
        assert reason == "applying this event failed: KeyError: 'a bug in applying this event'"
        write_events(store, _events(["later"]))  # the applier goes on
        assert "later" in _graph(store)[0]
    finally:
        store.dispose()


def test_auto_defers_on_postgresql_and_applies_inline_on_sqlite(store_url: str) -> None:
    """``auto`` (the default unless LINEAGE_INGEST_APPLY says otherwise): deferred on PostgreSQL, inline on SQLite."""
    store = LineageStore(store_url, ingest_apply="auto")
    try:
        assert (store.deferred is not None) == store_url.startswith("postgresql")
        write_events(store, _events(["either"]))
        assert _graph(store)[0] == {"either"}
    finally:
        store.dispose()


def test_the_airflow_option_defaults_to_auto_and_refuses_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lineage_provider import conf

    assert conf.consumer_ingest_apply() == "auto"
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_INGEST_APPLY", "Deferred")
    assert conf.consumer_ingest_apply() == "deferred"
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_INGEST_APPLY", "sometimes")
    with pytest.raises(
        ValueError, match="consumer_ingest_apply must be one of auto, inline, deferred, got 'sometimes'"
    ):
        conf.consumer_ingest_apply()


def test_set_aside_events_are_listed_and_requeued_once_the_cause_is_gone(store_url: str) -> None:
    """An operator sees the set-aside event and why; a requeue while the trigger still refuses sets it aside
    again; once the trigger is dropped, a requeue applies it."""
    app = create_app(store_url=store_url, anonymous=Access.ADMIN, ingest_apply="deferred")
    store: LineageStore = app.state.store
    _poison_trigger(store)
    try:
        with TestClient(app) as client:
            batch = [run_event("COMPLETE", name, outputs=[dataset(f"{name}_out")]) for name in ("poison", "fine")]
            assert client.post("/api/v1/lineage/batch", json=batch).json()["successful"] == 2  # before the apply
            listed = client.get("/api/v1/ingest-log/unapplied").json()
            assert listed["totalCount"] == 1
            [row] = listed["unapplied"]
            assert (row["jobNamespace"], row["jobName"], row["eventType"]) == ("pipelines", "poison", "COMPLETE")
            assert "poisoned name" in row["reason"] and row["failedAt"].endswith("Z")
            again = client.post("/api/v1/ingest-log/unapplied/requeue").json()
            assert again == {"requeued": 1, "gone": 0, "unapplied": 1}  # still refused: set aside again
            with store.engine.begin() as conn:
                conn.exec_driver_sql(
                    "DROP TRIGGER poisoned" + ("" if conn.dialect.name == "sqlite" else " ON lineage_nodes")
                )
            assert client.post("/api/v1/ingest-log/unapplied/requeue").json() == {
                "requeued": 1,
                "gone": 0,
                "unapplied": 0,
            }
            jobs = client.get("/api/v1/namespaces/pipelines/jobs").json()["jobs"]
            assert {job["name"] for job in jobs} == {"poison", "fine"}
            assert client.get("/api/v1/ingest-log/unapplied").json() == {"unapplied": [], "totalCount": 0}
    finally:
        store.dispose()


def test_an_inline_store_requeues_what_a_deferred_server_set_aside(tmp_path: Path) -> None:
    """A store applying inline (SQLite's default) may hold set-aside events of a deferred server that shared it:
    a requeue applies them with an applier of its own; a set-aside row whose raw event has gone is removed."""
    sqlite_url = f"sqlite:///{tmp_path / 'lineage.db'}"
    deferred = LineageStore(sqlite_url, ingest_apply="deferred")
    _poison_trigger(deferred)
    write_events(deferred, _events(["poison"]))
    assert _graph(deferred)[0] == set()
    with deferred.write() as conn:  # a set-aside row whose raw event a reset or prune removed since
        conn.execute(
            sa.insert(tables.unapplied_events).values(
                event_key="0" * 64, failed_at=datetime.now(timezone.utc), reason="x"
            )
        )
    with deferred.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER poisoned")
    deferred.dispose()
    app = create_app(store_url=sqlite_url, anonymous=Access.ADMIN, ingest_apply="auto")  # inline on SQLite
    assert app.state.store.deferred is None
    try:
        with TestClient(app) as client:
            answer = client.post("/api/v1/ingest-log/unapplied/requeue")
            assert answer.json() == {"requeued": 1, "gone": 1, "unapplied": 0}
            assert {job["name"] for job in client.get("/api/v1/namespaces/pipelines/jobs").json()["jobs"]} == {"poison"}
    finally:
        app.state.store.dispose()


def test_the_ingest_log_routes_need_a_key_without_namespace_limits(tmp_path: Path) -> None:
    from airflow_lineage_provider.consumer.security.access import ApiKey, NamespaceScope

    limited = ApiKey("ops", Access.ADMIN, "ops-s3cret-key", NamespaceScope(("pipelines*",)))
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", keys=(limited,))
    with TestClient(app) as client:
        for method, path in (("GET", "/api/v1/ingest-log/unapplied"), ("POST", "/api/v1/ingest-log/unapplied/requeue")):
            answer = client.request(method, path, headers={"X-API-Key": "ops-s3cret-key"})
            assert answer.status_code == 403, answer.text
            assert "limited to some namespaces" in answer.json()["detail"]


def test_a_namespace_reset_or_a_prune_takes_the_set_aside_rows_of_the_events_it_deletes(store_url: str) -> None:
    from datetime import timedelta

    store = LineageStore(store_url, ingest_apply="deferred")
    _poison_trigger(store)
    try:
        write_events(store, _events(["poison"]))
        assert _count(store, tables.unapplied_events) == 1
        reset_now(store, "pipelines")  # the namespace of the poisoned job: its event goes, and its set-aside row
        assert (_count(store, tables.events), _count(store, tables.unapplied_events)) == (0, 0)
        write_events(store, _events(["poison"]))
        assert _count(store, tables.unapplied_events) == 1
        with store.write() as conn:
            assert prune(conn, datetime.now(timezone.utc) + timedelta(days=1)).events == 1
        assert (_count(store, tables.events), _count(store, tables.unapplied_events)) == (0, 0)
    finally:
        store.dispose()


def test_a_namespace_reset_removes_the_log_rows_of_pending_events_it_deletes_and_none_is_applied(
    store_url: str,
) -> None:
    """Events logged and not applied yet when a reset deletes them (logged after the reset waited for the log):
    their log rows go with them, and the applier does not apply them from what it keeps parsed."""
    from airflow_lineage_provider.consumer.store.write.deferred_apply import DeferredApply

    store = LineageStore(store_url, ingest_apply="inline")  # logs only through log_events: no applier of its own
    try:
        late = _events(["late"])
        with store.write() as conn:
            log_events(conn, late)
        applier = DeferredApply(store)
        with applier._changed:
            applier._hand(late)
        reset_now(store, "pipelines")
        assert (_count(store, tables.events), _count(store, tables.pending_events)) == (0, 0)
        assert applier._apply_batch() == 0
        assert _graph(store) == (set(), 0)
    finally:
        store.dispose()
