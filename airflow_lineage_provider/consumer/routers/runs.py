"""``GET /api/v1/runs``: the runs of a job, and one run with the datasets it read and wrote.

A namespace-limited key gets 404 for a hidden job's runs, exactly as for a missing job, and a run's
inputs and outputs in visible namespaces only.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response, status

from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Offset, stored_answer
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.models import Problem, Runs
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.graph import nodes
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["runs"], dependencies=[Depends(requires(Access.READ))])

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
RunId = Annotated[str, Path(pattern=UUID_PATTERN, description="The run's UUID.")]


@router.get(
    "/api/v1/runs",
    dependencies=[KnownQuery],
    response_model=Runs,
    responses={404: {"model": Problem}},
    summary="Runs of a job",
)
async def get_runs(
    view: View,
    request: Request,
    job_namespace: Annotated[str, Query(alias="jobNamespace", max_length=5000, pattern=NO_NUL)],
    job_name: Annotated[str, Query(alias="jobName", max_length=5000, pattern=NO_NUL)],
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> dict:
        with view.read() as (conn, visible):
            job = nodes.find_node(conn, "job", f"{job_namespace}:{job_name}", visible)
            if job is None or (job[1], job[2]) != (job_namespace, job_name):
                raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_namespace!r} / {job_name!r}")
            items, total = queries.list_runs(conn, job[0], limit, offset, visible, admit=bound.admit)
        return {"runs": items, "totalCount": total}

    return await bound.answer(run)


@router.get("/api/v1/runs/{run_id}", responses={404: {"model": Problem}}, summary="One run with inputs and outputs")
async def get_run(view: View, run_id: RunId) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            found = queries.get_run(conn, run_id, visible)
        if found is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no run {run_id}")
        return found

    return await stored_answer(run)
