"""Materialization facets: rows from a real SQLite write, rows recorded by task code, the data interval.

Needs the connections ``facets_sqlite`` and ``facets_broken`` (``AIRFLOW_CONN_*``) and
``[openlineage] custom_run_facets = airflow_lineage_provider.extractors.run_facets``.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import Asset, BaseOperator, dag, task

try:
    from airflow.sdk import CronDataIntervalTimetable
except ImportError:  # Airflow 3.1: not yet in the Task SDK's public names
    from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_lineage_provider.facets import record_rows_written

EXPORT = Asset("file:///srv/exports/orders.csv")
REPORT = Asset("file:///srv/exports/report.csv")
PARTS = Asset("file:///srv/exports/parts")


class UnreachableSqlOperator(BaseOperator):
    """Holds SQL for a connection whose hook cannot be built (``facets_broken``, an unknown connection type):
    its lineage lookups fail, the task must not."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sql = "INSERT INTO audit_log SELECT * FROM orders"
        self.conn_id = "facets_broken"

    def execute(self, context: Any) -> str:
        return "done"


@dag(
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"information_supply_chain": "InformationSupplyChain::sales-orders"},
)
def facets_materialization():
    SQLExecuteQueryOperator(
        task_id="load_sqlite",
        conn_id="facets_sqlite",
        sql=[
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, amount NUMERIC(10, 2))",
            "INSERT INTO orders (id, amount) VALUES (1, 10.5), (2, 20.0), (3, 7.25)",
            "UPDATE orders SET amount = amount * 2 WHERE id < 3",
            "DELETE FROM orders WHERE id = 3",
            "SELECT id, amount FROM orders",
        ],
    )

    @task(outlets=[EXPORT])
    def export_in_batches() -> int:
        record_rows_written(4)
        return record_rows_written(6) or 0

    @task(outlets=[REPORT])
    def without_row_count() -> None:
        return None

    @task
    def without_outputs() -> None:
        record_rows_written(7)

    @task(outlets=[REPORT])
    def failing_with_outputs() -> None:
        record_rows_written(1)
        raise RuntimeError("failed after writing")

    @task(outlets=[PARTS])
    def export_part(part: int) -> None:
        record_rows_written(part * 10)

    @task(outlets=[REPORT])
    def misuses_the_row_count() -> str:
        record_rows_written(-5)
        record_rows_written(2)
        return "still fine"

    UnreachableSqlOperator(task_id="unreachable_sql", outlets=[REPORT])
    misuses_the_row_count()
    export_in_batches()
    export_part.expand(part=[1, 2])
    without_row_count()
    without_outputs()
    failing_with_outputs()


facets_materialization()
