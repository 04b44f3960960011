"""Egeria settings from the ``[lineage_provider]`` defaults, for a DAG that sets no params of its own.

Run with ``[openlineage] custom_run_facets = airflow_lineage_provider.extractors.run_facets`` and
``AIRFLOW__LINEAGE_PROVIDER__INFORMATION_SUPPLY_CHAIN`` / ``..._EGERIA_GOVERNANCE_ACTION`` set.
"""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import dag, task

TASK_SUPPLY_CHAIN = "InformationSupplyChain::task-level"


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def facets_defaults():
    @task
    def plain() -> str:
        return "plain"

    @task(params={"information_supply_chain": TASK_SUPPLY_CHAIN})
    def task_level() -> str:
        return "task level"

    BashOperator(task_id="stock_bash", bash_command="echo stock operator")
    plain()
    task_level()


facets_defaults()
