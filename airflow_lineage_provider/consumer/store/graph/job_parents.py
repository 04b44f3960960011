"""The job that contains a job: a ``lineage_run`` inside an Airflow task, a task inside its DAG run.

A run names its parent run in its ``parent`` facet (the stock provider points a task's run at its DAG run,
``lineage_run`` points its run at the task's). A graph answer tells, for each job node shown whose latest run
has a parent, the parent run's job as ``data.parentJob`` (``{"namespace", "name"}``): the stored parent run's
job, or, when that run is not stored, the job the ``parent`` facet names. A job whose latest run is an Airflow
task's (its ``airflow`` run facet names a task, as the stock provider writes it) also gets ``data.airflowTask``
(``{"dagId", "taskId", "runId", "mapIndex"}``, what Airflow's UI addresses a task instance by), and so does a
``parentJob`` whose stored run is one — the page links there (docs/ui.md#tasks-and-their-jobs).

One statement per answer (on SQLite, per :data:`SQLITE_IDS` job nodes), for its job nodes, reading only those
whose latest run has a parent (a job without one costs an index probe, an answer without job nodes nothing). A
key limited to namespaces (:mod:`.visibility`) is not told a parent in a namespace it cannot see. Cards are
shared between answers and never changed: a node with a parent gets a copy of its data.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Connection, any_, bindparam, case, func, null, or_, select, union_all
from sqlalchemy.dialects import postgresql

from airflow_lineage_provider.consumer.store.graph.subgraph import JobData
from airflow_lineage_provider.consumer.store.read.json_paths import json_member, member_value
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store.schema import tables


class AirflowTask(msgspec.Struct, omit_defaults=True):
    """An Airflow task instance as Airflow's UI addresses it; ``runId`` and ``mapIndex`` left out when unknown
    (``mapIndex``: only for a mapped task's instance)."""

    dagId: str
    taskId: str
    runId: str | None = None
    mapIndex: int | None = None


class ParentJob(msgspec.Struct, omit_defaults=True):
    """The job whose run contains a job's latest run; ``airflowTask`` when that run is an Airflow task's."""

    namespace: str
    name: str
    airflowTask: AirflowTask | None = None


class Containment(msgspec.Struct, omit_defaults=True):
    """What :func:`containment` found of one job: the job containing it, and the Airflow task it is."""

    parentJob: ParentJob | None = None
    airflowTask: AirflowTask | None = None


#: Ids per statement on SQLite, where each is a parameter: within SQLite's smallest default limit since 3.32.
SQLITE_IDS = 32_000


def _ids(column: Any, dialect: str) -> Any:
    """``column`` is one of the parameter ``ids``: an array on PostgreSQL, a list of parameters on SQLite (not
    ``json_each``, which reads JSON: an answer for an unlimited key reads none, see :mod:`.visibility`)."""
    if dialect == "postgresql":
        return column == any_(bindparam("ids", type_=postgresql.ARRAY(BigInteger)))
    return column.in_(bindparam("ids", expanding=True))


def _airflow_facet(facets: Any, dialect: str) -> Any:
    """SQL: the ``airflow`` facet of the JSON text ``facets``, as JSON text; the text is parsed only when it has
    the key (``"airflow":``, compact or not): a run outside Airflow, or a ``lineage_run``'s, costs a search."""
    search = func.strpos if dialect == "postgresql" else func.instr
    keyed = or_(search(facets, '"airflow":') > 0, search(facets, '"airflow" :') > 0)
    return case((keyed, json_member(facets, ("airflow",), dialect)), else_=null())


@cache
def _statement(dialect: str) -> Any:
    """Rows ``(job id, parent run id, the stored parent run's job namespace and name, the parent facet's job when
    that run is not stored, the latest run's airflow facet)`` of the jobs ``ids`` whose latest run has a parent
    run, then ``(NULL, parent run id, NULL, NULL, NULL, its airflow facet)`` once per stored parent run: a task's
    facets are parsed once, however many jobs it contains."""
    j = tables.jobs.c
    latest, parent, container = tables.runs.alias("latest_run"), tables.runs.alias("parent_run"), tables.nodes
    named = case((container.c.id.is_(None), json_member(latest.c.facets, ("parent", "job"), dialect)), else_=null())
    children = (
        select(
            j.node_id,
            latest.c.parent_run_uuid.label("parent_run"),
            container.c.namespace,
            container.c.name,
            named.label("named"),
            _airflow_facet(latest.c.facets, dialect).label("airflow"),
        )
        .join_from(tables.jobs, latest, latest.c.run_uuid == j.latest_run_uuid)
        .outerjoin(parent, parent.c.run_uuid == latest.c.parent_run_uuid)
        .outerjoin(container, container.c.id == parent.c.job_id)
        .where(_ids(j.node_id, dialect), latest.c.parent_run_uuid.is_not(None))
        .cte("contained")
    )
    task = tables.runs.alias("task_run")
    tasks = select(null(), task.c.run_uuid, null(), null(), null(), _airflow_facet(task.c.facets, dialect)).where(
        task.c.run_uuid.in_(select(children.c.parent_run).distinct())
    )
    return union_all(select(children), tasks)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _member(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _task(facet: Any) -> AirflowTask | None:
    """The task instance an ``airflow`` run facet (JSON text) names, if it names one (a DAG run's names none)."""
    airflow = member_value(facet)
    dag_id, task_id = (
        _text(_member(_member(airflow, "dag"), "dag_id")),
        _text(_member(_member(airflow, "task"), "task_id")),
    )
    if dag_id is None or task_id is None:
        return None
    run_id = _text(_member(_member(airflow, "dagRun"), "run_id"))
    map_index = _member(_member(airflow, "taskInstance"), "map_index")
    mapped = map_index if isinstance(map_index, int) and not isinstance(map_index, bool) and map_index >= 0 else None
    return AirflowTask(dag_id, task_id, run_id, mapped)


def containment(conn: Connection, jobs: list[int], visible: Visible) -> dict[int, Containment]:
    """``job id → what contains it`` for the ``jobs`` (node ids) whose latest run has a parent run; a parent in a
    namespace not ``visible`` (None: every one) is left out."""
    if not jobs:
        return {}
    dialect = conn.dialect.name
    step = len(jobs) if dialect == "postgresql" else SQLITE_IDS
    rows = [
        row
        for at in range(0, len(jobs), step)
        for row in conn.execute(_statement(dialect), {"ids": jobs[at : at + step]})
    ]
    tasks = {row[1]: _task(row[5]) for row in rows if row[0] is None}
    found: dict[int, Containment] = {}
    seen = None if visible is None else frozenset(visible)
    for node, parent_run, stored_namespace, stored_name, facet_job, own_facet in rows:
        if node is None:
            continue
        own = _task(own_facet)
        if stored_name is not None:
            namespace, name = stored_namespace, stored_name
        else:
            job = member_value(facet_job)
            namespace, name = _text(_member(job, "namespace")), _text(_member(job, "name"))
        parent = None
        if namespace is not None and name is not None and (seen is None or namespace in seen):
            parent = ParentJob(namespace, name, tasks.get(parent_run))
        if parent is not None or own is not None:
            found[node] = Containment(parent, own)
    return found


class ContainedJobData(JobData, omit_defaults=True, gc=False):
    """A job node's data with what :func:`containment` found of it (encoded as fast as the card's own)."""

    parentJob: ParentJob | None = None
    airflowTask: AirflowTask | None = None


def with_containment(data: Any, contained: Containment) -> Any:
    """A job node's ``data`` (a card's, never changed: cards are shared) with ``parentJob`` and ``airflowTask``."""
    if isinstance(data, JobData):
        fields = {name: getattr(data, name) for name in data.__struct_fields__}
        return ContainedJobData(**fields, parentJob=contained.parentJob, airflowTask=contained.airflowTask)
    shown = dict(msgspec.structs.asdict(data) if isinstance(data, msgspec.Struct) else data)
    if contained.parentJob is not None:
        shown["parentJob"] = contained.parentJob
    if contained.airflowTask is not None:
        shown["airflowTask"] = contained.airflowTask
    return shown
