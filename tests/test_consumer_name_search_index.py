"""Search by name without reading every node: on PostgreSQL a trigram index of ``lower(name)`` (version 13),
which the search statement itself can use; a store whose role may not create pg_trgm works without it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from support.environment import PG_URL, require_postgres

from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate

pytest_plugins = ("support.consumer_fixtures",)

NAMES = ["orders", "daily_ORDERS_2026_01_05", "customers", "order_items", "refunds", "100%_orders", "ord_rs"]


def _fill(conn: sa.Connection) -> None:
    from airflow_lineage_provider.consumer.store.write.ingest import node_key

    now = datetime.now(timezone.utc)
    conn.execute(
        tables.nodes.insert(),
        [
            {"node_key": node_key("dataset", "db", name), "kind": "dataset", "namespace": "db", "name": name}
            | {"created_at": now, "updated_at": now}
            for name in NAMES
        ],
    )


def _index_names(conn: sa.Connection) -> set[str]:
    return {index["name"] for index in sa.inspect(conn).get_indexes(tables.nodes.name) if index["name"]}


def _search_statements(conn: sa.Connection, text: str) -> tuple[list[str], list[tuple[str, Any]]]:
    """The names a search for ``text`` finds, and the statements (with parameters) it ran."""
    ran: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        ran.append((statement, parameters))

    sa.event.listen(conn, "before_cursor_execute", record)
    try:
        results, total = queries.search(conn, text, None, None, 10, 0)
    finally:
        sa.event.remove(conn, "before_cursor_execute", record)
    names = [result["name"] for result in results]
    assert total == (len(names), False)
    return names, ran


def test_search_keeps_marquez_s_ilike_semantics_with_the_index(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            _fill(conn)
            assert _search_statements(conn, "ORDERS")[0] == ["100%_orders", "daily_ORDERS_2026_01_05", "orders"]
            assert _search_statements(conn, "ord_rs")[0] == [
                "100%_orders",
                "daily_ORDERS_2026_01_05",
                "ord_rs",
                "orders",
            ]
            assert _search_statements(conn, "ord\\_rs")[0] == ["ord_rs"]
            assert _search_statements(conn, "100\\%")[0] == ["100%_orders"]
            assert _search_statements(conn, "nothing")[0] == []
    finally:
        engine.dispose()


def test_on_postgresql_the_search_statement_is_answered_from_the_trigram_index(pg_store_url: str) -> None:
    engine = create_store_engine(pg_store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            assert tables.NAME_SEARCH_INDEX in _index_names(conn)
            _fill(conn)
            names, ran = _search_statements(conn, "orders")
            assert names == ["100%_orders", "daily_ORDERS_2026_01_05", "orders"]
            page = next(statement for statement in ran if "lineage_nodes" in statement[0])
            # A table of a few rows is read whole whatever its indexes: forbid that to see which index serves it.
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            plan = "\n".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {page[0]}", page[1]))
            assert tables.NAME_SEARCH_INDEX in plan, plan
    finally:
        engine.dispose()


def test_a_version_12_store_gains_the_trigram_index_on_postgresql_and_keeps_its_nodes(store_url: str) -> None:
    from test_consumer_store import back_to_version

    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            _fill(conn)
            back_to_version(conn, 12)
            assert tables.NAME_SEARCH_INDEX not in _index_names(conn)
        assert migrate(engine) == LATEST == 18
        with engine.begin() as conn:
            postgresql = conn.dialect.name == "postgresql"
            assert (tables.NAME_SEARCH_INDEX in _index_names(conn)) is postgresql
            assert conn.exec_driver_sql("SELECT max(version) FROM lineage_schema_version").scalar() == LATEST
            assert _search_statements(conn, "orders")[0] == ["100%_orders", "daily_ORDERS_2026_01_05", "orders"]
    finally:
        engine.dispose()


@contextmanager
def _database_of_its_own(role_creates_in_database: bool) -> Iterator[str]:
    """A store URL in a fresh database without pg_trgm, for a role owning the store's schema ``lineage``: without
    ``CREATE`` on the database (which a trusted extension needs), or with it and no ``public`` schema in the
    database; database and role dropped afterwards."""
    require_postgres()
    suffix = uuid.uuid4().hex[:10]
    database, role = f"alp_no_trgm_{suffix}", f"alp_store_{suffix}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"CREATE DATABASE {database}")
        conn.exec_driver_sql(f"REVOKE CREATE ON DATABASE {database} FROM PUBLIC")
        if role_creates_in_database:
            conn.exec_driver_sql(f"GRANT CREATE ON DATABASE {database} TO {role}")
    inside = sa.create_engine(sa.make_url(PG_URL).set(database=database), isolation_level="AUTOCOMMIT")
    with inside.connect() as conn:
        if role_creates_in_database:
            conn.exec_driver_sql("DROP SCHEMA public")
        conn.exec_driver_sql(f"CREATE SCHEMA lineage AUTHORIZATION {role}")
    inside.dispose()
    url = sa.make_url(PG_URL).set(database=database, username=role)
    try:
        yield f"{url.render_as_string(hide_password=False)}?options=-csearch_path%3Dlineage"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {database} WITH (FORCE)")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


@pytest.fixture
def without_extension_rights() -> Iterator[str]:
    with _database_of_its_own(role_creates_in_database=False) as url:
        yield url


def test_a_database_without_a_public_schema_gets_pg_trgm_in_the_store_s_schema(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with _database_of_its_own(role_creates_in_database=True) as url:
        engine = create_store_engine(url)
        try:
            with caplog.at_level(logging.WARNING):
                assert migrate(engine) == LATEST
            assert "pg_trgm could not be created" not in caplog.text
            with engine.begin() as conn:
                installed = "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                assert conn.exec_driver_sql(f"{installed} WHERE e.extname = 'pg_trgm'").scalar() == "lineage"
                assert tables.NAME_SEARCH_INDEX in _index_names(conn)
                _fill(conn)
                assert _search_statements(conn, "orders")[0] == ["100%_orders", "daily_ORDERS_2026_01_05", "orders"]
        finally:
            engine.dispose()


def test_a_store_whose_role_may_not_create_pg_trgm_searches_without_the_index(
    without_extension_rights: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Created new, and upgraded from version 12: no index and a warning naming why, search the same."""
    from test_consumer_store import back_to_version

    engine = create_store_engine(without_extension_rights)
    try:
        with caplog.at_level(logging.WARNING):
            assert migrate(engine) == LATEST
        assert "pg_trgm could not be created" in caplog.text
        with engine.begin() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'").scalar() == 0
            assert tables.NAME_SEARCH_INDEX not in _index_names(conn)
            _fill(conn)
            assert _search_statements(conn, "orders")[0] == ["100%_orders", "daily_ORDERS_2026_01_05", "orders"]
            back_to_version(conn, 12)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert migrate(engine) == LATEST
        assert "pg_trgm could not be created" in caplog.text
        with engine.connect() as conn:
            assert tables.NAME_SEARCH_INDEX not in _index_names(conn)
            assert conn.exec_driver_sql("SELECT version_num FROM lineage_alembic_version").scalar() == "0018"
    finally:
        engine.dispose()
