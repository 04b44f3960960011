"""Tasks with declared lineage: @task.lineage in every @task role, a LineageMixin operator, composition
with a SQL operator's own lineage, and lineage problems that must not fail any task."""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin, lineage_run
from airflow_lineage_provider.facets import record_rows_written

WAREHOUSE = "lineage_test_warehouse"  # sqlite, from AIRFLOW_CONN_LINEAGE_TEST_WAREHOUSE
PG = "lineage_test_pg"  # PostgreSQL test database, from AIRFLOW_CONN_LINEAGE_TEST_PG
PG_SCHEMA = os.environ.get("LINEAGE_TEST_PG_SCHEMA", "public")


def _warehouse():
    from airflow.providers.sqlite.hooks.sqlite import SqliteHook

    return SqliteHook(sqlite_conn_id=WAREHOUSE).get_sqlalchemy_engine()


class CopyRows(LineageMixin, BaseOperator):
    """A custom operator: copies orders into a per-day partition table."""

    template_fields = ("target",)

    def __init__(self, *, target: str, **kwargs):
        super().__init__(**kwargs)
        self.target = target

    def execute(self, context):
        with _warehouse().begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {self.target}")
            conn.exec_driver_sql(f"CREATE TABLE {self.target} AS SELECT * FROM orders")
        return self.target


class LineageSQLOperator(LineageMixin, SQLExecuteQueryOperator):
    """A stock SQL operator with extra declared lineage: its own parsed lineage must be kept."""


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"information_supply_chain": "InformationSupplyChain::orders"},
)
def lineage_tasks():
    @task.lineage(outputs=["warehouse/orders"], connector=WAREHOUSE)
    def seed() -> int:
        with _warehouse().begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS orders")
            conn.exec_driver_sql("CREATE TABLE orders (id INTEGER, customer_id INTEGER, amount NUMERIC(10, 2))")
            inserted = conn.exec_driver_sql("INSERT INTO orders VALUES (1, 10, 5.5), (2, 11, 7.25)").rowcount
        record_rows_written(inserted)
        return 2

    @task.lineage(inputs=["warehouse/orders"], outputs=["warehouse/totals"], connector=WAREHOUSE, multiple_outputs=True)
    def totals(rows: int) -> dict:
        with lineage_run("lineage_tasks.totals.inner", inputs=["warehouse/orders"]):
            pass
        with _warehouse().begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS totals")
            conn.exec_driver_sql(
                "CREATE TABLE totals AS SELECT customer_id, SUM(amount) AS total FROM orders GROUP BY 1"
            )
        return {"rows": rows, "tables": 1}

    @task
    def check(rows: int, tables: int) -> None:
        assert (rows, tables) == (2, 1), (rows, tables)

    @task.lineage(outputs=["warehouse/part_{{ ti.map_index }}_{{ ds_nodash }}"])
    def mapped(n: int) -> int:
        return n * 10

    @task.lineage(inputs=["warehouse/orders"], retries=1, retry_delay=timedelta(seconds=0))
    def flaky() -> str:
        from airflow.sdk import get_current_context

        if get_current_context()["ti"].try_number == 1:
            raise RuntimeError("first try fails on purpose")
        return "ok"

    @task.lineage(outputs=["warehouse/{{ no_such_variable.attribute }}", "warehouse/still_declared"])
    def bad_template() -> str:
        return "ran"

    @task.lineage(inputs=["down/orders"], connector={"down": "lineage_test_unreachable"})
    def unreachable_schema_source() -> str:
        return "ran"

    @task.lineage(inputs=[42, "warehouse/orders"])
    def bad_dataset() -> str:
        return "ran"

    copy = CopyRows(
        task_id="copy_rows",
        target="orders_{{ ds_nodash }}",
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["warehouse/orders_{{ ds_nodash }}"],
        lineage_connector=WAREHOUSE,
    )

    rows = seed()
    out = totals(rows)
    check(out["rows"], out["tables"])
    rows >> mapped.expand(n=[1, 2])
    rows >> [flaky(), bad_template(), unreachable_schema_source(), bad_dataset(), copy]
    rows >> mapped.override(task_id="mapped_renamed").expand(n=[3])


lineage_tasks()


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def lineage_sql():
    # its own DAG: under `airflow dags test` all tasks share a process, and the stock provider's
    # per-query hook lineage of a SQL task would otherwise show up under the tasks that follow it
    LineageSQLOperator(
        task_id="pg_sql",
        conn_id=PG,
        sql=f"INSERT INTO {PG_SCHEMA}.pg_target SELECT id, amount FROM {PG_SCHEMA}.pg_source",
        # no lineage_connector: "db/..." is named and described by the operator's own hook (get_db_hook)
        lineage_outputs=["file:///exports/pg_target.csv", f"db/{PG_SCHEMA}.pg_audit"],
    )


lineage_sql()


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def lineage_failure():
    @task.lineage(inputs=["warehouse/orders"], outputs=["warehouse/never_written"], connector=WAREHOUSE)
    def explode() -> None:
        raise ValueError("bad input row 7")

    explode()


lineage_failure()
