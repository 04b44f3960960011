"""COMPLETE events get schema facets from the database, through every connector form."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from airflow_lineage_provider import lineage_run, schema_facet

ORDERS = [
    {"name": "id", "type": "INTEGER", "ordinal_position": 1},
    {"name": "customer_id", "type": "INTEGER", "ordinal_position": 2},
    {"name": "amount", "type": "NUMERIC(10, 2)", "ordinal_position": 3},
]


def _schemas(event, kind="inputs"):
    return {d["name"]: d["facets"].get("schema", {}).get("fields") for d in event[kind]}


def test_start_has_no_schema_and_complete_has_the_database_schema(events, sqlite_engine):
    with lineage_run("orders.load", inputs=["main/orders"], connector=sqlite_engine):
        pass
    start, complete = events.of_job("orders.load")
    assert "schema" not in start["inputs"][0]["facets"]
    assert complete["inputs"][0]["facets"]["schema"]["fields"] == ORDERS


def test_output_created_inside_the_block_gets_its_schema(events, sqlite_engine):
    with (
        lineage_run("orders.summarise", outputs=["main/order_totals"], connector={"main": sqlite_engine}),
        sqlite_engine.begin() as conn,
    ):
        conn.exec_driver_sql(
            "CREATE TABLE order_totals AS SELECT customer_id, SUM(amount) AS total FROM orders GROUP BY 1"
        )
    complete = events.of_job("orders.summarise")[-1]
    assert [f["name"] for f in complete["outputs"][0]["facets"]["schema"]["fields"]] == ["customer_id", "total"]


def test_airflow_connection_id_connector(events, sqlite_engine, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", f"sqlite:///{sqlite_engine.url.database}")
    with lineage_run("orders.load", inputs=["main/orders"], connector="warehouse"):
        pass
    complete = events.of_job("orders.load")[-1]
    assert complete["inputs"][0]["namespace"] == f"sqlite://{sqlite_engine.url.database}"
    assert complete["inputs"][0]["facets"]["schema"]["fields"] == ORDERS


def test_airflow_hook_connector(events, sqlite_engine, monkeypatch):
    from airflow.providers.sqlite.hooks.sqlite import SqliteHook

    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", f"sqlite:///{sqlite_engine.url.database}")
    with lineage_run("orders.load", inputs=["main/orders"], connector=SqliteHook(sqlite_conn_id="warehouse")):
        pass
    assert events.of_job("orders.load")[-1]["inputs"][0]["facets"]["schema"]["fields"] == ORDERS


class CatalogSchemas:
    """A user's own schema source: an object with get_table_schema."""

    namespace = "catalog://prod"

    def __init__(self):
        self.asked = []

    def get_table_schema(self, table):
        self.asked.append(table)
        return {"id": "BIGINT", "label": "STRING"}


def test_object_with_get_table_schema(events):
    catalog = CatalogSchemas()
    with lineage_run("labels", outputs=["catalog/labels"], connector={"catalog": catalog}):
        pass
    complete = events.of_job("labels")[-1]
    assert (complete["outputs"][0]["namespace"], complete["outputs"][0]["name"]) == ("catalog://prod", "labels")
    assert complete["outputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "BIGINT"},
        {"name": "label", "type": "STRING"},
    ]
    assert catalog.asked == ["labels"]


def test_several_connectors_across_databases(events, sqlite_engine, pg_engine):
    schema = pg_engine.test_schema
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {schema}.orders_copy (id BIGINT, amount NUMERIC(12, 2), note TEXT)")
    with lineage_run(
        "orders.replicate",
        inputs=["lite/orders"],
        outputs=[f"pg/{schema}.orders_copy"],
        connector={"lite": sqlite_engine, "pg": pg_engine},
    ):
        pass
    complete = events.of_job("orders.replicate")[-1]
    output = complete["outputs"][0]
    assert output["namespace"] == "postgres://127.0.0.1:5432"
    assert output["name"] == f"test.{schema}.orders_copy"
    assert output["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "BIGINT", "ordinal_position": 1},
        {"name": "amount", "type": "NUMERIC(12, 2)", "ordinal_position": 2},
        {"name": "note", "type": "TEXT", "ordinal_position": 3},
    ]
    assert complete["inputs"][0]["facets"]["schema"]["fields"] == ORDERS


