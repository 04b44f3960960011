"""Task events emitted by the task itself when the stock OpenLineage listener is not active.

With the listener active it emits the task's START/COMPLETE/FAIL (reading the mixin's
``get_openlineage_facets_*``) and nothing here runs. When OpenLineage is not configured for Airflow at all,
a ``LineageMixin`` task emits those events itself around ``execute``, through the package's own client
resolution (openlineage-python's standard configuration), with the very run ids the listener would have
used — job ``dag_id.task_id``, run id from namespace, dag_id, task_id, try number, logical date and map
index, parent the DAG run — so turning the listener on later changes nothing downstream. With
``[openlineage] disabled`` nothing is emitted either way.

A task that skips itself (``AirflowSkipException``) ends with COMPLETE, as the listener reports a skipped
task, without the materialization facet: a skipped run materialized nothing.

A task that defers (``TaskDeferred``) has not ended: nothing is sent when it defers, and the process that
resumes it (``resume_execution``, which Airflow calls instead of ``execute``) sends the terminal event — COMPLETE,
the skip's COMPLETE or FAIL — of the same run (the try number, so the run id, does not change on resumption),
or nothing again when it defers again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from openlineage.client.event_v2 import RunState as EventType

from airflow_lineage_provider.parent_run import RunLink
from airflow_lineage_provider.producer import client
from airflow_lineage_provider.producer.emit import build_run_event, error_message_facet, job_namespace
from airflow_lineage_provider.reporting import warn_once
from airflow_lineage_provider.task_context import TaskContext

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

_WRAPPED = "_lineage_self_emission"


class EmitsOwnEvents(Protocol):
    """What this module asks of the operator whose events it emits (``LineageMixin`` provides it)."""

    @property
    def task_id(self) -> str: ...

    def event_lineage(self, event_type: EventType, context: TaskContext, *, skipped: bool = False) -> OperatorLineage:
        """The datasets and facets of the task's ``event_type`` event (COMPLETE: of a skipped run if ``skipped``)."""
        ...


def listener_will_emit() -> bool:
    """The stock listener emits this task's events (OpenLineage configured for Airflow and enabled)."""
    return client.airflow_openlineage_active()


def should_self_emit() -> bool:
    """Whether a task with the mixin emits its own events: OpenLineage enabled, and the listener not active."""
    try:
        return not client.openlineage_disabled() and not listener_will_emit()
    except Exception as error:
        warn_once(f"Lineage: could not tell whether the OpenLineage listener is active ({error}); not emitting.")
        return False


class TaskEvents:
    """Builds and sends one task try's START and terminal events, as the listener would name them."""

    def __init__(self, operator: EmitsOwnEvents, context: TaskContext) -> None:
        self.operator = operator
        self.context = context
        link = context.run_link
        dag_run = link.root or link
        self.task_run = link
        self.parent = RunLink(dag_run.namespace, dag_run.name, dag_run.run_id)

    def _send(self, event_type: EventType, lineage: OperatorLineage, error: BaseException | None = None) -> None:
        run_facets = dict(lineage.run_facets or {})
        if error is not None:
            run_facets["errorMessage"] = error_message_facet(error)
        event = build_run_event(
            event_type,
            job_namespace=job_namespace(),
            job_name=self.task_run.name,
            run_id=self.task_run.run_id,
            inputs=list(lineage.inputs or []),
            outputs=list(lineage.outputs or []),
            job_facets=lineage.job_facets,
            run_facets=run_facets,
            parent=self.parent,
        )
        client.send(event)

    def start(self) -> None:
        """START: the declared datasets, without schemas."""
        self._guarded(EventType.START)

    def complete(self) -> None:
        """COMPLETE of a successful run."""
        self._guarded(EventType.COMPLETE)

    def skipped(self) -> None:
        """COMPLETE of a run that skipped itself: what the listener sends for a skipped task."""
        self._guarded(EventType.COMPLETE, skipped=True)

    def fail(self, error: BaseException) -> None:
        """FAIL, with the error's message and stack trace."""
        self._guarded(EventType.FAIL, error=error)

    def _guarded(self, event_type: EventType, *, skipped: bool = False, error: BaseException | None = None) -> None:
        try:
            self._send(event_type, self.operator.event_lineage(event_type, self.context, skipped=skipped), error)
        except Exception as failure:
            warn_once(f"Lineage: the {event_type.name} event of task {self.operator.task_id!r} was not sent: {failure}")


def _is_any(error: BaseException, *names: str) -> bool:
    return any(cls.__name__ in names for cls in type(error).__mro__)


def _task_events(operator: Any, context: Any) -> TaskEvents | None:
    """The events of ``operator``'s run in Airflow ``context``, or ``None`` when it does not emit them itself."""
    if operator.__dict__.get("_lineage_emitting") or not should_self_emit():
        return None
    try:
        task = TaskContext.from_airflow_context(context)
        if task is None:
            raise ValueError("its context names no task instance")
        return TaskEvents(operator, task)
    except Exception as error:
        warn_once(f"Lineage: task {operator.task_id!r} cannot emit its own events ({error}); running without.")
        return None


def _run_to_its_end(operator: Any, events: TaskEvents, call: Callable[[], Any]) -> Any:
    """Run ``call`` (the task's ``execute`` or its resumption) and send the event its end calls for."""
    operator.__dict__["_lineage_emitting"] = True
    try:
        result = call()
    except BaseException as error:
        if _is_any(error, "TaskDeferred"):
            pass  # not an end: the resumed task sends it
        elif _is_any(error, "AirflowSkipException"):
            events.skipped()
        else:
            events.fail(error)
        raise
    finally:
        operator.__dict__.pop("_lineage_emitting", None)
    events.complete()
    return result


def wrap_execute(cls: type) -> None:
    """Make ``cls.execute`` (and ``resume_execution``, its continuation after a deferral) emit the task's events
    itself when the listener will not (idempotent)."""
    execute: Callable[..., Any] | None = getattr(cls, "execute", None)
    if execute is None or getattr(execute, _WRAPPED, False):
        return

    @functools.wraps(execute)
    def execute_with_task_events(self: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        events = _task_events(self, context)
        if events is None:
            return execute(self, context, *args, **kwargs)
        events.start()
        return _run_to_its_end(self, events, lambda: execute(self, context, *args, **kwargs))

    setattr(execute_with_task_events, _WRAPPED, True)
    setattr(cls, "execute", execute_with_task_events)  # noqa: B010 - replaces the class's method
    resume: Callable[..., Any] | None = getattr(cls, "resume_execution", None)
    if resume is None or getattr(resume, _WRAPPED, False):
        return

    @functools.wraps(resume)
    def resume_with_task_events(self: Any, next_method: str, next_kwargs: Any, context: Any) -> Any:
        events = _task_events(self, context)  # no START: the run started before it deferred
        if events is None:
            return resume(self, next_method, next_kwargs, context)
        return _run_to_its_end(self, events, lambda: resume(self, next_method, next_kwargs, context))

    setattr(resume_with_task_events, _WRAPPED, True)
    setattr(cls, "resume_execution", resume_with_task_events)  # noqa: B010 - replaces the class's method
