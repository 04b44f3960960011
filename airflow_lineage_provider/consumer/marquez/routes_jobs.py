"""Marquez's job and run reads: a namespace's jobs, one job, its versions and runs, a run and its facets.

Paths, parameters and shapes are Marquez's (``../shared/spec/marquez/openapi.yml``); namespaces and job
names come percent-encoded in the path (``postgres%3A%2F%2Fdb%3A5432``, see :mod:`.paths`).
Unknown (or, for a namespace-limited key, hidden) namespaces, jobs, versions and runs answer Marquez's 404
(:mod:`.errors`, with Marquez's messages), the namespace checked first as Marquez does. What each object
says, and where it comes from, is in :mod:`.jobs` and :mod:`.runs`; its shape in :mod:`.shapes`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from sqlalchemy import Connection

from airflow_lineage_provider.consumer.deps import Limit, Offset, Store
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez import jobs as marquez_jobs
from airflow_lineage_provider.consumer.marquez import runs as marquez_runs
from airflow_lineage_provider.consumer.marquez.errors import (
    NOT_FOUND,
    bounded_answer,
    job_not_found,
    job_version_not_found,
    marquez_answer,
    namespace_not_found,
    run_not_found,
)
from airflow_lineage_provider.consumer.marquez.params import RunId, RunStates
from airflow_lineage_provider.consumer.marquez.paths import Job, Namespace
from airflow_lineage_provider.consumer.marquez.shapes import Job as JobShape
from airflow_lineage_provider.consumer.marquez.shapes import (
    JobList,
    JobVersion,
    JobVersionList,
    Run,
    RunFacets,
    RunList,
)
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["marquez: jobs and runs"], dependencies=[Depends(requires(Access.READ))])


def job_id(conn: Connection, namespace: str, job: str, visible: Visible) -> int:
    """The job's node id; Marquez's 404 for its namespace, then for itself, when unknown or hidden."""
    found = marquez_jobs.find_job(conn, namespace, job, visible)
    if found is not None:
        return found
    if not queries.namespace_exists(conn, namespace, visible):
        raise namespace_not_found(namespace)
    raise job_not_found(job)


@router.get(
    "/api/v1/namespaces/{namespace}/jobs",
    dependencies=[KnownQuery],
    responses=NOT_FOUND,
    summary="Jobs of a namespace (JobList)",
)
async def list_jobs(
    view: View,
    request: Request,
    store: Store,
    namespace: Namespace,
    states: RunStates,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> JobList:
        with view.read() as (conn, visible):
            if not queries.namespace_exists(conn, namespace, visible):
                raise namespace_not_found(namespace)
            items, total = marquez_jobs.list_jobs(
                conn,
                limit,
                offset,
                namespace=namespace,
                states=states,
                visible=visible,
                cache=store.job_objects,
                admit=bound.admit,
            )
        return JobList(jobs=items, total_count=total)

    return await bounded_answer(bound, run)


@router.get("/api/v1/namespaces/{namespace}/jobs/{job}", responses=NOT_FOUND, summary="One job (Marquez's Job)")
async def get_job(view: View, namespace: Namespace, job: Job) -> Response:
    def run() -> JobShape:
        with view.read() as (conn, visible):
            node = job_id(conn, namespace, job, visible)
            return marquez_jobs.job_objects(conn, [node], visible)[node]

    return await marquez_answer(run)


@router.get(
    "/api/v1/namespaces/{namespace}/jobs/{job}/versions",
    dependencies=[KnownQuery],
    responses=NOT_FOUND,
    summary="Versions of a job",
)
async def list_job_versions(
    view: View,
    request: Request,
    namespace: Namespace,
    job: Job,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> JobVersionList:
        with view.read() as (conn, visible):
            node = job_id(conn, namespace, job, visible)
            items, total = marquez_jobs.list_job_versions(conn, node, limit, offset, visible, admit=bound.admit)
        return JobVersionList(versions=items, total_count=total)

    return await bounded_answer(bound, run)


@router.get(
    "/api/v1/namespaces/{namespace}/jobs/{job}/versions/{version}",
    responses=NOT_FOUND,
    summary="One version of a job (Marquez's JobVersion)",
)
async def get_job_version(
    view: View,
    namespace: Namespace,
    job: Job,
    version: Annotated[str, Path(max_length=100, description="The version's UUID.")],
) -> Response:
    def run() -> JobVersion:
        with view.read() as (conn, visible):
            found = marquez_jobs.find_job_version(conn, job_id(conn, namespace, job, visible), version, visible)
        if found is None:
            raise job_version_not_found(version)
        return found

    return await marquez_answer(run)


@router.get(
    "/api/v1/namespaces/{namespace}/jobs/{job}/runs",
    dependencies=[KnownQuery],
    responses=NOT_FOUND,
    summary="Runs of a job, newest first",
)
async def list_job_runs(
    view: View,
    request: Request,
    namespace: Namespace,
    job: Job,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> RunList:
        with view.read() as (conn, visible):
            node = job_id(conn, namespace, job, visible)
            items, total = marquez_jobs.list_job_runs(conn, node, limit, offset, visible, admit=bound.admit)
        return RunList(runs=items, total_count=total)

    return await bounded_answer(bound, run)


@router.get("/api/v1/jobs/runs/{id}", responses=NOT_FOUND, summary="One run (Marquez's Run)")
async def get_run(view: View, run_id: RunId) -> Response:
    def run() -> Run:
        with view.read() as (conn, visible):
            row = marquez_runs.find_run(conn, run_id, visible)
            if row is None:
                raise run_not_found(run_id)
            return marquez_runs.run_objects(conn, [row], visible)[0]

    return await marquez_answer(run)


@router.get("/api/v1/jobs/runs/{id}/facets", responses=NOT_FOUND, summary="A run's run or job facets")
async def get_run_facets(
    view: View,
    run_id: RunId,
    kind: Annotated[Literal["run", "job"], Query(alias="type", description="The run's or its job's facets.")],
) -> Response:
    def run() -> RunFacets:
        with view.read() as (conn, visible):
            row = marquez_runs.find_run(conn, run_id, visible)
            if row is None:
                raise run_not_found(run_id)
            return marquez_runs.run_facets(conn, row.run_uuid, kind, visible)

    return await marquez_answer(run)
