"""Egeria settings from DAG and task params, on plain @task functions and a stock operator.

Run with ``[openlineage] custom_run_facets = airflow_lineage_provider.extractors.run_facets``.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import BaseOperator, dag, task

SUPPLY_CHAIN = "InformationSupplyChain::sales-orders"
GOVERNANCE_ACTION = {
    "iscQualifiedName": SUPPLY_CHAIN,
    "engineActionGUID": "5d0e7a3c-6f0b-4a59-9a77-5f1f6b0d1c11",
    "governanceEngineName": "AssetGovernance",
    "requestType": "nightly-load",
    "governanceActionTypeName": "LoadOrders",
    "processName": "SalesOrdersPipeline",
    "processStepName": "load",
}
TASK_SUPPLY_CHAIN = "InformationSupplyChain::finance-ledger"


class SelfDescribingOperator(BaseOperator):
    """Says it attaches this package's facets itself (as LineageMixin operators do)."""

    lineage_provider_facets = True

    def execute(self, context: Any) -> str:
        return "self-describing"


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"information_supply_chain": SUPPLY_CHAIN, "egeria_governance_action": GOVERNANCE_ACTION},
)
def facets_egeria():
    @task
    def plain() -> str:
        return "plain"

    @task(params={"information_supply_chain": TASK_SUPPLY_CHAIN})
    def overridden() -> str:
        return "overridden"

    @task(params={"information_supply_chain": None, "egeria_governance_action": None})
    def opted_out() -> str:
        return "opted out"

    @task(params={"information_supply_chain": 42})
    def bad_supply_chain() -> str:
        return "ran despite a bad supply chain"

    @task(params={"egeria_governance_action": {"engineActionGuid": "misspelt key"}})
    def bad_governance_action() -> str:
        return "ran despite a bad governance action"

    @task
    def failing() -> None:
        raise ValueError("the task's own failure")

    BashOperator(task_id="stock_bash", bash_command="echo stock operator")
    SelfDescribingOperator(task_id="self_describing")
    plain()
    overridden()
    opted_out()
    bad_supply_chain()
    bad_governance_action()
    failing()


facets_egeria()
