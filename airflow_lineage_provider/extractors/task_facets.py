"""This package's run facets on the events of any Airflow task, and ``run_facets``, the stock listener's hook for them.

Configure it with::

    [openlineage]
    custom_run_facets = airflow_lineage_provider.extractors.run_facets

Every task event (START, COMPLETE, FAIL) then carries the Egeria facets its settings ask for, and the
COMPLETE event of a successful task that declares outputs carries the materialization facet. This works
for any task: plain ``@task`` functions, stock operators, custom operators.

Two kinds of task get nothing from here, because they attach the same facets themselves and the listener
lets custom run facets override an operator's own: operators whose class sets
``lineage_provider_facets = True`` (this package's ``LineageMixin`` and ``@task.lineage``), and operators
handled by :class:`~airflow_lineage_provider.extractors.DeclaredLineageExtractor`.

The facets themselves are put together by :func:`~airflow_lineage_provider.producer.task_facets.package_run_facets`;
this module supplies what a task knows of its own run: its declared outputs and the rows it wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from openlineage.client.facet_v2 import RunFacet

from airflow_lineage_provider import conf
from airflow_lineage_provider.extractors.declared_lineage import declared_lineage
from airflow_lineage_provider.extractors.sql import cursor_rows_written
from airflow_lineage_provider.producer.rows_written import recorded_rows_written
from airflow_lineage_provider.producer.task_facets import package_run_facets
from airflow_lineage_provider.reporting import warn_once
from airflow_lineage_provider.task_context import TaskContext

if TYPE_CHECKING:
    from airflow.sdk.types import RuntimeTaskInstanceProtocol
    from airflow.utils.state import TaskInstanceState
    from openlineage.client.event_v2 import Dataset

#: Class attribute by which an operator says it attaches this package's facets itself.
OWN_FACETS_ATTRIBUTE = "lineage_provider_facets"
EXTRACTOR_NAME = "DeclaredLineageExtractor"


def rows_written_by(context: TaskContext) -> int | None:
    """Rows the task wrote: what its code recorded, else its SQL cursors' rowcount, else ``None``."""
    if context.task_instance is not None:
        recorded = recorded_rows_written(context.task_instance)
        if recorded is not None:
            return recorded
    try:
        return cursor_rows_written(context.task)
    except Exception as error:
        task_id = getattr(context.task, "task_id", "?")
        warn_once(f"Lineage: could not read the rows written by task {task_id!r}: {error}")
        return None


def task_run_facets(
    task: RuntimeTaskInstanceProtocol | TaskContext,
    *,
    complete: bool,
    outputs: Iterable[Dataset | tuple[str, str]] | None = None,
    rows_written: int | None = None,
) -> dict[str, RunFacet]:
    """This package's run facets for one event of a task instance (or of a :class:`TaskContext` already
    resolved).

    Always the Egeria facets of the task; with ``complete=True`` (the COMPLETE event of a successful
    run) also the materialization facet, when the task has outputs. ``outputs`` are the event's output
    datasets if the caller knows them (``(namespace, name)`` pairs or openlineage Datasets), else the
    task's declared outputs (outlets, run-time asset events, tables its SQL writes). ``rows_written``
    overrides :func:`rows_written_by`. Never raises.

    Example (an operator's ``get_openlineage_facets_on_complete``)::

        lineage.run_facets.update(task_run_facets(task_instance, complete=True, outputs=lineage.outputs))
    """
    context = task if isinstance(task, TaskContext) else TaskContext.of(task)
    if context is None:
        return {}
    if complete:
        try:
            if outputs is None:
                outputs = declared_lineage(context.task, context.task_instance).outputs
            outputs = list(outputs)
            if outputs and rows_written is None:
                rows_written = rows_written_by(context)
        except Exception as error:
            warn_once(
                f"Lineage: could not build the materialization facet of task {getattr(context.task, 'task_id', '?')!r} "
                f"in DAG {getattr(context.task, 'dag_id', '?')!r}: {error}"
            )
            complete = False
    try:
        return package_run_facets(context, complete=complete, outputs=outputs or (), rows_written=rows_written)
    except Exception as error:  # misuse in strict mode, which must not reach the listener either
        warn_once(
            f"Lineage: the run facets of task {getattr(context.task, 'task_id', '?')!r} could not be built: {error}"
        )
        return {}


def handled_by_extractor(task: object) -> bool:
    """Whether :class:`DeclaredLineageExtractor` is registered and handles this task's operator class."""
    from airflow.providers.openlineage.conf import custom_extractors

    registered = any(
        path.startswith("airflow_lineage_provider.") and path.endswith(f".{EXTRACTOR_NAME}")
        for path in custom_extractors()
    )
    return registered and getattr(task, "task_type", None) in conf.extractor_operators()


def _succeeded(ti_state: TaskInstanceState | str | None) -> bool:
    return str(getattr(ti_state, "value", ti_state)).lower() == "success"


def run_facets(task_instance: RuntimeTaskInstanceProtocol, ti_state: TaskInstanceState) -> dict[str, RunFacet]:
    """``[openlineage] custom_run_facets`` function: this package's facets for one task event.

    ``ti_state`` is the ``TaskInstanceState`` the listener reports (RUNNING for START, SUCCESS for
    COMPLETE, FAILED for FAIL, SKIPPED). Never raises and never touches the task's outcome.
    """
    try:
        task = getattr(task_instance, "task", None)
        if task is not None and (getattr(task, OWN_FACETS_ATTRIBUTE, False) or handled_by_extractor(task)):
            return {}
        return task_run_facets(task_instance, complete=_succeeded(ti_state))
    except Exception as error:
        task_id, dag_id = getattr(task_instance, "task_id", "?"), getattr(task_instance, "dag_id", "?")
        warn_once(f"Lineage: the run facets of task {task_id!r} in DAG {dag_id!r} could not be built: {error}")
        return {}
