"""Where the code runs: the Airflow task (its task instance, operator, params and DAG run) and the enclosing
``lineage_run`` block, looked up in one place.

Every part of the package that needs the running task asks here, once per block or task event:
``lineage_run`` and ``emit_lineage`` (:meth:`TaskContext.current`), the ``LineageMixin`` and the task's own
events (:meth:`TaskContext.of` a task instance, or the current one), the extractor, the ``custom_run_facets``
function and ``record_rows_written``. The package's run facets for an event of that task are assembled from it
by :func:`~airflow_lineage_provider.producer.task_facets.package_run_facets`.

Example::

    context = TaskContext.current()  # None outside a running task
    if context is not None:
        print(context.task.task_id, context.run_link.run_id)
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypedDict

from airflow_lineage_provider.parent_run import RunLink, task_run_link
from airflow_lineage_provider.reporting import warn_once

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context
    from airflow.sdk.types import DagRunProtocol, Operator, RuntimeTaskInstanceProtocol


class RunDates(TypedDict, total=False):
    """The DAG run's dates, as the keywords of :func:`~airflow_lineage_provider.facets.materialization_facet`."""

    data_interval_start: datetime | None
    data_interval_end: datetime | None
    logical_date: datetime | None


#: ``airflow.sdk.get_current_context``, once imported.
_get_current_context: Any = None


@dataclass(frozen=True, eq=False)
class TaskContext:
    """The running Airflow task, resolved once from Airflow's context (a block's two events, or one task event,
    share it). Hashable by identity."""

    task: Operator
    """The operator (for a mapped task, the unmapped operator of this map index)."""
    task_instance: RuntimeTaskInstanceProtocol | None = None
    """The task instance, ``None`` when only the operator is known (e.g. an extractor called before the run)."""
    params: Mapping[str, Any] | None = None
    """The run's resolved params (``context["params"]``), ``None`` when only the declared ones are known."""
    dag_run: DagRunProtocol | None = None
    """The DAG run, when known."""
    template_context: Mapping[str, Any] | None = field(default=None, repr=False)
    """Airflow's whole context of the task (what Jinja templates render with), when known."""
    memo: dict[str, Any] = field(default_factory=dict, repr=False)
    """Values derived from this context once for all its events (e.g. the task's Egeria facets)."""

    @classmethod
    def current(cls) -> TaskContext | None:
        """The task running in this thread, or ``None`` outside a running task (scripts, notebooks, tests)."""
        global _get_current_context
        try:
            if _get_current_context is None:  # imported once: an import statement costs a microsecond per block
                from airflow.sdk import get_current_context

                _get_current_context = get_current_context
            context = _get_current_context()
        except Exception:  # not inside a running task
            return None
        return cls.from_airflow_context(context)

    @classmethod
    def from_airflow_context(cls, context: Context | Mapping[str, Any]) -> TaskContext | None:
        """The task of an Airflow context dict (``None`` when it names no task instance)."""
        task_instance = context.get("task_instance") or context.get("ti")
        task = context.get("task") or getattr(task_instance, "task", None)
        if task_instance is None or task is None:
            return None
        return cls(
            task=task,
            task_instance=task_instance,
            params=context.get("params"),
            dag_run=context.get("dag_run"),
            template_context=context,
        )

    @classmethod
    def of(cls, task_instance: RuntimeTaskInstanceProtocol) -> TaskContext | None:
        """The context of ``task_instance``: the current one when it is this task instance's (inside
        ``execute``), else the task instance's own template context (the listener calls after ``execute``).
        ``None`` when neither names the task. Never raises."""
        current = cls.current()
        if current is not None and current.task_instance is task_instance:
            return current
        try:
            context: Mapping[str, Any] = task_instance.get_template_context()
        except Exception as error:
            task_id = getattr(task_instance, "task_id", "?")
            warn_once(f"Lineage: could not read the context of task {task_id!r}: {error}")
            context = {"task_instance": task_instance}
        return cls.from_airflow_context({**context, "task_instance": task_instance})

    @cached_property
    def run_link(self) -> RunLink:
        """The task's OpenLineage run (with the DAG run as root), as the stock listener names it. Raises when it
        cannot be computed (no task instance, or the stock macros fail)."""
        if self.task_instance is None:
            raise ValueError(f"task {getattr(self.task, 'task_id', '?')!r} has no task instance to name its run")
        return task_run_link(self.task_instance)

    @property
    def skipped(self) -> bool:
        """Whether the task instance ended skipped (as the listener reports a skipped task's COMPLETE)."""
        state = getattr(self.task_instance, "state", None)
        return str(getattr(state, "value", state)).lower() == "skipped"

    def run_dates(self) -> RunDates:
        """The DAG run's data interval and logical date (``{}`` when the DAG run is not known)."""
        return dag_run_dates(self.dag_run)


def dag_run_dates(dag_run: DagRunProtocol | None) -> RunDates:
    """A DAG run's data interval and logical date (``{}`` for ``None``)."""
    if dag_run is None:
        return {}
    return {
        "data_interval_start": getattr(dag_run, "data_interval_start", None),
        "data_interval_end": getattr(dag_run, "data_interval_end", None),
        "logical_date": getattr(dag_run, "logical_date", None),
    }


# The innermost ``lineage_run`` block being executed in this context: the parent of events built inside it.
_enclosing_run: contextvars.ContextVar[RunLink | None] = contextvars.ContextVar("enclosing_run", default=None)


def enclosing_run() -> RunLink | None:
    """The innermost ``lineage_run`` block being executed in this context, if any."""
    return _enclosing_run.get()


def enter_run(link: RunLink) -> contextvars.Token[RunLink | None]:
    """Make ``link`` the enclosing run of code in this context until :func:`leave_run` with the token."""
    return _enclosing_run.set(link)


def leave_run(token: contextvars.Token[RunLink | None]) -> None:
    """Restore the enclosing run :func:`enter_run` replaced."""
    _enclosing_run.reset(token)


def current_parent(context: TaskContext | None) -> RunLink | None:
    """The run events built here point at: the enclosing ``lineage_run``, else the task's run (``context``, the
    running task or ``None``), else ``None``. Never raises."""
    outer = _enclosing_run.get()
    if outer is not None:
        return outer
    if context is None:
        return None
    try:
        return context.run_link
    except Exception as error:
        warn_once(f"Lineage: could not compute the Airflow task's OpenLineage run id ({error}); events have no parent.")
        return None


def run_dates(dag_run: DagRunProtocol | None = None) -> RunDates:
    """The ``data_interval_start``/``data_interval_end``/``logical_date`` keywords of :func:`materialization_facet`
    for a DAG run (default: the run of the Airflow task running now; ``{}`` outside a task).

    Example (inside a task)::

        facet = materialization_facet(outputs, rows_written=run.rows_written, **run_dates())
    """
    if dag_run is not None:
        return dag_run_dates(dag_run)
    context = TaskContext.current()
    return context.run_dates() if context is not None else {}
