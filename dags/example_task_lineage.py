"""Example: ``@task.lineage`` and ``LineageMixin`` — declared lineage on the task's own OpenLineage run.

Uses the same SQLite warehouse connection as ``example_lineage_run`` (``lineage_demo_warehouse``).

* ``stage_orders`` (``@task.lineage``) writes ``staged_orders``; its schema comes from the database;
* ``PartitionOrders`` is a custom operator with ``LineageMixin``: it copies the staged orders into a
  per-day table whose name is a template (``orders_{{ ds_nodash }}``), and so is its declared output. A run
  without a logical date (triggered from the UI or the REST API) takes the day from when it ran
  (``run_after``; see docs/task-lineage.md);
* ``score_customers`` (``@task.lineage``, mapped over regions) reads the partition of the day.

The stock OpenLineage listener emits each task's START/COMPLETE with these datasets; with OpenLineage not
configured for Airflow the tasks emit the same events themselves.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin

WAREHOUSE = "lineage_demo_warehouse"


def _engine():
    from airflow.providers.sqlite.hooks.sqlite import SqliteHook

    return SqliteHook(sqlite_conn_id=WAREHOUSE).get_sqlalchemy_engine()


class PartitionOrders(LineageMixin, BaseOperator):
    """Copies ``staged_orders`` into the partition table ``target`` (templated)."""

    template_fields = ("target",)

    def __init__(self, *, target: str, **kwargs):
        super().__init__(**kwargs)
        self.target = target

    def execute(self, context):
        with _engine().begin() as conn:  # idempotent: a retry or a second run replaces the partition's rows
            conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {self.target} (id INTEGER, region TEXT, amount NUMERIC(10,2))"
            )
            conn.exec_driver_sql(f"DELETE FROM {self.target}")
            conn.exec_driver_sql(f"INSERT INTO {self.target} SELECT id, region, amount FROM staged_orders")
            return conn.exec_driver_sql(f"SELECT COUNT(*) FROM {self.target}").scalar()


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),  # in the past wherever it is deployed; no catchup
    catchup=False,  # unpaused, it runs for the latest day only
    max_active_runs=1,  # a manual trigger waits for the scheduled run instead of racing it on the warehouse
    tags=["lineage", "example"],
    doc_md=__doc__,
)
def example_task_lineage():
    @task.lineage(outputs=["warehouse/staged_orders"], connector=WAREHOUSE, retries=2)
    def stage_orders() -> int:
        rows = [(1, "emea", 10.0), (2, "amer", 25.5), (3, "emea", 7.25)]
        with _engine().begin() as conn:  # idempotent: a retry or a second run replaces the rows
            conn.exec_driver_sql(
                "CREATE TABLE IF NOT EXISTS staged_orders (id INTEGER, region TEXT, amount NUMERIC(10,2))"
            )
            conn.exec_driver_sql("DELETE FROM staged_orders")
            conn.exec_driver_sql("INSERT INTO staged_orders VALUES (?, ?, ?)", rows)
        return len(rows)

    partition = PartitionOrders(
        task_id="partition_orders",
        target="orders_{{ ds_nodash }}",
        lineage_inputs=["warehouse/staged_orders"],
        lineage_outputs=["warehouse/orders_{{ ds_nodash }}"],
        lineage_connector=WAREHOUSE,
    )

    @task.lineage(inputs=["warehouse/orders_{{ ds_nodash }}"], connector=WAREHOUSE)
    def score_customers(region: str, ds_nodash: str | None = None) -> float:
        with _engine().connect() as conn:
            total = conn.exec_driver_sql(
                f"SELECT COALESCE(SUM(amount), 0) FROM orders_{ds_nodash} WHERE region = ?", (region,)
            ).scalar()
        return float(total)

    stage_orders() >> partition >> score_customers.expand(region=["emea", "amer"])


example_task_lineage()
