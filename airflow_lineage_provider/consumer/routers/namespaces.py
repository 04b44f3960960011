"""``GET /api/v1/namespaces``: the namespaces of jobs and datasets (a namespace-limited key: the visible ones)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.auth import Reader, requires
from airflow_lineage_provider.consumer.deps import Limit, Offset, Store, stored_answer
from airflow_lineage_provider.consumer.models import Namespaces
from airflow_lineage_provider.consumer.store import queries
from airflow_lineage_provider.consumer.store.visibility import visible_namespaces

router = APIRouter(tags=["namespaces"], dependencies=[Depends(requires(Access.READ))])


@router.get("/api/v1/namespaces", response_model=Namespaces, summary="Namespaces of jobs and datasets")
async def get_namespaces(store: Store, principal: Reader, limit: Limit = 100, offset: Offset = 0) -> Response:
    def run() -> dict:
        with store.read() as conn:
            visible = visible_namespaces(conn, principal.namespaces)
            items, total = queries.list_namespaces(conn, limit, offset, visible)
        return {"namespaces": items, "totalCount": total}

    return await stored_answer(run)
