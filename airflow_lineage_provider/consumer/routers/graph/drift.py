"""``GET /api/v1/drift``: per job, where declared lineage (JobEvents) and observed lineage (runs) differ.

Parameters: ``days`` (the window, default 30), ``namespace`` (only jobs of that namespace), ``limit`` and
``offset`` (a page of jobs in namespace, name order). Each listed job was declared by a JobEvent and has drift:
``declaredNotObserved`` (declared edges no run observed in the window) and ``observedNotDeclared`` (edges
runs observed in the window that no JobEvent declared), each ``{"direction", "namespace", "name",
"declaredAt", "lastObservedAt"}``. ``totalCount`` counts the jobs with drift. A key limited to namespace
patterns sees only jobs in its namespaces and their edges to datasets it can see. See docs/declared-lineage.md.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from airflow_lineage_provider.consumer.deps import Namespace, Offset, stored_answer
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.models import Drift, Problem
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read.drift import DriftPage, drift
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["lineage"], dependencies=[Depends(requires(Access.READ))])

Days = Annotated[
    int, Query(ge=1, le=36_500, description="The window: observed means observed by a run in the last N days.")
]
Limit = Annotated[int, Query(ge=1, le=1000, description="Jobs per page (at most 1,000).")]


@router.get(
    "/api/v1/drift",
    dependencies=[KnownQuery],
    response_model=Drift,
    responses={400: {"model": Problem}},
    summary="Per declared job: declared edges not observed in the last N days, observed edges never declared",
)
async def get_drift(
    view: View,
    days: Days = 30,
    namespace: Namespace = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    def run() -> DriftPage:
        with view.read() as (conn, visible):
            return drift(conn, days, limit, offset, namespace=namespace, visible=visible)

    return await stored_answer(run)
