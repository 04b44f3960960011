"""LineageMixin tasks that defer and are resumed: one finishes after resuming, one fails after resuming."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import BaseOperator, dag

from airflow_lineage_provider import LineageMixin


class WaitThenExport(LineageMixin, BaseOperator):
    """Waits for a moment (deferred to the triggerer), then exports; ``fail`` makes the resumed part fail."""

    def __init__(self, *, fail: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.fail = fail

    def execute(self, context):
        from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

        self.defer(trigger=TimeDeltaTrigger(timedelta(seconds=0)), method_name="export")

    def export(self, context, event=None):
        from airflow_lineage_provider.facets import record_rows_written

        if self.fail:
            raise RuntimeError("the export target refused the file")
        record_rows_written(42)  # known only once the resumed part ran: in the COMPLETE event iff sent after it
        return "exported"


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False)
def lineage_defer():
    WaitThenExport(
        task_id="resumed_export",
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["file:///exports/orders.csv"],
    ) >> WaitThenExport(
        task_id="failed_export",
        fail=True,
        lineage_inputs=["warehouse/orders"],
        lineage_outputs=["file:///exports/orders_copy.csv"],
    )


lineage_defer()