def test_postgres_connection_id_names_like_the_stock_sql_operators(events, pg_engine, monkeypatch):
    schema = pg_engine.test_schema
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {schema}.events (id INTEGER, payload JSONB)")
    monkeypatch.setenv("AIRFLOW_CONN_PG_TEST", "postgres://postgres@127.0.0.1:5432/test")
    with lineage_run("events.load", outputs=[f"test/{schema}.events"], connector="pg_test"):
        pass
    output = events.of_job("events.load")[-1]["outputs"][0]
    assert (output["namespace"], output["name"]) == ("postgres://127.0.0.1:5432", f"test.{schema}.events")
    assert [(f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]] == [
        ("id", "INTEGER"),
        ("payload", "JSONB"),
    ]


def test_one_failing_lookup_leaves_the_others_enriched(events, sqlite_engine, caplog):
    with lineage_run("mixed", inputs=["main/orders", "main/no_such_table", "main/customers"], connector=sqlite_engine):
        pass
    complete = events.of_job("mixed")[-1]
    schemas = _schemas(complete)
    assert schemas["main.no_such_table"] is None
    assert [f["name"] for f in schemas["main.orders"]] == ["id", "customer_id", "amount"]
    assert [f["name"] for f in schemas["main.customers"]] == ["id", "name"]
    assert "schema lookup of 'main/no_such_table'" in caplog.text


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_database_keeps_datasets_and_the_block_runs(events, caplog):
    engine = sa.create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:{_closed_port()}/test")
    ran = []
    with lineage_run("orders.load", inputs=["db/orders"], connector={"db": engine}):
        ran.append(True)
    assert ran == [True]
    _, complete = events.of_job("orders.load")
    assert complete["inputs"][0]["name"] == "test.public.orders"
    assert "schema" not in complete["inputs"][0]["facets"]
    assert "schema lookup of 'db/orders'" in caplog.text


@dataclass
class SilentDatabase:
    """A "PostgreSQL server" on 127.0.0.1 that accepts connections and never answers (a hung database)."""

    url: str
    listener: socket.socket
    #: Closes the listener after a while: should a deadline ever break, the waiting client is cut off then.
    cut_off: threading.Timer

    def was_called(self) -> bool:
        """Whether a client connected: the kernel completed its handshake, which nobody accepts."""
        return bool(select.select([self.listener], [], [], 0)[0])


@pytest.fixture
def silent_database() -> Iterator[SilentDatabase]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # the kernel completes the handshake; nobody ever reads or replies
    cut_off = threading.Timer(15, listener.close)
    cut_off.start()
    url = f"postgresql+psycopg2://postgres@127.0.0.1:{listener.getsockname()[1]}/test"
    yield SilentDatabase(url, listener, cut_off)
    cut_off.cancel()
    listener.close()


def test_a_database_that_never_answers_delays_the_block_by_the_lookup_timeout_only(
    events, sqlite_engine, silent_database, monkeypatch, caplog
):
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__SCHEMA_LOOKUP_TIMEOUT", "1")
    connectors = {"hung": sa.create_engine(silent_database.url), "main": sqlite_engine}
    with lineage_run("orders.load", inputs=["hung/orders", "main/orders"], connector=connectors):
        assert not silent_database.was_called()  # entering the block looks nothing up: nothing to wait for
    assert silent_database.was_called()  # its exit did, and went on while the database still held the connection:
    assert silent_database.cut_off.is_alive()  # by the lookup's own deadline, not because the server went away
    _, complete = events.of_job("orders.load")
    schemas = _schemas(complete)
    assert schemas["test.public.orders"] is None
    assert [f["name"] for f in schemas["main.orders"]] == ["id", "customer_id", "amount"]
    assert "schema lookup of 'hung/orders'" in caplog.text
    assert "did not answer within 1 s ([lineage_provider] schema_lookup_timeout)" in caplog.text


def test_an_unreadable_lookup_timeout_falls_back_to_the_default(monkeypatch):
    from airflow_lineage_provider import conf

    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__SCHEMA_LOOKUP_TIMEOUT", "soon")
    assert conf.schema_lookup_timeout() == 5.0
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__SCHEMA_LOOKUP_TIMEOUT", "0")
    assert conf.schema_lookup_timeout() is None


def test_unresolvable_connection_id_keeps_default_naming(events, caplog):
    with lineage_run("orders.load", inputs=["main/orders"], connector={"main": "no_such_connection"}):
        pass
    assert events.of_job("orders.load")[-1]["inputs"][0]["namespace"] == "default"
    assert "connector 'main'" in caplog.text


def test_declared_schema_is_kept(events, sqlite_engine):
    declared = schema_facet("main/orders", {"id": "BIGINT"})
    with lineage_run("orders.load", inputs=[declared], connector=sqlite_engine):
        pass
    assert events.of_job("orders.load")[-1]["inputs"][0]["facets"]["schema"]["fields"] == [
        {"name": "id", "type": "BIGINT"}
    ]


