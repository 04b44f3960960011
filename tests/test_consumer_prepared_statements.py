"""On psycopg2 the ingest's statements run as prepared statements of the server (``store.driver_sql``): prepared once
per DBAPI connection, in a string without data (the server keeps the string a statement was prepared from: never an
``EXECUTE``'s arrays), those of ``one_round_trip``'s batch together, again on a new connection; an error never
leaves the client believing in a statement the server does not have (or the reverse); and the switch off sends no
``PREPARE``. What they store is held to the SQLAlchemy statements' rows by
``tests/test_consumer_ingest_statements.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer.store import LineageStore, driver_sql, ingest
from airflow_lineage_provider.consumer.store.statements import statements
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

pytest_plugins = ("support.consumer_fixtures",)

pytestmark = pytest.mark.postgres

_Cursor: Any = pytest.importorskip("psycopg2.extensions").cursor

#: SQL sent by the cursors of the connections of :func:`store` (a held write's as part of the string that sends it).
SENT: list[str] = []


class _RecordingCursor(_Cursor):
    def execute(self, query: Any, vars: Any = None) -> Any:
        SENT.append(query.decode() if isinstance(query, bytes) else query)
        return super().execute(query, vars)


@pytest.fixture
def store(pg_store_url: str) -> Iterator[LineageStore]:
    """A fresh PostgreSQL store (psycopg2) whose connections record what is sent on them (``SENT``)."""
    store = LineageStore(pg_store_url, ingest_apply="inline")  # no applier thread sending on its connections too
    sa.event.listen(store.engine, "connect", lambda dbapi_connection, _record: _record_on(dbapi_connection))
    store.engine.dispose()  # the migration's connection did not record
    SENT.clear()
    try:
        yield store
    finally:
        store.dispose()


def _record_on(dbapi_connection: Any) -> None:
    dbapi_connection.cursor_factory = _RecordingCursor


def _events(name: str, at: int = 10) -> list[LineageEvent]:
    return [
        parse_event(run_event("START", name, time=at, inputs=[dataset(f"{name}_in")], outputs=[dataset(f"{name}_out")]))
    ]


def _ingest(store: LineageStore, events: list[LineageEvent]) -> tuple[int, set[str]]:
    """Ingest ``events`` in a write transaction: the backend's pid, and the ingest statements prepared on it."""
    with store.write() as conn:
        ingest.ingest_events(conn, events)
        return _backend(conn), _prepared_on(conn)


def _backend(conn: sa.Connection) -> int:
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())


def _prepared_on(conn: sa.Connection) -> set[str]:
    query = f"SELECT name FROM pg_prepared_statements WHERE starts_with(name, '{driver_sql.NAME_PREFIX}')"
    return {name for (name,) in conn.exec_driver_sql(query).all()}


def _sent(word: str) -> list[str]:
    return [sql for sql in SENT if word in sql]


def _prepares() -> int:
    return sum(sql.count("PREPARE lineage_ingest_") for sql in SENT)


def test_the_statements_are_prepared_once_per_connection_then_only_executed(store: LineageStore) -> None:
    backend, prepared = _ingest(store, _events("a"))
    assert len(prepared) >= 5  # nodes, events, the io group, datasets, jobs, runs, the settings read...
    assert _prepares() == len(prepared)
    # In the batch of one_round_trip: the held writes' PREPAREs go together, before the string of their EXECUTEs.
    assert any(sql.count("PREPARE") > 1 for sql in _sent("PREPARE"))
    assert not [sql for sql in _sent("PREPARE") if "EXECUTE" in sql]
    SENT.clear()
    again, prepared_again = _ingest(store, _events("b", at=20))
    assert again == backend and _sent("EXECUTE lineage_ingest_")
    assert not _sent("PREPARE")  # every statement of the second batch was prepared by the first
    assert not _sent("INSERT INTO")  # nothing goes as text any more
    assert prepared_again == prepared


def test_a_new_connection_prepares_again(store: LineageStore) -> None:
    backend, prepared = _ingest(store, _events("a"))
    with store.engine.connect() as conn:  # the pooled connection, dropped (as after a disconnect)
        conn.invalidate()
    SENT.clear()
    other, prepared_again = _ingest(store, _events("b", at=20))
    assert other != backend
    assert prepared_again == prepared and _prepares() == len(prepared)


