"""PostgreSQL drivers of the store: plain ``postgresql://`` is psycopg 3 when installed, a URL naming a driver keeps
it; on psycopg 3 the ingest's statements are prepared on the server by psycopg itself (``prepare_threshold``, a
public connection parameter) and ``LINEAGE_STORE_PREPARED_STATEMENTS=off`` prepares none; the store holds the same
rows whichever driver wrote them (psycopg2 stays supported)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from functools import cache
from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import dataset, dataset_event, job_event, run_event
from support.environment import postgres_schema_url

from airflow_lineage_provider.consumer.store import (
    PREPARED_STATEMENTS_ENV,
    LineageStore,
    create_store_engine,
    store_url,
)
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write import ingest
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

pytestmark = pytest.mark.postgres

pytest.importorskip("psycopg")
NOW = datetime(2026, 3, 1, 13, 0, 0, 123456, tzinfo=timezone.utc)


def test_plain_postgresql_urls_use_psycopg3_and_named_drivers_are_kept() -> None:
    assert store_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert store_url("postgresql+psycopg2://u@h/db").drivername == "postgresql+psycopg2"
    assert store_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    assert store_url("sqlite:///x.db").drivername == "sqlite"


@pytest.fixture
def schema_url() -> Iterator[str]:
    """A fresh schema's URL, without a driver (``postgresql://``)."""
    with postgres_schema_url() as url:
        yield sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _events(name: str, count: int) -> list[list[LineageEvent]]:
    return [
        [parse_event(run_event("START", name, time=i, inputs=[dataset(f"{name}_in")], outputs=[dataset(f"{name}_o")]))]
        for i in range(count)
    ]


def _prepared_ingest_statements(store: LineageStore, batches: list[list[LineageEvent]]) -> tuple[str, list[str]]:
    """Ingest each batch on one connection (:meth:`LineageStore.holding`); the driver, and the ingest statements
    the server holds prepared for that connection's session afterwards."""
    with store.holding():
        for batch in batches:
            with store.write() as conn:
                ingest.ingest_events(conn, batch)
        with store.write() as conn:
            rows = conn.exec_driver_sql("SELECT statement FROM pg_prepared_statements").scalars().all()
            return conn.dialect.driver, [sql for sql in rows if sql.lstrip().upper().startswith("INSERT")]


def test_psycopg3_prepares_the_ingest_statements_on_the_server(schema_url: str) -> None:
    store = LineageStore(schema_url, ingest_apply="inline")
    try:
        driver, prepared = _prepared_ingest_statements(store, _events("prepared", 8))
        assert driver == "psycopg"
        assert any("INSERT INTO lineage_runs" in sql for sql in prepared), prepared
        assert any("INSERT INTO lineage_nodes" in sql for sql in prepared), prepared
    finally:
        store.dispose()


def test_turned_off_no_statement_is_prepared(schema_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PREPARED_STATEMENTS_ENV, "off")
    store = LineageStore(schema_url, ingest_apply="inline")
    try:
        driver, prepared = _prepared_ingest_statements(store, _events("unprepared", 8))
        assert (driver, prepared) == ("psycopg", [])
    finally:
        store.dispose()


def test_a_prepare_threshold_given_by_the_caller_wins(schema_url: str) -> None:
    engine = create_store_engine(schema_url, connect_args={"prepare_threshold": None})
    store = LineageStore(schema_url, engine=engine, ingest_apply="inline")
    try:
        assert _prepared_ingest_statements(store, _events("given", 8))[1] == []
    finally:
        store.dispose()


# -- the same rows whichever driver wrote them ---------------------------------------------------------------


class _FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> _FrozenDatetime:  # type: ignore[override]
        return cls.fromtimestamp(NOW.timestamp(), tz)


class _FrozenTime:
    @staticmethod
    def time_ns() -> int:
        return int(NOW.timestamp()) * 1_000_000_000


