"""``GET /api/v1/jobs``: jobs with their facets, inputs, outputs and latest run, by namespace and name, paged.

The namespace is a query parameter, not a path segment, because namespaces usually contain ``/``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.auth import Reader, requires
from airflow_lineage_provider.consumer.deps import Contains, Limit, Namespace, Offset, Store, stored_answer
from airflow_lineage_provider.consumer.models import Jobs
from airflow_lineage_provider.consumer.store import queries
from airflow_lineage_provider.consumer.store.visibility import visible_namespaces

router = APIRouter(tags=["jobs"], dependencies=[Depends(requires(Access.READ))])


@router.get("/api/v1/jobs", response_model=Jobs, summary="Jobs with their facets, inputs, outputs and latest run")
async def get_jobs(
    store: Store,
    principal: Reader,
    namespace: Namespace = None,
    name_contains: Contains = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    def run() -> dict:
        with store.read() as conn:
            visible = visible_namespaces(conn, principal.namespaces)
            items, total = queries.list_nodes(conn, "job", namespace, limit, offset, name_contains, visible)
        return {"jobs": items, "totalCount": total}

    return await stored_answer(run)
