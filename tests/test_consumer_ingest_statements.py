"""The ingest's statements on the driver's cursor (``store.driver_sql``) store exactly what the SQLAlchemy statements
store: every table's rows, as the database holds them (SQLite's times as text), on SQLite, PostgreSQL with psycopg2
and with psycopg (3), through new rows, conflicts, updates, late and duplicate events; and a driver error is
raised as SQLAlchemy's exception."""

from __future__ import annotations

import copy
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import dataset, dataset_event, job_event, run_event
from support.environment import postgres_schema_url

from airflow_lineage_provider.consumer.store import LineageStore, driver_sql, ingest, tables
from airflow_lineage_provider.consumer.store.statements import statements
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from consumer_workload import workload

pytest_plugins = ("support.consumer_fixtures",)

NOW = datetime(2026, 3, 1, 13, 0, 0, 123456, tzinfo=timezone.utc)


class _FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> _FrozenDatetime:  # type: ignore[override]
        return cls.fromtimestamp(NOW.timestamp(), tz)


class _FrozenTime:
    @staticmethod
    def time_ns() -> int:
        return int(NOW.timestamp()) * 1_000_000_000


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ingest's own clock (``received_at``, a producer's ``first_seen``, a new node's version) frozen, so two
    stores written at different times hold the same rows."""
    monkeypatch.setattr(ingest, "datetime", _FrozenDatetime)
    monkeypatch.setattr(ingest, "time", _FrozenTime)


def _with_run_facets(event: dict[str, Any], nominal: str, parent: str) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event["run"]["facets"] = {
        "nominalTime": {"nominalStartTime": nominal, "nominalEndTime": nominal},
        "parent": {"run": {"runId": parent}, "job": {"namespace": "pipelines", "name": "parent"}},
    }
    return event


def _with_symlink(event: dict[str, Any], side: str, name: str) -> dict[str, Any]:
    event = copy.deepcopy(event)
    facets = event[side][0].setdefault("facets", {})
    facets["symlinks"] = {"identifiers": [{"namespace": "hive://metastore", "name": name, "type": "TABLE"}]}
    facets["dataSource"] = {"name": "warehouse", "uri": "postgres://db:5432/warehouse"}
    return event


def _at_zone(event: dict[str, Any], when: str) -> dict[str, Any]:
    event = copy.deepcopy(event)
    event["eventTime"] = when
    return event


@cache
def batches() -> list[list[LineageEvent]]:
    """Batches of 1 to 3 events, then duplicates, conflicts, late events and updates of stored rows (built once:
    both stores get the same events, run ids included)."""
    events = [parse_event(document) for document in workload(12)]
    out = [events[i : i + size] for i, size in zip(range(0, 24, 6), (1, 2, 3, 1), strict=True)]
    out += [events[i : i + 3] for i in range(7, len(events), 3)]
    out.append(events[:3])  # stored before: duplicates
    run, other = str(uuid.uuid4()), str(uuid.uuid4())
    src = dataset("src", fields=["id", "v"])
    dst = dataset("dst", fields=["id"], columns={"id": [("warehouse", "src", "id")]})
    start = run_event("START", "load", run, time=10, inputs=[src], outputs=[dst])
    complete = run_event(
        "COMPLETE",
        "load",
        run,
        time=20,
        inputs=[src],
        outputs=[dataset("dst", fields=["id", "w"], columns={"w": [("warehouse", "src", "v")]})],
    )
    complete = _with_symlink(_with_run_facets(complete, "2026-03-01T11:00:00+01:00", other), "inputs", "db.src")
    late = run_event("START", "load", run, time=5, inputs=[src], outputs=[dst])  # older: changes no stored value
    tied = run_event("COMPLETE", "load", other, time=20, inputs=[src], outputs=[dst])  # the latest run: by UUID
    declared = job_event("load", [src, dataset("declared_only")], [dst], time=30)
    schema = dataset_event({"namespace": "warehouse", "name": "dst", "fields": ["id", "w", "x"]}, time=40)
    zoned = _at_zone(run_event("FAIL", "load", run, time=0, inputs=[src], outputs=[dst]), "2026-03-01T14:01:02.5+02:00")
    naive = _at_zone(run_event("RUNNING", "other", time=0, outputs=[dst]), "2026-03-01T12:00:59")
    wide = run_event("COMPLETE", "wide", time=50, inputs=[dataset(f"in_{i}") for i in range(40)], outputs=[dst])
    for group in ([start], [complete, late], [tied, declared, schema], [zoned], [naive, wide], [late]):
        out.append([parse_event(document) for document in group])
    return out


#: What differs between two stores whatever wrote them: when each was created, and its random id.
NOT_COMPARED = {tables.schema_version.name: "", tables.store_settings.name: " WHERE name <> 'store_id'"}


def _dump(engine: sa.Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows as the driver reads them (no SQLAlchemy types: SQLite's times as their text)."""
    with engine.connect() as conn:
        return {
            table.name: sorted(conn.exec_driver_sql(f"SELECT * FROM {table.name}{where}").all(), key=repr)  # type: ignore[misc]
            for table in tables.metadata.sorted_tables
            for where in [NOT_COMPARED.get(table.name, "")]
            if where or table.name not in NOT_COMPARED
        }


