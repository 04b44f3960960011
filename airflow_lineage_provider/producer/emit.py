"""``emit_lineage``: one OpenLineage run event, built with openlineage-python's ``event_v2`` classes."""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from openlineage.client.event_v2 import Dataset, InputDataset, Job, OutputDataset, Run, RunEvent
from openlineage.client.event_v2 import RunState as EventType
from openlineage.client.facet_v2 import DatasetFacet, JobFacet, RunFacet, error_message_run, job_type_job
from openlineage.client.uuid import generate_new_uuid

from airflow_lineage_provider import conf
from airflow_lineage_provider.parent_run import RunLink
from airflow_lineage_provider.producer import client
from airflow_lineage_provider.producer.dataset_facets import facets_from_mapping
from airflow_lineage_provider.producer.dataset_refs import DatasetRef, to_dataset_refs
from airflow_lineage_provider.reporting import report_misuse, warn_once
from airflow_lineage_provider.task_context import TaskContext, current_parent

EVENT_TYPES = ", ".join(t.name for t in EventType)


def parse_event_type(value: Any) -> EventType:
    """An ``EventType`` from itself or its name (case-insensitive). Raises ``ValueError`` naming the value."""
    if isinstance(value, EventType):
        return value
    if isinstance(value, str) and value.strip().upper() in EventType.__members__:
        return EventType[value.strip().upper()]
    raise ValueError(f"event type {value!r} is not one of {EVENT_TYPES}; pass an EventType or its name")


def parse_run_id(value: Any) -> str:
    """A canonical UUID string from a UUID or a UUID string. Raises ``ValueError`` naming the value."""
    if isinstance(value, uuid.UUID):
        return str(value)
    try:
        return str(uuid.UUID(str(value)))
    except (ValueError, TypeError, AttributeError):
        raise ValueError(
            f"run_id {value!r} is not a UUID; pass a UUID string such as "
            f"{generate_new_uuid()!s} or leave it out to have one generated"
        ) from None


def checked_run_id(value: Any) -> str:
    """``value`` as a UUID string, or a new UUIDv7 when it is missing or (non-strict) invalid."""
    if value is None:
        return str(generate_new_uuid())
    try:
        return parse_run_id(value)
    except ValueError as error:
        report_misuse(error)
        return str(generate_new_uuid())


def event_time_iso(value: datetime | str | None) -> str:
    """ISO-8601 event time with a zone; naive datetimes are taken as UTC."""
    if value is None:
        return datetime.now(timezone.utc).isoformat()
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    return str(value)


def job_type_facet(in_airflow: bool) -> job_type_job.JobTypeJobFacet:
    """The ``jobType`` facet of this package's jobs: one object per integration and producer, shared by every
    event (building it ran four validators, about a tenth of a ``lineage_run`` block's own work). Nothing
    changes it: the only code that rewrites facets in place, the stock provider's redactor, is given a copy
    (:func:`~.client._send_through_listener`)."""
    return _job_type_facet(in_airflow, conf.producer())


@lru_cache(maxsize=16)
def _job_type_facet(in_airflow: bool, producer: str) -> job_type_job.JobTypeJobFacet:
    return job_type_job.JobTypeJobFacet(
        processingType="BATCH",
        integration="AIRFLOW" if in_airflow else "PYTHON",
        jobType="TASK",
        producer=producer,
    )


def build_run_event(
    event_type: EventType,
    *,
    job_namespace: str,
    job_name: str,
    run_id: str,
    inputs: Sequence[DatasetRef | Dataset],
    outputs: Sequence[DatasetRef | Dataset],
    job_facets: Mapping[str, Any] | None = None,
    run_facets: Mapping[str, Any] | None = None,
    parent: RunLink | None = None,
    event_time: datetime | str | None = None,
    producer: str | None = None,
) -> RunEvent:
    """A ``RunEvent`` from normalised parts. Facet dicts become openlineage facet objects; datasets are
    :class:`DatasetRef` or openlineage ``Dataset`` objects (e.g. an ``OperatorLineage``'s). ``producer``: the
    ``[lineage_provider] producer`` read by the caller for this event (read here when not given)."""
    producer = producer or conf.producer()
    run_facet_objects: dict[str, RunFacet] = facets_from_mapping(run_facets, RunFacet)
    if parent is not None and "parent" not in run_facet_objects:
        run_facet_objects["parent"] = parent.parent_facet(producer)
    job_facet_objects: dict[str, JobFacet] = {"jobType": _job_type_facet(parent is not None, producer)}
    job_facet_objects.update(facets_from_mapping(job_facets, JobFacet))
    job = Job(namespace=job_namespace, name=job_name, facets=job_facet_objects)
    return RunEvent(
        eventType=event_type,
        eventTime=event_time_iso(event_time),
        run=Run(runId=run_id, facets=run_facet_objects),
        job=job,
        inputs=input_datasets(inputs),
        outputs=output_datasets(outputs),
        producer=producer,
    )


