"""Example: declared lineage for custom Python tasks with ``lineage_run``.

Three TaskFlow tasks build a small customer report in a SQLite warehouse reached through the Airflow
connection ``lineage_demo_warehouse`` (the README demo sets it; any SQL connection works the same):

* ``load_raw`` writes ``raw_orders`` and ``raw_customers`` (bulk insert; schemas come from the database);
* ``build_customer_totals`` joins them into ``customer_totals`` with column lineage per output field;
* ``export_report`` writes a CSV file with a schema declared by hand.

Every ``lineage_run`` event nests under the task's own OpenLineage run (``parent`` facet), so a consumer
shows the task reading and writing these tables.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pendulum
from airflow.sdk import dag, task

from airflow_lineage_provider import column_lineage_facet, lineage_run, schema_facet

WAREHOUSE = "lineage_demo_warehouse"


def _engine():
    from airflow.providers.sqlite.hooks.sqlite import SqliteHook

    return SqliteHook(sqlite_conn_id=WAREHOUSE).get_sqlalchemy_engine()


@dag(
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),  # in the past wherever it is deployed; no catchup
    catchup=False,
    max_active_runs=1,  # two triggers one after the other run in turn on the shared warehouse
    tags=["lineage", "example"],
    doc_md=__doc__,
)
def example_lineage_run():
    @task
    def load_raw() -> int:
        orders = [(1, 10, 120.0), (2, 11, 80.5), (3, 10, 42.25), (4, 12, 300.0)]
        customers = [(10, "Ada"), (11, "Grace"), (12, "Edsger")]
        with lineage_run(
            "example_lineage_run.load_raw.bulk_insert",
            outputs=["warehouse/raw_orders", "warehouse/raw_customers"],
            connector=WAREHOUSE,
        ):
            with _engine().begin() as conn:  # idempotent: a retry or a second run replaces the rows
                conn.exec_driver_sql(
                    "CREATE TABLE IF NOT EXISTS raw_orders (id INTEGER, customer_id INTEGER, amount NUMERIC(10,2))"
                )
                conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS raw_customers (id INTEGER, name VARCHAR(80))")
                conn.exec_driver_sql("DELETE FROM raw_orders")
                conn.exec_driver_sql("DELETE FROM raw_customers")
                conn.exec_driver_sql("INSERT INTO raw_orders VALUES (?, ?, ?)", orders)
                conn.exec_driver_sql("INSERT INTO raw_customers VALUES (?, ?)", customers)
        return len(orders)

    @task
    def build_customer_totals(loaded: int) -> str:
        totals = column_lineage_facet(
            "warehouse/customer_totals",
            {
                "customer_id": {"source": "warehouse/raw_customers", "field": "id"},
                "name": [
                    {"source": "warehouse/raw_customers", "field": "name"},
                    {"source": "warehouse/raw_orders", "field": "customer_id", "operation": "JOIN"},
                ],
                "total": {"source": "warehouse/raw_orders", "field": "amount", "operation": "SUM"},
            },
        )
        with lineage_run(
            "example_lineage_run.build_customer_totals.join",
            inputs=["warehouse/raw_orders", "warehouse/raw_customers"],
            outputs=[totals],
            connector=WAREHOUSE,
        ) as run:
            with _engine().begin() as conn:
                conn.exec_driver_sql(
                    "CREATE TABLE IF NOT EXISTS customer_totals (customer_id INTEGER, name VARCHAR(80), total NUMERIC)"
                )
                conn.exec_driver_sql("DELETE FROM customer_totals")
                conn.exec_driver_sql(
                    "INSERT INTO customer_totals SELECT c.id, c.name, SUM(o.amount) FROM raw_orders o "
                    "JOIN raw_customers c ON o.customer_id = c.id GROUP BY c.id, c.name"
                )
            return run.run_id

    @task
    def export_report(_: str) -> str:
        target = Path(os.environ.get("LINEAGE_DEMO_DIR", "/tmp")) / "customer_totals.csv"
        report = schema_facet(f"file://{target}", {"customer_id": "INTEGER", "name": "TEXT", "total": "NUMERIC"})
        with lineage_run(
            "example_lineage_run.export_report.csv",
            inputs=["warehouse/customer_totals"],
            outputs=[report],
            connector=WAREHOUSE,
        ):
            with _engine().connect() as conn:
                rows = conn.exec_driver_sql("SELECT customer_id, name, total FROM customer_totals").fetchall()
            with target.open("w", newline="") as handle:
                csv.writer(handle).writerows([("customer_id", "name", "total"), *rows])
        return str(target)

    export_report(build_customer_totals(load_raw()))


example_lineage_run()
