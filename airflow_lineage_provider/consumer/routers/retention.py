"""``POST /api/v1/retention``: prune old raw events and runs now (destructive: needs admin access)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool

from airflow_lineage_provider.consumer import audit
from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.auth import Admin, requires
from airflow_lineage_provider.consumer.deps import Store
from airflow_lineage_provider.consumer.models import Pruned
from airflow_lineage_provider.consumer.service import StoreUnavailable, prune_now

router = APIRouter(tags=["retention"], dependencies=[Depends(requires(Access.ADMIN))])


@router.post("/api/v1/retention", response_model=Pruned, summary="Prune events and runs older than N days")
async def post_retention(
    store: Store, principal: Admin, days: Annotated[float, Query(gt=0, le=100_000, description="Keep this many days.")]
) -> dict:
    try:
        result = await run_in_threadpool(prune_now, store, days)
    except StoreUnavailable:
        audit.prune(principal, days=days, events=None, runs=None, status=503)
        raise
    audit.prune(principal, days=days, events=result.events, runs=result.runs, status=200)
    return {"events": result.events, "runs": result.runs}
