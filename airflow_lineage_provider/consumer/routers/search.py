"""``GET /api/v1/search``: jobs and datasets by a fragment of their name."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Response

from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.auth import Reader, requires
from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Namespace, Offset, Store, stored_answer
from airflow_lineage_provider.consumer.models import SearchResults
from airflow_lineage_provider.consumer.store import queries
from airflow_lineage_provider.consumer.store.visibility import visible_namespaces

router = APIRouter(tags=["search"], dependencies=[Depends(requires(Access.READ))])


@router.get("/api/v1/search", response_model=SearchResults, summary="Jobs and datasets by name fragment")
async def get_search(
    store: Store,
    principal: Reader,
    q: Annotated[
        str, Query(min_length=1, max_length=1000, pattern=NO_NUL, description="Text the name contains (any case).")
    ],
    filter: Annotated[Literal["job", "dataset"] | None, Query(description="Only jobs or only datasets.")] = None,
    namespace: Namespace = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    def run() -> dict:
        with store.read() as conn:
            visible = visible_namespaces(conn, principal.namespaces)
            items, total = queries.search(conn, q, filter, namespace, limit, offset, visible)
        return {"results": items, "totalCount": total}

    return await stored_answer(run)
