"""The ``JobEvent``s of one serialized DAG: one for the DAG's own job, one per task.

Jobs are named and described as the stock OpenLineage listener names and describes them when the DAG runs,
so that declared and observed lineage meet on the same job: ``<dag_id>.<task_id>`` (and ``<dag_id>`` for
the DAG) in ``[openlineage] namespace``; ``jobType`` BATCH/AIRFLOW/TASK (DAG); ``documentation`` from the
task's docs, else the DAG's; ``ownership`` from the task's owner, else the DAG's; the DAG's ``tags``.
Added at design time: ``sourceCodeLocation`` (the DAG file), this package's Egeria job facet and its
``airflowLineageProvider_declaredLineage`` facet. Tasks and DAGs the stock provider's emission policy keeps
out of OpenLineage are left out here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, JobEvent
from openlineage.client.facet_v2 import (
    JobFacet,
    documentation_job,
    job_type_job,
    ownership_job,
    source_code_location_job,
    tags_job,
)

from airflow_lineage_provider import conf
from airflow_lineage_provider.design.egeria_settings import supply_chain_job_facets
from airflow_lineage_provider.design.serialized_dags import DagVersionRow
from airflow_lineage_provider.design.task_lineage import (
    ConnectorCache,
    TaskLineage,
    as_datasets,
    asset_refs,
    task_lineage,
)
from airflow_lineage_provider.facets.design_time import DECLARED_LINEAGE_KEY, DeclaredLineageJobFacet
from airflow_lineage_provider.producer.emit import job_namespace
from airflow_lineage_provider.reporting import warn_once


def _task_attribute(task: Any, name: str) -> Any:
    """An operator attribute; a mapped task's from its partial arguments."""
    partial_kwargs = getattr(task, "partial_kwargs", None) or {}
    try:
        value = getattr(task, name)
    except AttributeError:
        value = None
    return value if value is not None else partial_kwargs.get(name)


def _task_documentation(task: Any) -> tuple[str | None, str | None]:
    """The stock provider's task documentation (the same text, type and truncation as the listener's)."""
    from types import SimpleNamespace

    from airflow.providers.openlineage.utils.utils import get_task_documentation

    names = ("doc", "doc_md", "doc_json", "doc_yaml", "doc_rst")
    documented = SimpleNamespace(**{name: _task_attribute(task, name) for name in names})
    return get_task_documentation(documented)  # type: ignore[arg-type]  # it reads only these five attributes


def task_job_name(dag_id: str, task_id: str) -> str:
    """The job name of a task, as the stock listener names it (``get_job_name``)."""
    return f"{dag_id}.{task_id}"


def _owners(owner: str | None) -> list[str]:
    return sorted({name.strip() for name in (owner or "").split(",") if name.strip()})


def _common_facets(
    job_type: str, documentation: tuple[str | None, str | None], owners: list[str], dag: Any, row: DagVersionRow
) -> dict[str, JobFacet]:
    producer = conf.producer()
    facets: dict[str, JobFacet] = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="AIRFLOW", jobType=job_type, producer=producer
        )
    }
    doc, content_type = documentation
    if doc:
        facets["documentation"] = documentation_job.DocumentationJobFacet(
            description=doc, contentType=content_type, producer=producer
        )
    if owners:
        facets["ownership"] = ownership_job.OwnershipJobFacet(
            owners=[ownership_job.Owner(name=owner) for owner in owners], producer=producer
        )
    tags = sorted(getattr(dag, "tags", None) or [])
    if tags:
        facets["tags"] = tags_job.TagsJobFacet(
            tags=[tags_job.TagsJobFacetFields(key=tag, value=tag, source="AIRFLOW") for tag in tags],
            producer=producer,
        )
    fileloc = row.fileloc or getattr(dag, "fileloc", None)
    if fileloc:
        facets["sourceCodeLocation"] = source_code_location_job.SourceCodeLocationJobFacet(
            type="file",
            url=Path(fileloc).as_uri() if Path(fileloc).is_absolute() else f"file:{fileloc}",
            path=row.relative_fileloc or getattr(dag, "relative_fileloc", None),
            version=row.bundle_version,
            producer=producer,
        )
    return facets


def _emits(task: Any | None, dag: Any) -> bool:
    """Whether the stock listener would emit events for this task (or, ``task=None``, for the DAG's runs)."""
    try:
        from airflow.providers.openlineage.utils.emission_policy import (
            resolve_dag_emission_policy,
            resolve_task_emission_policy,
        )
    except ImportError:  # an older provider without emission policies
        return True
    if task is None:
        return bool(resolve_dag_emission_policy(dag.dag_id, dag=dag).emit)
    return bool(resolve_task_emission_policy(task, dag.dag_id, task.task_id).emit)


