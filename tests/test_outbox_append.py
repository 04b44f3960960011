"""The task's append (``store.append_event``): a fixed insert per driver that stores exactly what the outbox's
Core insert (``store.append_events``) stores, on SQLite and PostgreSQL, and the Core insert for other drivers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.outbox_helpers import pg_url, sqlite_url

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.database import dispose_engines, outbox_engine
from airflow_lineage_provider.outbox.tables import events

COMPARED = ("run_id", "event_type", "event_time", "job_namespace", "job_name", "payload", "stored_at")


@pytest.fixture(autouse=True)
def _fresh_engines() -> Iterator[None]:
    yield
    dispose_engines()


@pytest.fixture(params=["sqlite", "postgresql"])
def outbox(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a migrated, empty outbox on each database."""
    url = sqlite_url(tmp_path) if request.param == "sqlite" else pg_url(request.getfixturevalue("pg_engine"))
    outbox_engine(url)
    return url


def record(stored_at: datetime, job: str = "orders.load") -> dict[str, Any]:
    run = {"runId": str(uuid.uuid4())}
    payload = json.dumps({"eventType": "START", "eventTime": "2026-03-04T05:06:07Z", "run": run, "job": {"name": job}})
    return store.record_from_payload(payload, stored_at=stored_at)


def appended(url: str, *records: dict[str, Any]) -> None:
    """``records`` stored by the task's append, each in its own autocommit statement, as the writer does."""
    with outbox_engine(url).connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        for one in records:
            store.append_event(conn, one)


def rows(url: str) -> list[dict[str, Any]]:
    with outbox_engine(url).connect() as conn:
        return [dict(row) for row in conn.execute(sa.select(events).order_by(events.c.id)).mappings()]


@pytest.mark.parametrize("microsecond", [0, 123456])
def test_the_tasks_append_stores_the_row_the_core_insert_stores(outbox: str, microsecond: int) -> None:
    when = datetime(2026, 3, 4, 5, 6, 7, microsecond)
    fast, core = record(when), record(when)
    appended(outbox, fast)
    with outbox_engine(outbox).begin() as conn:
        store.append_events(conn, [core])
    stored = rows(outbox)
    assert [row["event_key"] for row in stored] == [fast["event_key"], core["event_key"]]
    assert [{key: row[key] for key in COMPARED} for row in stored] == [
        {key: fast[key] for key in COMPARED},
        {key: core[key] for key in COMPARED},
    ]
    with outbox_engine(outbox).connect() as conn:
        as_stored = conn.exec_driver_sql("SELECT CAST(stored_at AS TEXT) FROM lineage_outbox_events ORDER BY id")
        fast_text, core_text = as_stored.scalars().all()
    assert fast_text == core_text  # the same text on SQLite, where times are compared as text


def test_an_event_appended_twice_is_stored_once(outbox: str) -> None:
    again = record(datetime(2026, 3, 4, 5, 6, 7))
    appended(outbox, again, dict(again, stored_at=datetime(2026, 3, 4, 5, 6, 8)))
    assert [(row["event_key"], row["stored_at"]) for row in rows(outbox)] == [
        (again["event_key"], datetime(2026, 3, 4, 5, 6, 7))
    ]


def test_a_driver_without_a_written_out_insert_appends_through_the_core_statement(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    outbox_engine(url)  # migrated
    named = sa.create_engine(url, paramstyle="named")  # not the pysqlite paramstyle the fixed insert is for
    try:
        assert (named.dialect.name, named.dialect.paramstyle) == ("sqlite", "named")
        one = record(datetime(2026, 3, 4, 5, 6, 7, 89))
        with named.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            store.append_event(conn, one)
            store.append_event(conn, one)
    finally:
        named.dispose()
    assert [{key: row[key] for key in ("event_key", *COMPARED)} for row in rows(url)] == [
        {key: one[key] for key in ("event_key", *COMPARED)}
    ]
