"""Task events emitted by the task itself when the stock OpenLineage listener is not active.

With the listener active it emits the task's START/COMPLETE/FAIL (reading the mixin's
``get_openlineage_facets_*``) and nothing here runs. When OpenLineage is not configured for Airflow at all,
a ``LineageMixin`` task emits those events itself around ``execute``, through the package's own client
resolution (openlineage-python's standard configuration), with the very run ids the listener would have
used — job ``dag_id.task_id``, run id from namespace, dag_id, task_id, try number, logical date and map
index, parent the DAG run — so turning the listener on later changes nothing downstream. With
``[openlineage] disabled`` nothing is emitted either way.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

from openlineage.client.event_v2 import Job, Run, RunEvent
from openlineage.client.event_v2 import RunState as EventType
from openlineage.client.facet_v2 import error_message_run

from airflow_lineage_provider import conf
from airflow_lineage_provider.producer import client
from airflow_lineage_provider.producer.emit import event_time_iso, job_namespace, job_type_facet
from airflow_lineage_provider.producer.parent import RunLink, task_run_link
from airflow_lineage_provider.reporting import warn_once

_WRAPPED = "_lineage_self_emission"


def listener_will_emit() -> bool:
    """The stock listener emits this task's events (OpenLineage configured for Airflow and enabled)."""
    return client.airflow_openlineage_active()


def should_self_emit() -> bool:
    try:
        return not client.openlineage_disabled() and not listener_will_emit()
    except Exception as error:
        warn_once(f"Lineage: could not tell whether the OpenLineage listener is active ({error}); not emitting.")
        return False


class TaskEvents:
    """Builds and sends one task try's START and terminal events, as the listener would name them."""

    def __init__(self, operator: Any, task_instance: Any) -> None:
        self.operator = operator
        self.task_instance = task_instance
        link = task_run_link(task_instance)
        dag_run = link.root or link
        self.task_run = link
        self.parent = RunLink(dag_run.namespace, dag_run.name, dag_run.run_id)

    def _send(self, event_type: EventType, lineage: Any, error: BaseException | None = None) -> None:
        run_facets = dict(getattr(lineage, "run_facets", None) or {})
        producer = conf.producer()
        run_facets["parent"] = self.parent.parent_facet(producer)
        if error is not None:
            run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=f"{type(error).__name__}: {error}",
                programmingLanguage="python",
                stackTrace="".join(traceback.format_exception(type(error), error, error.__traceback__)),
                producer=producer,
            )
        job_facets = {"jobType": job_type_facet(True), **dict(getattr(lineage, "job_facets", None) or {})}
        event = RunEvent(
            eventType=event_type,
            eventTime=event_time_iso(None),
            run=Run(runId=self.task_run.run_id, facets=run_facets),
            job=Job(namespace=job_namespace(), name=self.task_run.name, facets=job_facets),
            inputs=list(getattr(lineage, "inputs", None) or []),
            outputs=list(getattr(lineage, "outputs", None) or []),
            producer=producer,
        )
        client.send(event)

    def start(self) -> None:
        self._guarded(EventType.START, lambda: self.operator.get_openlineage_facets_on_start())

    def complete(self) -> None:
        self._guarded(EventType.COMPLETE, lambda: self.operator.get_openlineage_facets_on_complete(self.task_instance))

    def fail(self, error: BaseException) -> None:
        self._guarded(
            EventType.FAIL, lambda: self.operator.get_openlineage_facets_on_failure(self.task_instance), error
        )

    def _guarded(self, event_type: EventType, lineage: Callable[[], Any], error: BaseException | None = None) -> None:
        try:
            self._send(event_type, lineage(), error)
        except Exception as failure:
            warn_once(f"Lineage: the {event_type.name} event of task {self.operator.task_id!r} was not sent: {failure}")


def _is_skip(error: BaseException) -> bool:
    return any(cls.__name__ in ("AirflowSkipException", "TaskDeferred") for cls in type(error).__mro__)


def wrap_execute(cls: type) -> None:
    """Make ``cls.execute`` emit the task's events itself when the listener will not (idempotent)."""
    execute = getattr(cls, "execute", None)
    if execute is None or getattr(execute, _WRAPPED, False):
        return

    @functools.wraps(execute)
    def execute_with_task_events(self: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_lineage_emitting") or not should_self_emit():
            return execute(self, context, *args, **kwargs)
        try:
            events: TaskEvents | None = TaskEvents(self, context["task_instance"])
        except Exception as error:
            warn_once(f"Lineage: task {self.task_id!r} cannot emit its own events ({error}); running without.")
            events = None
        if events is None:
            return execute(self, context, *args, **kwargs)
        self.__dict__["_lineage_emitting"] = True
        events.start()
        try:
            result = execute(self, context, *args, **kwargs)
        except BaseException as error:
            if _is_skip(error):
                events.complete()
            else:
                events.fail(error)
            raise
        finally:
            self.__dict__.pop("_lineage_emitting", None)
        events.complete()
        return result

    setattr(execute_with_task_events, _WRAPPED, True)
    cls.execute = execute_with_task_events
