"""Tasks with declared outputs that skip themselves: their run materialized nothing."""

from __future__ import annotations

import pendulum
from airflow.sdk import BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin


class SkipExport(LineageMixin, BaseOperator):
    """A custom operator that finds nothing to export and skips itself."""

    def execute(self, context):
        from airflow.exceptions import AirflowSkipException

        raise AirflowSkipException("nothing to export today")


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"information_supply_chain": "InformationSupplyChain::exports"},
)
def lineage_skip():
    @task.lineage(inputs=["warehouse/orders"], outputs=["file:///exports/orders.csv"])
    def skipped_function() -> None:
        from airflow.exceptions import AirflowSkipException

        raise AirflowSkipException("no new orders")

    skipped_function() >> SkipExport(
        task_id="skipped_operator",
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["file:///exports/orders_{{ ds_nodash }}.csv"],
        trigger_rule="all_done",
    )


lineage_skip()
