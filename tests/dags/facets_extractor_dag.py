"""Operators without lineage of their own, handled by ``DeclaredLineageExtractor``.

Needs the connection ``facets_sqlite`` (``AIRFLOW_CONN_FACETS_SQLITE``) and
``[openlineage] extractors = airflow_lineage_provider.extractors.DeclaredLineageExtractor`` with
``[lineage_provider] extractor_operators = CopyRowsOperator;PublishOperator``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pendulum
from airflow.providers.sqlite.hooks.sqlite import SqliteHook
from airflow.sdk import Asset, BaseOperator, dag, task

try:
    from airflow.sdk import CronDataIntervalTimetable
except ImportError:  # Airflow 3.1: not yet in the Task SDK's public names
    from airflow.timetables.interval import CronDataIntervalTimetable

SETUP = [
    "CREATE TABLE IF NOT EXISTS raw_orders (id INTEGER PRIMARY KEY, amount NUMERIC(10, 2))",
    "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, amount NUMERIC(10, 2))",
    "INSERT INTO raw_orders (id, amount) VALUES (1, 10.0), (2, 20.0), (3, 30.0), (4, 40.0)",
]


class CopyRowsOperator(BaseOperator):
    """Runs SQL through a SQLite hook it keeps; has no OpenLineage methods of its own."""

    template_fields: Sequence[str] = ("sql",)

    def __init__(self, *, sql: str | list[str], conn_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sql = sql
        self.conn_id = conn_id

    def execute(self, context: Any) -> None:
        self.hook = SqliteHook(sqlite_conn_id=self.conn_id)
        self.hook.run(self.sql)


class PublishOperator(BaseOperator):
    """Declares its lineage only through inlets and outlets."""

    def execute(self, context: Any) -> str:
        return "published"


@dag(
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"information_supply_chain": "InformationSupplyChain::sales-orders"},
)
def facets_extractor():
    setup = CopyRowsOperator(task_id="setup", conn_id="facets_sqlite", sql=SETUP)
    copy = CopyRowsOperator(
        task_id="copy_orders",
        conn_id="facets_sqlite",
        sql="INSERT INTO orders (id, amount) SELECT id, amount FROM raw_orders WHERE amount > 15",
        params={"egeria_governance_action": {"governanceEngineName": "AssetGovernance", "requestType": "copy"}},
    )
    publish = PublishOperator(
        task_id="publish",
        inlets=[Asset("file:///srv/exports/orders.csv")],
        outlets=[Asset("file:///srv/published/orders.csv")],
    )

    broken = CopyRowsOperator(
        task_id="broken_copy",
        conn_id="facets_sqlite",
        sql="INSERT INTO orders (id, amount) SELECT id, amount FROM missing_table",
    )

    @task(outlets=[Asset("file:///srv/untouched.csv")])
    def not_listed() -> None:
        return None

    setup >> copy >> publish
    setup >> broken
    not_listed()


facets_extractor()
