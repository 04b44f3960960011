"""Materialization facet of a stock SQL operator writing to a real PostgreSQL.

Needs the connection ``facets_pg`` (``AIRFLOW_CONN_FACETS_PG``), the schema to write into in
``FACETS_PG_SCHEMA`` and ``[openlineage] custom_run_facets = airflow_lineage_provider.extractors.run_facets``.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import dag

try:
    from airflow.sdk import CronDataIntervalTimetable
except ImportError:  # Airflow 3.1: not yet in the Task SDK's public names
    from airflow.timetables.interval import CronDataIntervalTimetable

SCHEMA = os.environ.get("FACETS_PG_SCHEMA", "public")


@dag(
    schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
)
def facets_postgres():
    SQLExecuteQueryOperator(
        task_id="load_postgres",
        conn_id="facets_pg",
        sql=[
            f"CREATE TABLE {SCHEMA}.orders (id INTEGER PRIMARY KEY, amount NUMERIC(10, 2))",
            f"INSERT INTO {SCHEMA}.orders SELECT n, n * 1.5 FROM generate_series(1, 40) AS n",
            f"UPDATE {SCHEMA}.orders SET amount = 0 WHERE id <= 10",
            f"DELETE FROM {SCHEMA}.orders WHERE id > 35",
            f"SELECT id FROM {SCHEMA}.orders",
        ],
    )


facets_postgres()
