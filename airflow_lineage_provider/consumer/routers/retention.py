"""``POST /api/v1/retention``: prune old raw events and runs now (a write: needs the API key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.concurrency import run_in_threadpool

from airflow_lineage_provider.consumer.auth import require_api_key
from airflow_lineage_provider.consumer.deps import Store
from airflow_lineage_provider.consumer.models import Pruned
from airflow_lineage_provider.consumer.service import prune_now

router = APIRouter(tags=["retention"], dependencies=[Depends(require_api_key)])


@router.post("/api/v1/retention", response_model=Pruned, summary="Prune events and runs older than N days")
async def post_retention(
    store: Store, days: Annotated[float, Query(gt=0, le=100_000, description="Keep this many days.")]
) -> dict:
    result = await run_in_threadpool(prune_now, store, days)
    return {"events": result.events, "runs": result.runs}
