"""``GET /api/v1/events/lineage``: Marquez's listing of the OpenLineage run events received, as stored.

Marquez's parameters and paging: ``after <= eventTime < before``, ``sortDirection`` ``desc`` (default, newest
first) or ``asc``, ``limit`` and ``offset``, and ``totalCount`` (every event in the window, not the page). Like
Marquez, only RunEvents are listed (its web UI reads ``event.run.runId`` of each); JobEvents and DatasetEvents
are in our own ``GET /api/v1/events``. Unlike Marquez (which counts every kind of event in ``totalCount`` and
caps ``before`` at 2030 by default), the total counts exactly what the pages list, and an absent bound is no
bound. Empty ``before=``/``after=`` (what Marquez's web UI sends for "no bound") are no bound too.

A namespace-limited key gets only the events that name no hidden namespace anywhere, counted the same way
(:func:`..store.queries.list_events`).

The parameter readers here (:func:`query_time`, :func:`query_choice`) are shared by the other Marquez routes:
a bad value answers 400 naming the parameter and the value.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status

from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.answer_limits import answer_bound
from airflow_lineage_provider.consumer.auth import requires
from airflow_lineage_provider.consumer.deps import Limit, Offset, utc_bound
from airflow_lineage_provider.consumer.models import Events, Problem
from airflow_lineage_provider.consumer.query_names import KnownQuery
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["marquez"], dependencies=[Depends(requires(Access.READ))])

#: A time parameter as received (parsed by :func:`query_time`, so a bad one is a 400 naming it).
TimeText = Annotated[str | None, Query(max_length=64, description="ISO 8601 date-time; without a zone: UTC.")]


def bad_parameter(name: str, value: str, expected: str) -> HTTPException:
    """A 400 naming the parameter, the value received (cut to 100 characters) and what is accepted."""
    return HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"{name}: {value[:100]!r} is not {expected}")


def query_time(value: str | None, name: str) -> datetime | None:
    """A date-time query parameter in UTC (``2022-09-15T07:47:19Z``; a naive one is UTC); None when absent
    or empty; 400 naming it when it is not ISO 8601 or UTC cannot represent it."""
    if value is None or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise bad_parameter(name, value, "an ISO 8601 date-time such as 2022-09-15T07:47:19Z") from None
    return utc_bound(parsed, name)


def query_date(value: str | None, name: str) -> date | None:
    """A ``YYYY-MM-DD`` query parameter; None when absent or empty; 400 naming it otherwise."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise bad_parameter(name, value, "a date YYYY-MM-DD such as 2022-09-15") from None


def query_choice(value: str | None, name: str, choices: dict[str, str], default: str | None) -> str | None:
    """``value`` looked up in ``choices`` (keys upper case; the value is matched in any case); ``default``
    when absent or empty; 400 naming the value and the accepted ones otherwise."""
    if value is None or not value.strip():
        return default
    found = choices.get(value.strip().upper())
    if found is None:
        raise bad_parameter(name, value, "one of " + ", ".join(sorted(choices)))
    return found


SORT_DIRECTIONS = {"ASC": "asc", "DESC": "desc"}


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
