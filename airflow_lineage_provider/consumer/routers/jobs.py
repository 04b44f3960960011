"""``GET /api/v1/jobs``: Marquez's ``JobList`` across namespaces, by namespace and name, paged.

Marquez's parameters (``limit``, ``offset``, ``runState`` — repeatable, also as ``lastRunStates`` as
Marquez's web UI sends it: only jobs whose latest run is in one of those states) and two of the lineage
page's: ``namespace`` (a query parameter here, namespaces usually contain ``/``) and ``name_contains``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from airflow_lineage_provider.consumer.deps import Contains, Limit, Namespace, Offset, Store
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez import jobs as marquez_jobs
from airflow_lineage_provider.consumer.marquez.params import RunStates
from airflow_lineage_provider.consumer.models import Jobs
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["jobs"], dependencies=[Depends(requires(Access.READ))])


@router.get(
    "/api/v1/jobs",
    dependencies=[KnownQuery],
    response_model=Jobs,
    summary="Jobs of every namespace (Marquez's JobList)",
)
async def get_jobs(
    view: View,
    request: Request,
    store: Store,
    states: RunStates,
    namespace: Namespace = None,
    name_contains: Contains = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = marquez_jobs.list_jobs(
                conn,
                limit,
                offset,
                namespace=namespace,
                name_contains=name_contains,
                states=states,
                visible=visible,
                cache=store.job_objects,
                admit=bound.admit,
            )
        return {"jobs": items, "totalCount": total}

    return await bound.answer(run)
