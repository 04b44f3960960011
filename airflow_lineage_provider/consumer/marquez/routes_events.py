"""``GET /api/v1/events/lineage``: Marquez's listing of the OpenLineage run events received, as stored.

Marquez's parameters and paging: ``after <= eventTime < before``, ``sortDirection`` ``desc`` (default, newest
first) or ``asc``, ``limit`` and ``offset``, and ``totalCount`` (every event in the window, not the page). Like
Marquez, only RunEvents are listed (its web UI reads ``event.run.runId`` of each); JobEvents and DatasetEvents
are in our own ``GET /api/v1/events``. Unlike Marquez (which counts every kind of event in ``totalCount`` and
caps ``before`` at 2030 by default), the total counts exactly what the pages list, and an absent bound is no
bound. Empty ``before=``/``after=`` (what Marquez's web UI sends for "no bound") are no bound too.

A namespace-limited key gets only the events that name no hidden namespace anywhere, counted the same way
(:func:`..store.read.queries.list_events`). The parameters are read by :mod:`.params`: a bad value answers 400
naming the parameter and the value.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from airflow_lineage_provider.consumer.deps import Limit, Offset
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez.params import SORT_DIRECTIONS, TimeText, query_choice, query_time
from airflow_lineage_provider.consumer.models import Events, Problem
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["marquez"], dependencies=[Depends(requires(Access.READ))])


@router.get(
    "/api/v1/events/lineage",
    dependencies=[KnownQuery],
    response_model=Events,
    responses={400: {"model": Problem}},
    summary="Marquez: OpenLineage run events received, newest (or oldest) first",
)
async def get_lineage_events(
    view: View,
    request: Request,
    before: TimeText = None,
    after: TimeText = None,
    sort_direction: Annotated[
        str | None, Query(alias="sortDirection", max_length=16, description="desc (default) or asc.")
    ] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    until, since = query_time(before, "before"), query_time(after, "after")
    direction = query_choice(sort_direction, "sortDirection", SORT_DIRECTIONS, "desc")
    bound = answer_bound(request)

    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = queries.list_events(
                conn,
                limit,
                offset,
                None,
                since,
                until,
                visible,
                kind="run",
                ascending=direction == "asc",
                admit=bound.admit,
            )
        return {"events": items, "totalCount": total}

    return await bound.answer(run)