def test_an_error_after_a_prepare_leaves_the_connection_usable(store: LineageStore) -> None:
    events = statements("postgresql").events
    bad = {**_event_row("k" * 64), "payload": None}  # payload: NOT NULL
    with pytest.raises(sa.exc.IntegrityError), store.write() as conn:
        driver_sql.write_rows(conn, events, [bad])  # PREPARE, then the EXECUTE that fails
    with pytest.raises(sa.exc.IntegrityError), store.write() as conn, driver_sql.one_round_trip(conn):
        driver_sql.write_rows(conn, statements("postgresql").jobs, [_job_row()], answers=False)  # prepared...
        driver_sql.write_rows(conn, events, [bad], answers=False)  # ... in the batch that fails
    with store.write() as conn:  # the events' statement exists on the server: it is executed, not prepared again
        backend = _backend(conn)
        assert len(_prepared_on(conn)) == 2
        SENT.clear()
        assert driver_sql.write_rows(conn, events, [_event_row("a" * 64)]) == [("a" * 64,)]
        assert not _sent("PREPARE") and _sent("EXECUTE")
    again, _prepared = _ingest(store, _events("a"))  # the ingest runs on the same connection
    assert again == backend


def test_writes_held_but_never_sent_prepare_nothing(store: LineageStore) -> None:
    events = statements("postgresql").events
    with pytest.raises(RuntimeError), store.write() as conn, driver_sql.one_round_trip(conn):
        driver_sql.write_rows(conn, events, [_event_row("a" * 64)], answers=False)
        raise RuntimeError("the block fails: nothing held is sent")
    SENT.clear()
    with store.write() as conn:
        assert driver_sql.write_rows(conn, events, [_event_row("a" * 64)]) == [("a" * 64,)]
        assert _sent("PREPARE")  # the held PREPARE was never sent: it is sent now
    _ingest(store, _events("a"))


def test_statements_deallocated_behind_the_stores_back_fail_one_transaction_then_are_prepared_again(
    store: LineageStore,
) -> None:
    backend, prepared = _ingest(store, _events("a"))
    with store.engine.connect() as conn:  # what a pooler's reset (DISCARD ALL) would do
        conn.exec_driver_sql("DEALLOCATE ALL")
        conn.commit()
    with pytest.raises(sa.exc.DBAPIError, match="does not exist"):
        _ingest(store, _events("b", at=20))
    again, prepared_again = _ingest(store, _events("b", at=20))
    assert again == backend and prepared_again == prepared


@pytest.mark.parametrize("switch", ["execution option", "module flag"])
def test_turned_off_no_statement_is_prepared(store: LineageStore, switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if switch == "execution option":
        store.engine.update_execution_options(**{driver_sql.PREPARED_STATEMENTS_OPTION: False})
    else:
        monkeypatch.setattr(driver_sql, "PREPARED_STATEMENTS", False)
    _backend_pid, prepared = _ingest(store, _events("a"))
    _ingest(store, _events("b", at=20))
    assert not prepared and not _sent("PREPARE") and not _sent("EXECUTE")
    assert _sent("INSERT INTO lineage_nodes")  # the statements went as text, on the driver's cursor


def test_psycopg3_is_left_to_prepare_on_its_own(pg_store_url: str) -> None:
    store = LineageStore(pg_store_url.replace("postgresql+psycopg2://", "postgresql+psycopg://"), ingest_apply="inline")
    try:
        _backend_pid, prepared = _ingest(store, _events("a"))
        assert not prepared
    finally:
        store.dispose()


def _event_row(key: str) -> dict[str, Any]:
    from datetime import datetime, timezone

    now = datetime(2026, 3, 1, 13, 0, tzinfo=timezone.utc)
    return {
        "event_key": key,
        "kind": "run",
        "event_type": "START",
        "event_time": now,
        "run_uuid": None,
        "job_namespace": None,
        "job_name": None,
        "producer": None,
        "received_at": now,
        "payload": "{}",
    }


def _job_row() -> dict[str, Any]:
    return {"node_id": 1, "facets": None, "facets_time": None, "latest_run_uuid": None, "latest_run_time": None}
