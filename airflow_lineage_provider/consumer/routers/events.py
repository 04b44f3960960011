"""``GET /api/v1/events``: the raw events exactly as received, newest event time first.

A namespace-limited key gets only the events that name no hidden namespace anywhere, with the total
counted the same way (see :mod:`..store.queries`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.auth import Reader, requires
from airflow_lineage_provider.consumer.deps import Limit, Offset, Store, stored_answer, utc_bound
from airflow_lineage_provider.consumer.models import Events
from airflow_lineage_provider.consumer.routers.runs import UUID_PATTERN
from airflow_lineage_provider.consumer.store import queries
from airflow_lineage_provider.consumer.store.visibility import visible_namespaces

router = APIRouter(tags=["events"], dependencies=[Depends(requires(Access.READ))])


@router.get("/api/v1/events", response_model=Events, summary="Raw events as received, newest first")
async def get_events(
    store: Store,
    principal: Reader,
    run_id: Annotated[str | None, Query(alias="runId", pattern=UUID_PATTERN)] = None,
    after: Annotated[datetime | None, Query(description="Only events at or after this time.")] = None,
    before: Annotated[datetime | None, Query(description="Only events before this time.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    since, until = utc_bound(after, "after"), utc_bound(before, "before")

    def run() -> dict:
        with store.read() as conn:
            visible = visible_namespaces(conn, principal.namespaces)
            items, total = queries.list_events(conn, limit, offset, run_id, since, until, visible)
        return {"events": items, "totalCount": total}

    return await stored_answer(run)
