"""A task that wraps its work in lineage_run: its events must nest under the task's own run."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task

from airflow_lineage_provider import lineage_run


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"information_supply_chain": "InformationSupplyChain::parent-links"},
)
def parent_link():
    @task
    def transform() -> int:
        with lineage_run("parent_link.transform.orders", inputs=["raw/orders"], outputs=["main/orders"]) as run:
            run.rows_written = 42
            return 42

    @task
    def mapped(n: int) -> int:
        with lineage_run(f"parent_link.mapped.part_{n}", outputs=[f"main/part_{n}"]):
            return n

    transform() >> mapped.expand(n=[1, 2])


parent_link()