def _ingested(url: str, fast: bool) -> dict[str, list[tuple[Any, ...]]]:
    """``batches()`` ingested into the fresh store at ``url``, on the driver's cursor or through SQLAlchemy (an
    engine with a cursor-execute listener, which the fast path leaves to SQLAlchemy); the tables' rows after."""
    store = LineageStore(url)
    seen: list[str] = []
    try:
        if not fast:
            sa.event.listen(store.engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
        for batch in batches():
            with store.write() as conn:
                assert (driver_sql.driver_connection(conn) is not None) is fast
                ingest.ingest_events(conn, batch)
        if not fast:  # the listener saw the ingest's statements
            assert any(sql.startswith("INSERT INTO lineage_nodes") for sql in seen)
        return _dump(store.engine)
    finally:
        store.dispose()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("psycopg2", marks=pytest.mark.postgres),
        pytest.param("psycopg", marks=pytest.mark.postgres),
    ]
)
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The URLs of two fresh stores on one database and driver."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fast.db'}", f"sqlite:///{tmp_path / 'core.db'}"
        return
    with postgres_schema_url() as first, postgres_schema_url() as second:
        driver = f"postgresql+{request.param}://"
        yield first.replace("postgresql+psycopg2://", driver), second.replace("postgresql+psycopg2://", driver)


def test_the_driver_statements_store_every_row_the_sqlalchemy_statements_store(two_stores: tuple[str, str]) -> None:
    fast, core = two_stores
    stored, expected = _ingested(fast, fast=True), _ingested(core, fast=False)
    assert stored["lineage_events"] and stored["lineage_column_edges"] and stored["lineage_symlinks"]
    for table in expected:
        assert stored[table] == expected[table], table


def test_a_time_is_sqlite_text_as_the_bind_processor_makes_it() -> None:
    dialect = sa.create_engine("sqlite://").dialect
    processor = tables.UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert processor is not None
    plus_two = timezone(timedelta(hours=2))
    for value in (
        datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc),
        datetime(2026, 3, 1, 12, 0, 0, 1, tzinfo=timezone.utc),
        datetime(2026, 3, 1, 1, 2, 3, 999999, tzinfo=plus_two),
        datetime(2026, 3, 1, 12, 0, 0, 500000),
        datetime(1, 1, 1, 0, 0, tzinfo=timezone.utc),
        datetime(999, 12, 31, 23, 59, 59, tzinfo=timezone.utc),
    ):
        assert driver_sql.sqlite_time(value) == processor(value), value


def test_a_driver_error_is_raised_as_sqlalchemys(store_url: str) -> None:
    store = LineageStore(store_url)
    events = statements(store.engine.dialect.name).events
    try:
        with pytest.raises(sa.exc.IntegrityError), store.write() as conn:
            driver_sql.write_rows(conn, events, [_event_row("k" * 64, payload=None)])  # payload: NOT NULL
    finally:
        store.dispose()


def _event_row(key: str, payload: str | None = "{}") -> dict[str, Any]:
    return {
        "event_key": key,
        "kind": "run",
        "event_type": "START",
        "event_time": NOW,
        "run_uuid": None,
        "job_namespace": None,
        "job_name": None,
        "producer": None,
        "received_at": NOW,
        "payload": payload,
    }


def _count_events(conn: sa.Connection) -> int:
    """Events the transaction of ``conn`` sees, asked on the driver's cursor (nothing held is sent first)."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute("SELECT count(*) FROM lineage_events")
        return int(cursor.fetchone()[0])
    finally:
        cursor.close()


def test_writes_whose_answers_nobody_reads_go_in_one_round_trip_on_psycopg2(pg_store_url: str) -> None:
    store = LineageStore(pg_store_url)
    events = statements("postgresql").events
    try:
        with store.write() as conn:
            with driver_sql.one_round_trip(conn):
                assert driver_sql.write_rows(conn, events, [_event_row("a" * 64)], answers=False) == []
                assert driver_sql.write_rows(conn, events, [_event_row("b" * 64)], answers=False) == []
                assert _count_events(conn) == 0  # held
            assert _count_events(conn) == 2  # sent when the block ended
            with driver_sql.one_round_trip(conn):
                driver_sql.write_rows(conn, events, [_event_row("c" * 64)], answers=False)
                answered = driver_sql.write_rows(conn, events, [_event_row("d" * 64)])  # sends what is held first
                assert answered == [("d" * 64,)] and _count_events(conn) == 4
    finally:
        store.dispose()


def test_a_held_write_that_fails_is_raised_as_sqlalchemys_when_the_block_ends(pg_store_url: str) -> None:
    store = LineageStore(pg_store_url)
    events = statements("postgresql").events
    try:
        with pytest.raises(sa.exc.IntegrityError), store.write() as conn:
            try:
                with driver_sql.one_round_trip(conn):
                    driver_sql.write_rows(conn, events, [_event_row("e" * 64, payload=None)], answers=False)
            finally:
                assert driver_sql.flush(conn) is None  # nothing is left held on the connection
        with store.write() as conn, driver_sql.one_round_trip(conn):  # the connection is usable again
            driver_sql.write_rows(conn, events, [_event_row("f" * 64)], answers=False)
        with store.read() as conn:
            assert _count_events(conn) == 1
    finally:
        store.dispose()
