"""``run_facets``: this package's run facets on every task event the stock OpenLineage listener sends.

Configure it with::

    [openlineage]
    custom_run_facets = airflow_lineage_provider.facets.run_facets

Every task event (START, COMPLETE, FAIL) then carries the Egeria facets its settings ask for, and the
COMPLETE event of a successful task that declares outputs carries the materialization facet. This works
for any task: plain ``@task`` functions, stock operators, custom operators.

Two kinds of task get nothing from here, because they attach the same facets themselves and the listener
lets custom run facets override an operator's own: operators whose class sets
``lineage_provider_facets = True`` (this package's ``LineageMixin`` and ``@task.lineage``), and operators
handled by :class:`~airflow_lineage_provider.extractors.DeclaredLineageExtractor`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openlineage.client.facet_v2 import RunFacet

from airflow_lineage_provider import conf
from airflow_lineage_provider.facets.declared import declared_lineage
from airflow_lineage_provider.facets.materialization import (
    MATERIALIZATION_KEY,
    materialization_facet,
    recorded_rows_written,
    run_dates,
)
from airflow_lineage_provider.facets.settings import egeria_facets
from airflow_lineage_provider.facets.sql import cursor_rows_written
from airflow_lineage_provider.reporting import warn_once

#: Class attribute by which an operator says it attaches this package's facets itself.
OWN_FACETS_ATTRIBUTE = "lineage_provider_facets"
EXTRACTOR_NAME = "DeclaredLineageExtractor"


def _context(task_instance: Any) -> dict[str, Any]:
    getter = getattr(task_instance, "get_template_context", None)
    if not callable(getter):
        return {}
    try:
        return dict(getter())
    except Exception as error:
        task_id = getattr(task_instance, "task_id", "?")
        warn_once(f"Lineage: could not read the context of task {task_id!r}: {error}")
        return {}


def rows_written_by(task_instance: Any, task: Any) -> int | None:
    """Rows the task wrote: what its code recorded, else its SQL cursors' rowcount, else ``None``."""
    recorded = recorded_rows_written(task_instance)
    if recorded is not None:
        return recorded
    try:
        return cursor_rows_written(task)
    except Exception as error:
        warn_once(f"Lineage: could not read the rows written by task {getattr(task, 'task_id', '?')!r}: {error}")
        return None


def task_run_facets(
    task_instance: Any,
    *,
    complete: bool,
    outputs: Iterable[Any] | None = None,
    rows_written: int | None = None,
) -> dict[str, RunFacet]:
    """This package's run facets for one event of a running task instance.

    Always the Egeria facets of the task; with ``complete=True`` (the COMPLETE event of a successful
    run) also the materialization facet, when the task has outputs. ``outputs`` are the event's output
    datasets if the caller knows them (``(namespace, name)`` pairs or openlineage Datasets), else the
    task's declared outputs (outlets, run-time asset events, tables its SQL writes). ``rows_written``
    overrides :func:`rows_written_by`. Never raises.

    Example (an operator's ``get_openlineage_facets_on_complete``)::

        lineage.run_facets.update(task_run_facets(task_instance, complete=True, outputs=lineage.outputs))
    """
    context = _context(task_instance)
    task = context.get("task") or getattr(task_instance, "task", None)
    if task is None:
        return {}
    facets = egeria_facets(task, context.get("params"))
    if not complete:
        return facets
    try:
        if outputs is None:
            outputs = declared_lineage(task, task_instance).outputs
        outputs = list(outputs)
        if not outputs:
            return facets
        if rows_written is None:
            rows_written = rows_written_by(task_instance, task)
        dates = run_dates(context["dag_run"]) if context.get("dag_run") is not None else {}
        facet = materialization_facet(outputs, rows_written=rows_written, **dates)
        if facet is not None:
            facets[MATERIALIZATION_KEY] = facet
    except Exception as error:
        warn_once(
            f"Lineage: could not build the materialization facet of task {getattr(task, 'task_id', '?')!r} "
            f"in DAG {getattr(task, 'dag_id', '?')!r}: {error}"
        )
    return facets


def handled_by_extractor(task: Any) -> bool:
    """Whether :class:`DeclaredLineageExtractor` is registered and handles this task's operator class."""
    from airflow.providers.openlineage.conf import custom_extractors

    registered = any(
        path.startswith("airflow_lineage_provider.") and path.endswith(f".{EXTRACTOR_NAME}")
        for path in custom_extractors()
    )
    return registered and getattr(task, "task_type", None) in conf.extractor_operators()


def _succeeded(ti_state: Any) -> bool:
    return str(getattr(ti_state, "value", ti_state)).lower() == "success"


def run_facets(task_instance: Any, ti_state: Any) -> dict[str, RunFacet]:
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