def _event(
    name: str, facets: dict[str, JobFacet], inputs: Iterable[Any], outputs: Iterable[Any], event_time: str
) -> JobEvent:
    return JobEvent(
        eventTime=event_time,
        producer=conf.producer(),
        job=Job(namespace=job_namespace(), name=name, facets=facets),
        inputs=list(inputs),
        outputs=list(outputs),
    )


def _task_event(task: Any, dag: Any, row: DagVersionRow, cache: ConnectorCache, event_time: str) -> JobEvent:
    from airflow.providers.openlineage.utils.utils import get_dag_documentation

    try:
        lineage = task_lineage(task, cache)
    except Exception as error:  # one task that cannot be read never stops the DAG's publication
        warn_once(f"Lineage: the declared lineage of task {task.task_id!r} in DAG {dag.dag_id!r} failed: {error}")
        lineage = TaskLineage(incomplete=[f"declared lineage could not be read: {error}"])
    documentation = _task_documentation(task)
    if not documentation[0]:
        documentation = get_dag_documentation(dag)
    owner = _task_attribute(task, "owner")
    owner = owner if owner and owner != "airflow" else dag.owner
    facets = _common_facets("TASK", documentation, _owners(owner), dag, row)
    facets.update(lineage.job_facets)
    facets.update(supply_chain_job_facets(dag, task))
    facets[DECLARED_LINEAGE_KEY] = DeclaredLineageJobFacet(
        dagId=dag.dag_id,
        taskId=task.task_id,
        dagHash=row.dag_hash,
        incomplete=lineage.incomplete or None,
        producer=conf.producer(),
    )
    return _event(task_job_name(dag.dag_id, task.task_id), facets, lineage.inputs, lineage.outputs, event_time)


def _scheduled_on(dag: Any) -> tuple[list[InputDataset], list[str]]:
    """The Assets the DAG is scheduled on, as inputs of the DAG's job."""
    condition = getattr(getattr(dag, "timetable", None), "asset_condition", None)
    if condition is None:
        return [], []
    assets = [asset for _key, asset in condition.iter_assets()]
    refs, _ = asset_refs(assets)
    unresolved = [
        f"schedule: asset alias {name} is resolved only at run time" for name, _ in condition.iter_asset_aliases()
    ]
    for ref in condition.iter_asset_refs():
        kind = type(ref).__name__.removeprefix("Serialized")
        unresolved.append(
            f"schedule: {kind} {getattr(ref, 'name', None) or getattr(ref, 'uri', '')} is resolved only at run time"
        )
    return as_datasets(refs, InputDataset), unresolved


def dag_job_events(
    dag: Any, row: DagVersionRow, cache: ConnectorCache | None = None, event_time: datetime | None = None
) -> list[JobEvent]:
    """The ``JobEvent``s of one serialized DAG: the DAG's job first, then each task's job in task-id order.

    Empty when the stock provider's emission policy keeps the DAG out of OpenLineage; tasks it keeps out
    are left out.
    """
    from airflow.providers.openlineage.utils.utils import get_dag_documentation

    if not _emits(None, dag):
        return []
    cache = cache or ConnectorCache()
    time = (event_time or datetime.now(timezone.utc)).isoformat()
    inputs, unresolved = _scheduled_on(dag)
    facets = _common_facets("DAG", get_dag_documentation(dag), _owners(dag.owner), dag, row)
    facets.update(supply_chain_job_facets(dag))
    facets[DECLARED_LINEAGE_KEY] = DeclaredLineageJobFacet(
        dagId=dag.dag_id, dagHash=row.dag_hash, incomplete=unresolved or None, producer=conf.producer()
    )
    events = [_event(dag.dag_id, facets, inputs, [], time)]
    for task in sorted(dag.tasks, key=lambda t: t.task_id):
        if _emits(task, dag):
            events.append(_task_event(task, dag, row, cache, time))
    return events


def retirement_events(
    dag_id: str, task_ids: Iterable[str], *, dag_retired: bool, event_time: datetime | None = None
) -> list[JobEvent]:
    """``JobEvent``s declaring nothing for jobs that are gone: the tasks ``task_ids`` of ``dag_id`` and, with
    ``dag_retired``, the DAG's own job. They replace what was declared before, so a deleted task does not stay
    declared forever."""
    time = (event_time or datetime.now(timezone.utc)).isoformat()
    producer = conf.producer()

    def retired(name: str, task_id: str | None) -> JobEvent:
        facet = DeclaredLineageJobFacet(dagId=dag_id, taskId=task_id, retired=True, producer=producer)
        return _event(name, {DECLARED_LINEAGE_KEY: facet}, [], [], time)

    events = [retired(dag_id, None)] if dag_retired else []
    events += [retired(task_job_name(dag_id, task_id), task_id) for task_id in sorted(task_ids)]
    return events
