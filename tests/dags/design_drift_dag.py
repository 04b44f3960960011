"""A DAG whose runs differ from what it declares: declared-vs-observed lineage and drift, end to end.

``summarize`` (``@task.lineage``) declares ``orders`` in and ``totals`` plus a per-day ``totals_{{ ds_nodash }}``
out. At design time the templated output is published as the pattern; a run names the rendered table
(``totals_20260201``), which the consumer matches to the pattern: the rendered table's edge is declared through
it, the pattern's own edge stays declared-only, and neither is drift.
``enrich`` (a ``LineageMixin`` operator) declares ``orders`` in and ``enriched`` out; which lookup file it
reads is only known when it runs, from the operator's own OpenLineage method, which the mixin merges in.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin

WAREHOUSE = "drift_warehouse"  # sqlite, from AIRFLOW_CONN_DRIFT_WAREHOUSE
LOOKUP_NAMESPACE, LOOKUP_NAME = "s3://lookups", "customers.csv"
#: Set: the DAG as changed later — ``summarize`` no longer declares the templated output, ``enrich`` is removed.
CHANGED = bool(os.environ.get("DESIGN_DRIFT_CHANGED"))


def _warehouse():
    from airflow.providers.sqlite.hooks.sqlite import SqliteHook

    return SqliteHook(sqlite_conn_id=WAREHOUSE).get_sqlalchemy_engine()


class EnrichOrders(LineageMixin, BaseOperator):
    """Writes ``enriched``; the lookup it reads is found at run time and reported by its own lineage."""

    def execute(self, context):
        with _warehouse().begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS enriched")
            conn.exec_driver_sql("CREATE TABLE enriched AS SELECT * FROM orders")

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset

        return OperatorLineage(inputs=[InputDataset(namespace=LOOKUP_NAMESPACE, name=LOOKUP_NAME)])


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def design_drift():
    @task.lineage(
        inputs=["warehouse/orders"],
        outputs=["warehouse/totals"] if CHANGED else ["warehouse/totals", "warehouse/totals_{{ ds_nodash }}"],
        connector=WAREHOUSE,
    )
    def summarize(ds_nodash=None) -> None:
        with _warehouse().begin() as conn:
            for table in ("totals", f"totals_{ds_nodash}"):
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
                conn.exec_driver_sql(f"CREATE TABLE {table} AS SELECT id, SUM(amount) AS total FROM orders GROUP BY 1")

    if CHANGED:
        summarize()
        return
    enrich = EnrichOrders(
        task_id="enrich",
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["warehouse/enriched"],
        lineage_connector=WAREHOUSE,
    )

    summarize() >> enrich


design_drift()
