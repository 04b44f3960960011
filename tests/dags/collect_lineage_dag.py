"""CollectLineageOperator in a real DAG: failed columns from a list, from a table and from DQX-shaped results,
and a broken output connection that must not fail the run. Paths and connections come from the test's environment."""

from __future__ import annotations

import json
import os

import pendulum
from airflow.sdk import dag, task

from airflow_lineage_provider.operators.collect_lineage import CollectLineageOperator, LineageSearch

SOURCE = {"source_namespace": "warehouse", "source_name": "staging.orders", "lineage_conn_id": "lineage_store"}


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def collect_lineage_dag():
    from_list = CollectLineageOperator(
        task_id="collect_from_list",
        **SOURCE,
        output_table="lineage_edges",
        output_conn_id="warehouse",
        failed_columns=["amount"],
        upstream=LineageSearch(depth=2, max_nodes=50, lookback_days=30),
        downstream=LineageSearch(depth=2, max_nodes=50, lookback_days=30),
        column_upstream=LineageSearch(depth=2),
        column_downstream=LineageSearch(depth=2),
    )
    from_table = CollectLineageOperator(
        task_id="collect_from_table",
        **SOURCE,
        output_table="lineage_edges_from_table",
        output_conn_id="warehouse",
        failed_columns_table="dq_failures",
        upstream=None,
        downstream=LineageSearch(depth=1, lookback_days=None),
        column_upstream=None,
    )
    from_results = CollectLineageOperator(
        task_id="collect_from_results",
        **SOURCE,
        output_table="lineage_edges_from_results",
        output_conn_id="warehouse",
        write_mode="overwrite",
        results_output_table="dq_output",  # DQX's shape: _errors / _warnings arrays of issue structs
        upstream=None,
        downstream=None,
        column_upstream=LineageSearch(depth=None, lookback_days=None),
        column_downstream=None,
    )
    broken = CollectLineageOperator(
        task_id="collect_broken_output",
        **SOURCE,
        output_table="lineage_edges",
        output_conn_id="broken_warehouse",
        failed_columns=["amount"],
    )

    @task
    def record(**context):
        results = {
            t: context["ti"].xcom_pull(task_ids=t)
            for t in ("collect_from_list", "collect_from_table", "collect_from_results", "collect_broken_output")
        }
        with open(os.environ["COLLECT_LINEAGE_RESULTS"], "w") as handle:
            json.dump(results, handle)

    [from_list, from_table, from_results, broken] >> record()


collect_lineage_dag()
