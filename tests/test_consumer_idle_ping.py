"""PostgreSQL stores check a pooled connection before use only when it was idle
(consumer/store/operations/idle_ping.py): a connection the server closed while it sat in the pool is replaced
unseen; a busy one is not pinged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from support.environment import PG_URL, postgres_schema_url

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.operations import idle_ping as idle_ping_module

pytestmark = pytest.mark.postgres


@pytest.fixture
def store() -> Iterator[LineageStore]:
    with postgres_schema_url() as url:
        opened = LineageStore(url, ingest_apply="inline")  # no applier thread taking a pooled connection meanwhile
        opened.engine  # noqa: B018 - created and migrated
        yield opened
        opened.dispose()


def _backend(store: LineageStore) -> int:
    with store.read() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def _pings(store: LineageStore, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record the pings of ``store``'s dialect (they still run)."""
    seen: list[object] = []
    dialect = store.engine.dialect
    ping = dialect.do_ping

    def counted(dbapi_connection: object) -> bool:
        seen.append(dbapi_connection)
        return ping(dbapi_connection)

    monkeypatch.setattr(dialect, "do_ping", counted)
    return seen


def test_a_connection_the_server_closed_while_idle_is_replaced_unseen(
    store: LineageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _backend(store)
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
    admin.dispose()
    monkeypatch.setattr(idle_ping_module, "PING_AFTER_IDLE_SECONDS", 0.0)  # "idle for a while"
    pings = _pings(store, monkeypatch)
    second = _backend(store)  # no error: the ping found the connection dead and the pool made a new one
    assert second != first and len(pings) == 1


def test_a_connection_used_a_moment_ago_is_not_pinged(store: LineageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _backend(store)
    pings = _pings(store, monkeypatch)
    for _ in range(5):
        _backend(store)
    assert pings == []
    monkeypatch.setattr(idle_ping_module, "PING_AFTER_IDLE_SECONDS", 0.0)
    _backend(store)
    assert len(pings) == 1


def test_a_held_connection_the_server_closed_is_replaced_and_the_write_done(store: LineageStore) -> None:
    """The grouped ingest's writer holds one connection (``LineageStore.holding``), which no checkout pings: a
    write on it after the server closed it is done again on a new connection, and the request never sees it."""
    from support.consumer_helpers import run_event

    from airflow_lineage_provider.consumer.ingest.service import store_events
    from airflow_lineage_provider.consumer.validation import parse_event

    with store.holding():
        assert store_events(store, [parse_event(run_event("START", "first"))])[0].stored == 1
        with store.write() as conn:
            held = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
        admin = sa.create_engine(PG_URL)
        with admin.begin() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": held})
        admin.dispose()
        result, errors = store_events(store, [parse_event(run_event("START", "second"))])
        assert (result.stored, errors) == (1, {})
        with store.write() as conn:
            assert int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()) != held