def error_message_facet(error: BaseException) -> error_message_run.ErrorMessageRunFacet:
    """The ``errorMessage`` facet of a run that ended with ``error``: its type and message, and the stack trace."""
    return error_message_run.ErrorMessageRunFacet(
        message=f"{type(error).__name__}: {error}",
        programmingLanguage="python",
        stackTrace="".join(traceback.format_exception(type(error), error, error.__traceback__)),
        producer=conf.producer(),
    )


def input_datasets(refs: Sequence[DatasetRef | Dataset]) -> list[InputDataset]:
    """``InputDataset`` objects for normalised datasets (facet dicts converted to facet objects) and openlineage
    datasets (an ``InputDataset`` is kept as it is)."""
    return [
        r
        if isinstance(r, InputDataset)
        else InputDataset(r.namespace, r.name, facets=facets_from_mapping(r.facets, DatasetFacet))
        for r in refs
    ]


def output_datasets(refs: Sequence[DatasetRef | Dataset]) -> list[OutputDataset]:
    """``OutputDataset`` objects for normalised datasets (facet dicts converted to facet objects) and openlineage
    datasets (an ``OutputDataset`` is kept as it is)."""
    return [
        r
        if isinstance(r, OutputDataset)
        else OutputDataset(r.namespace, r.name, facets=facets_from_mapping(r.facets, DatasetFacet))
        for r in refs
    ]


_stock_namespace: Any = None


def job_namespace() -> str:
    """Namespace of jobs this package emits: the stock provider's ``[openlineage] namespace``."""
    global _stock_namespace
    if _stock_namespace is None:  # imported once: an import statement costs a microsecond per block
        from airflow.providers.openlineage.conf import namespace

        _stock_namespace = namespace
    return str(_stock_namespace())


def emit_lineage(
    event_type: EventType | str,
    job_name: str,
    run_id: str | uuid.UUID | None = None,
    inputs: Any = None,
    outputs: Any = None,
    job_facets: dict[str, Any] | None = None,
    run_facets: dict[str, Any] | None = None,
    event_time: datetime | str | None = None,
) -> str | None:
    """Emit one OpenLineage run event and return its run id (``None`` when the event was skipped).

    ``event_type`` is an :class:`EventType` (START, RUNNING, COMPLETE, ABORT, FAIL, OTHER) or its name.
    ``inputs``/``outputs`` take any dataset form ``lineage_run`` takes; facets are openlineage facet
    objects or dicts. Inside a running Airflow task (or a ``lineage_run`` block) the event carries a
    ``parent`` facet. Never raises for emission problems; misuse raises only in strict mode.

    Example::

        emit_lineage("COMPLETE", "nightly_export", inputs=["main/orders"], outputs=["s3://exports/orders.csv"])
    """
    if not isinstance(job_name, str) or not job_name.strip():
        report_misuse(ValueError(f"job_name {job_name!r} must be a non-empty string naming the job"))
        return None
    try:
        parsed_type = parse_event_type(event_type)
    except ValueError as error:
        report_misuse(error)
        return None
    run_id_str = checked_run_id(run_id)
    input_refs = to_dataset_refs(inputs, "inputs")
    output_refs = to_dataset_refs(outputs, "outputs")
    if not client.will_emit():
        return run_id_str
    try:
        event = build_run_event(
            parsed_type,
            job_namespace=job_namespace(),
            job_name=job_name,
            run_id=run_id_str,
            inputs=input_refs,
            outputs=output_refs,
            job_facets=job_facets,
            run_facets=run_facets,
            parent=current_parent(TaskContext.current()),
            event_time=event_time,
        )
    except Exception as error:
        warn_once(f"Lineage: could not build the {parsed_type.name} event of job {job_name!r}: {error}", exc_info=error)
        return run_id_str
    client.send(event)
    return run_id_str


__all__ = ["EventType", "emit_lineage"]
