"""Rows written, as task code reports them: :func:`record_rows_written`, read back for the task's COMPLETE event.

Runtime state of the running task, kept here in the producer; the facet carrying the total is defined in
:mod:`airflow_lineage_provider.facets.materialization`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from airflow_lineage_provider.reporting import report_misuse
from airflow_lineage_provider.task_context import TaskContext

if TYPE_CHECKING:
    from airflow.sdk.types import RuntimeTaskInstanceProtocol


# Rows recorded by task code, per task-instance try. Real workers run one task per process; the bound only
# matters for long-lived processes such as ``airflow dags test``.
_recorded: OrderedDict[tuple[Any, ...], int] = OrderedDict()
_recorded_lock = threading.Lock()
_RECORDED_MAX = 1024


def task_instance_key(task_instance: RuntimeTaskInstanceProtocol) -> tuple[Any, ...]:
    """The identity of one try of a task instance."""
    return tuple(
        getattr(task_instance, name, None) for name in ("dag_id", "task_id", "run_id", "map_index", "try_number")
    )


def record_rows_written(rows: int) -> int | None:
    """Add ``rows`` to the rows the running Airflow task wrote; returns the task's total so far.

    Call it from a ``@task`` function or an operator's ``execute`` (once, or once per batch). The
    task's COMPLETE event then carries the total in its materialization facet, provided the task
    declares outputs. A value that is not a whole number ``>= 0``, or a call outside a running task,
    is reported as misuse (logged, or raised with ``[lineage_provider] strict``) and ignored.

    Example::

        @task(outlets=[Asset("postgres://db:5432/warehouse/public/orders")])
        def load_orders():
            for batch in batches():
                record_rows_written(insert(batch))
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        report_misuse(ValueError(f"rows written {rows!r} must be a whole number of rows, 0 or more"))
        return None
    context = TaskContext.current()
    if context is None or context.task_instance is None:
        report_misuse(
            ValueError(
                f"record_rows_written({rows!r}) was called outside a running Airflow task; inside a "
                "lineage_run block set the run's rows_written instead"
            )
        )
        return None
    key = task_instance_key(context.task_instance)
    with _recorded_lock:
        total = _recorded.pop(key, 0) + rows
        _recorded[key] = total
        while len(_recorded) > _RECORDED_MAX:
            _recorded.popitem(last=False)
    return total


def recorded_rows_written(task_instance: RuntimeTaskInstanceProtocol) -> int | None:
    """The rows the task's own code recorded with :func:`record_rows_written`, or ``None``."""
    with _recorded_lock:
        return _recorded.get(task_instance_key(task_instance))
