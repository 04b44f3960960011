"""A DAG without tasks whose params name an Egeria supply chain and governance action: a scheduler runs it to
success without workers, so its DAG run's START and COMPLETE come from the stock listener in the scheduler."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

with DAG(
    "egeria_dag_run",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={
        "information_supply_chain": "InformationSupplyChain::sales-orders",
        "egeria_governance_action": {"processName": "SalesOrdersPipeline", "processStepName": "load"},
    },
):
    pass