def test_failed_block_still_carries_schemas(events, sqlite_engine):
    with pytest.raises(RuntimeError), lineage_run("orders.load", inputs=["main/orders"], connector=sqlite_engine):
        raise RuntimeError("disk full")
    fail = events.of_job("orders.load")[-1]
    assert fail["eventType"] == "FAIL"
    assert fail["inputs"][0]["facets"]["schema"]["fields"] == ORDERS


def test_a_connection_id_is_resolved_once_per_process_and_its_pool_reused(events, sqlite_engine, monkeypatch):
    from airflow_lineage_provider.producer.connectors import resolve_source

    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", f"sqlite:///{sqlite_engine.url.database}")
    first = resolve_source("warehouse")
    for _ in range(3):
        with lineage_run("orders.load", inputs=["main/orders"], connector="warehouse"):
            pass
    assert resolve_source("warehouse") is first
    assert first.engine.pool.checkedin() == 1  # three lookups, one connection
    assert [e["inputs"][0]["facets"]["schema"]["fields"] for e in events.of_job("orders.load")[1::2]] == [ORDERS] * 3
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", "sqlite:////elsewhere/other.db")
    assert resolve_source("warehouse") is not first  # a changed connection is looked up again


def _pool_in_child(engine, path) -> None:
    from airflow_lineage_provider.producer.connectors import Connectors, add_schemas
    from airflow_lineage_provider.producer.dataset_refs import DatasetRef

    refs = [DatasetRef("default", "main/orders", raw="main/orders")]
    add_schemas(refs, Connectors({"main": engine}))
    path.write_text(f"{id(engine.pool)} {len(refs[0].facets['schema'].fields)}")


def test_a_forked_process_looks_schemas_up_on_its_own_connections(sqlite_engine, tmp_path):
    """The stock listener forks per event: a child must never use a connection its parent's lookups pooled."""
    import multiprocessing

    from airflow_lineage_provider.producer.connectors import Connectors, add_schemas
    from airflow_lineage_provider.producer.dataset_refs import DatasetRef

    add_schemas([DatasetRef("default", "main/orders", raw="main/orders")], Connectors({"main": sqlite_engine}))
    assert sqlite_engine.pool.checkedin() == 1  # the parent's pooled connection
    out = tmp_path / "child.txt"
    child = multiprocessing.get_context("fork").Process(target=_pool_in_child, args=(sqlite_engine, out))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    pool_id, columns = out.read_text().split()
    assert int(pool_id) != id(sqlite_engine.pool) and int(columns) == len(ORDERS)
    assert sqlite_engine.pool.checkedin() == 1  # and the parent's connection is still there, usable
    with sqlite_engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM orders").scalar() == 0


def test_a_sqlite_view_reports_computed_columns_without_a_type_and_declared_ones_as_declared(events, sqlite_engine):
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE scans (id INTEGER, payload MYBLOB)")
        conn.exec_driver_sql(
            "CREATE VIEW order_report AS SELECT o.id, o.amount * 2 AS doubled, s.payload, 'EUR' AS currency "
            "FROM orders o JOIN scans s ON s.id = o.id"
        )
    with lineage_run("orders.report", inputs=["main/order_report"], connector=sqlite_engine):
        pass
    fields = events.of_job("orders.report")[-1]["inputs"][0]["facets"]["schema"]["fields"]
    assert fields == [
        {"name": "id", "type": "INTEGER", "ordinal_position": 1},
        {"name": "doubled", "ordinal_position": 2},  # an expression: SQLite declares no type, none is sent
        {"name": "payload", "type": "MYBLOB", "ordinal_position": 3},  # unknown to SQLAlchemy, declared in SQLite
        {"name": "currency", "ordinal_position": 4},
    ]


def test_a_sqlite_create_table_as_reports_the_types_sqlite_declares(events, sqlite_engine):
    with (
        lineage_run("orders.copy", outputs=["main/order_copy"], connector=sqlite_engine),
        sqlite_engine.begin() as conn,
    ):
        conn.exec_driver_sql(
            "CREATE TABLE order_copy AS SELECT id, CAST(amount AS REAL) AS amount, amount * 100 AS cents FROM orders"
        )
    fields = events.of_job("orders.copy")[-1]["outputs"][0]["facets"]["schema"]["fields"]
    assert [(f["name"], f.get("type")) for f in fields] == [("id", "INTEGER"), ("amount", "REAL"), ("cents", None)]
