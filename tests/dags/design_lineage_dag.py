"""Every form of declared lineage design-time publication reads from the serialized DAG.

``design_lineage`` (scheduled on an Asset) declares lineage with ``@task.lineage`` (plain, templated,
mapped), a ``LineageMixin`` operator, ``inlets``/``outlets`` Assets, SQL without and with templates, and
Egeria settings on the DAG and on one task. ``design_lineage_plain`` has nothing declared at all.
Nothing here needs to run: the tests only publish what is declared.
"""

from __future__ import annotations

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import Asset, BaseOperator, dag, task

from airflow_lineage_provider import LineageMixin

WAREHOUSE = "design_warehouse"  # sqlite, from AIRFLOW_CONN_DESIGN_WAREHOUSE
RAW_ORDERS = Asset("s3://raw-bucket/orders.parquet")
DAILY_REPORT = Asset("s3://reports/daily.csv")


class ExportOrders(LineageMixin, BaseOperator):
    """A custom operator whose declared output is templated."""

    template_fields = ("target",)

    def __init__(self, *, target: str, **kwargs):
        super().__init__(**kwargs)
        self.target = target

    def execute(self, context):
        return self.target


@dag(
    schedule=[RAW_ORDERS],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    doc_md="Loads the raw orders and reports on them.",
    default_args={"owner": "data-eng, analytics"},
    tags=["design"],
    params={"information_supply_chain": "InformationSupplyChain::orders"},
)
def design_lineage():
    @task.lineage(inputs=["s3://raw-bucket/orders.parquet"], outputs=["warehouse/orders"], connector=WAREHOUSE)
    def load_orders() -> None:
        """Copies the raw orders into the warehouse."""

    @task.lineage(
        inputs=["warehouse/orders"],
        outputs=["warehouse/orders_{{ ds_nodash }}", {"namespace": "s3://exports", "name": "orders/{{ ds }}.csv"}],
        connector=WAREHOUSE,
        params={"information_supply_chain": "InformationSupplyChain::finance"},
    )
    def partition_orders() -> None: ...

    export = ExportOrders(
        task_id="export_orders",
        target="export_{{ ds_nodash }}",
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["warehouse/export_{{ ds_nodash }}"],
        lineage_connector=WAREHOUSE,
        doc_md="Exports a day of orders.",
        owner="exports-team",
    )

    @task.lineage(outputs=["warehouse/part_{{ ti.map_index }}"], connector=WAREHOUSE)
    def mapped_part(n: int) -> int:
        return n

    totals = SQLExecuteQueryOperator(
        task_id="totals",
        conn_id=WAREHOUSE,
        sql="INSERT INTO totals SELECT customer_id, SUM(amount) FROM orders GROUP BY customer_id",
    )
    daily = SQLExecuteQueryOperator(
        task_id="daily",
        conn_id=WAREHOUSE,
        sql="INSERT INTO daily_{{ ds_nodash }} SELECT * FROM orders",
    )

    @task(inlets=[Asset("s3://reports/templates.json")], outlets=[DAILY_REPORT])
    def report() -> None: ...

    load_orders() >> partition_orders() >> export >> mapped_part.expand(n=[1, 2]) >> totals >> daily >> report()


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def design_lineage_plain():
    @task
    def nothing_declared() -> None: ...

    nothing_declared()


design_lineage()
design_lineage_plain()