@cache
def batches() -> list[list[LineageEvent]]:
    """New rows, conflicts, late and duplicate events, symlinks, column lineage, odd text and times (built once:
    both stores get the same events, run ids included)."""
    run, other = str(uuid.uuid4()), str(uuid.uuid4())
    src = dataset("src", fields=["id", "v"])
    dst = dataset("dst", fields=["id"], columns={"id": [("warehouse", "src", "id")]})
    odd = dataset('odd "name", {braces}\\back\nline é ✓', fields=["NULL", ""])
    start = run_event("START", "load", run, time=10, inputs=[src, odd], outputs=[dst])
    complete = run_event(
        "COMPLETE",
        "load",
        run,
        time=20,
        inputs=[src],
        outputs=[dataset("dst", fields=["id", "w"], columns={"w": [("warehouse", "src", "v")]})],
    )
    complete = copy.deepcopy(complete)
    complete["inputs"][0]["facets"]["symlinks"] = {
        "identifiers": [{"namespace": "hive://metastore", "name": "db.src", "type": "TABLE"}]
    }
    complete["run"]["facets"] = {
        "nominalTime": {"nominalStartTime": "2026-03-01T11:00:00+01:00"},
        "parent": {"run": {"runId": other}, "job": {"namespace": "pipelines", "name": "parent"}},
    }
    late = run_event("START", "load", run, time=5, inputs=[src], outputs=[dst])
    tied = run_event("COMPLETE", "load", other, time=20, inputs=[src], outputs=[dst])
    declared = job_event("load", [src, dataset("declared_only")], [dst], time=30)
    schema = dataset_event({"namespace": "warehouse", "name": "dst", "fields": ["id", "w", "x"]}, time=40)
    wide = run_event("COMPLETE", "wide", time=50, inputs=[dataset(f"in_{i}") for i in range(40)], outputs=[dst])
    groups = ([start], [complete, late], [tied, declared, schema], [wide], [start, late])
    return [[parse_event(document) for document in group] for group in groups]


#: What differs between two stores whatever wrote them: when each was created, and its random id.
NOT_COMPARED = {tables.schema_version.name: "", tables.store_settings.name: " WHERE name <> 'store_id'"}
#: Tables compared by what they mean rather than row by row: the node counts' shards follow the writer's backend.
COMPARED_AS = {
    tables.node_counts.name: "SELECT namespace, kind, sum(nodes) FROM lineage_node_counts GROUP BY namespace, kind"
}


def _dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows, read through one driver (psycopg2) whichever wrote them."""
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg2"))
    try:
        with engine.connect() as conn:
            return {
                table.name: sorted(conn.exec_driver_sql(query).all(), key=repr)  # type: ignore[misc]
                for table in tables.metadata.sorted_tables
                for where in [NOT_COMPARED.get(table.name, "")]
                if where or table.name not in NOT_COMPARED
                for query in [COMPARED_AS.get(table.name, f"SELECT * FROM {table.name}{where}")]
            }
    finally:
        engine.dispose()


def _ingested(url: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[Any, ...]]]:
    monkeypatch.setattr(ingest, "datetime", _FrozenDatetime)  # received_at, first_seen, a new node's version
    monkeypatch.setattr(ingest, "time", _FrozenTime)
    named = sa.make_url(url).set(drivername=f"postgresql+{driver}").render_as_string(hide_password=False)
    store = LineageStore(named, ingest_apply="inline")
    try:
        for batch in batches():
            with store.write() as conn:
                assert conn.dialect.driver == driver
                ingest.ingest_events(conn, batch)
        return _dump(url)
    finally:
        store.dispose()


def test_psycopg2_and_psycopg3_store_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    with postgres_schema_url() as first, postgres_schema_url() as second:
        two, three = _ingested(first, "psycopg2", monkeypatch), _ingested(second, "psycopg", monkeypatch)
    assert three["lineage_events"] and three["lineage_column_edges"] and three["lineage_symlinks"]
    for table in two:
        assert three[table] == two[table], table
