"""``lineage_run``: the START / COMPLETE / FAIL lifecycle around a block of user code."""

from __future__ import annotations

import contextvars
import uuid
from types import TracebackType
from typing import Any, Literal

from openlineage.client.facet_v2 import JobFacet, RunFacet

from airflow_lineage_provider import conf
from airflow_lineage_provider.parent_run import RunLink
from airflow_lineage_provider.producer import client
from airflow_lineage_provider.producer.connectors import Connectors, add_schemas, name_datasets
from airflow_lineage_provider.producer.dataset_facets import facets_from_mapping
from airflow_lineage_provider.producer.dataset_refs import DatasetRef, to_dataset_refs
from airflow_lineage_provider.producer.emit import (
    EventType,
    build_run_event,
    checked_run_id,
    error_message_facet,
    job_namespace,
)
from airflow_lineage_provider.producer.task_facets import package_run_facets
from airflow_lineage_provider.reporting import report_misuse, warn_once
from airflow_lineage_provider.task_context import TaskContext, current_parent, enter_run, leave_run


class LineageRun:
    """One run of a job, as a context manager: START on entry, COMPLETE or FAIL on exit.

    Attributes a block may use:

    * ``run_id`` - the run's UUID string (give it to child processes, e.g. Spark, as their parent);
    * ``job_name``, ``job_namespace``;
    * :meth:`add_input` / :meth:`add_output` - datasets known only while the block runs;
    * :meth:`add_run_facet` - a run facet for the terminal event;
    * ``rows_written`` - set it when the code knows how many rows it wrote: COMPLETE then carries the
      ``airflowLineageProvider_materialization`` facet (with the DAG run's data interval inside Airflow).
    """

    def __init__(
        self,
        job_name: str,
        inputs: Any = None,
        outputs: Any = None,
        run_id: str | uuid.UUID | None = None,
        job_facets: dict[str, Any] | None = None,
        connector: Any = None,
        *,
        run_facets: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(job_name, str) or not job_name.strip():
            report_misuse(ValueError(f"job_name {job_name!r} must be a non-empty string naming the job"))
            job_name = str(job_name or "unnamed_job")
        self.job_name = job_name
        self.run_id = checked_run_id(run_id)
        self.inputs: list[DatasetRef] = to_dataset_refs(inputs, "inputs")
        self.outputs: list[DatasetRef] = to_dataset_refs(outputs, "outputs")
        self.job_facets = facets_from_mapping(job_facets, JobFacet)
        self.run_facets = facets_from_mapping(run_facets, RunFacet)
        self.connectors = Connectors(connector)
        self.job_namespace = ""
        self.parent: RunLink | None = None
        #: ``[lineage_provider] producer``, read once for the block's events.
        self._producer: str | None = None
        #: Rows the block wrote, when the code knows it: set ``run.rows_written = n`` and the COMPLETE
        #: event's materialization facet carries it.
        self.rows_written: int | None = None
        self._token: contextvars.Token[RunLink | None] | None = None
        self._entered = False
        #: The Airflow task the block runs in (``None`` outside a task): looked up once per block, for both events.
        self._task: TaskContext | None = None

    @property
    def link(self) -> RunLink:
        """This run as a parent of nested runs."""
        root = self.parent.root or self.parent if self.parent else None
        return RunLink(self.job_namespace, self.job_name, self.run_id, root)

    def add_input(self, *datasets: Any) -> None:
        """Declare inputs discovered while the block runs; they appear on the terminal event."""
        self.inputs.extend(to_dataset_refs(list(datasets), "inputs"))

    def add_output(self, *datasets: Any) -> None:
        """Declare outputs discovered while the block runs; they appear on the terminal event."""
        self.outputs.extend(to_dataset_refs(list(datasets), "outputs"))

    def add_run_facet(self, key: str, facet: Any) -> None:
        """Attach a run facet (object or dict) to the terminal event."""
        self.run_facets.update(facets_from_mapping({key: facet}, RunFacet))

    def __enter__(self) -> LineageRun:
        if self._entered:
            raise RuntimeError(
                f"lineage_run {self.job_name!r} ({self.run_id}) was already entered; create a new one per run"
            )
        self._entered = True
        self._task = TaskContext.current()  # never raises: None outside a task
        try:
            self._producer = conf.producer()
            self.job_namespace = job_namespace()
            self.parent = current_parent(self._task)
        except Exception as error:
            warn_once(f"Lineage: could not read the job namespace or parent run: {error}")
            self.job_namespace = self.job_namespace or "default"
        self._token = enter_run(self.link)
        self._emit(EventType.START, enrich=False)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self._token is not None:
            leave_run(self._token)
            self._token = None
        if exc is None:
            self._emit(EventType.COMPLETE, enrich=True)
        elif isinstance(exc, Exception):
            self._emit(EventType.FAIL, enrich=True, error=exc)
        else:  # KeyboardInterrupt, SystemExit: the run was stopped rather than failed
            self._emit(EventType.ABORT, enrich=False, error=exc)
        return False  # never swallow: the user's exception propagates unchanged

    def _emit(self, event_type: EventType, *, enrich: bool, error: BaseException | None = None) -> None:
        if not client.will_emit():
            return
        try:
            if self.connectors:  # named and enriched in place: on copies, the block's own stay as declared
                inputs = [ref.copy() for ref in self.inputs]
                outputs = [ref.copy() for ref in self.outputs]
                name_datasets(inputs + outputs, self.connectors)
                if enrich:
                    add_schemas(inputs + outputs, self.connectors)
            else:  # nothing changes them (the event gets datasets and facets of its own)
                inputs, outputs = list(self.inputs), list(self.outputs)
            run_facets = package_run_facets(
                self._task, complete=event_type is EventType.COMPLETE, outputs=outputs, rows_written=self.rows_written
            )
            if event_type is not EventType.START:
                run_facets.update(self.run_facets)
            if error is not None:
                run_facets["errorMessage"] = error_message_facet(error)
            event = build_run_event(
                event_type,
                job_namespace=self.job_namespace,
                job_name=self.job_name,
                run_id=self.run_id,
                inputs=inputs,
                outputs=outputs,
                job_facets=self.job_facets,
                run_facets=run_facets,
                parent=self.parent,
                producer=self._producer,
            )
        except Exception as build_error:
            warn_once(
                f"Lineage: could not build the {event_type.name} event of job {self.job_name!r}: {build_error}",
                exc_info=build_error,
            )
            return
        client.send(event, checked=True)


def lineage_run(
    job_name: str,
    inputs: Any = None,
    outputs: Any = None,
    run_id: str | uuid.UUID | None = None,
    job_facets: dict[str, Any] | None = None,
    connector: Any = None,
    *,
    run_facets: dict[str, Any] | None = None,
) -> LineageRun:
    """Wrap a block of code in an OpenLineage run: START on entry, COMPLETE on success, FAIL on error.

    ``inputs``/``outputs`` mix ``"database/table"`` strings, URIs, dicts (``schema_facet`` /
    ``column_lineage_facet`` results), openlineage ``Dataset`` objects and Airflow ``Asset`` objects.
    ``connector`` names ``"database/table"`` datasets per the OpenLineage naming spec and fills their
    ``schema`` facets from the database on COMPLETE/FAIL (see :mod:`.connectors` for accepted forms).
    ``run_facets`` go on the terminal event; ``job_facets`` on every event.

    The six positional parameters are ForePaaS's own order (``job_name, inputs, outputs, run_id,
    job_facets, connector``), so code written for ForePaaS's ``lineage_run`` runs unchanged; every
    parameter beyond them (``run_facets``) is keyword-only.

    The user's exception propagates unchanged after the FAIL event (which carries an ``errorMessage``
    facet with the stack trace). Lineage problems are logged, never raised - except misuse of the API
    when ``[lineage_provider] strict`` is on, which raises before the block runs.

    Example::

        with lineage_run("load_orders", inputs=["raw/orders"], outputs=["main/orders"],
                         connector={"raw": raw_engine, "main": "postgres_default"}) as run:
            load(run_id=run.run_id)
    """
    return LineageRun(job_name, inputs, outputs, run_id, job_facets, connector, run_facets=run_facets)


__all__ = ["LineageRun", "lineage_run"]
