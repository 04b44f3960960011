"""``GET /api/v1/stats/...``: the charts of Marquez's web UI (its OpenAPI description has no schema for them;
the shapes are its ``StatsResource``'s).

* ``/stats/lineage-events?period=DAY|WEEK&timezone=Europe/Berlin`` → a JSON array of ``{startInterval,
  endInterval, fail, start, complete, abort}``: events of each type per hour (``DAY``, 24 of them) or per
  day (``WEEK``, 7 calendar days in ``timezone``, which Marquez requires for ``WEEK``: 400 without it).
* ``/stats/jobs``, ``/stats/datasets``, ``/stats/sources`` with the same parameters → a JSON array of
  ``{startInterval, endInterval, count}``: how many jobs, datasets or sources had been seen by each
  interval's end. ``timezone`` defaults to UTC here.

What each number counts is in :mod:`...store.operations.stats`. ``period`` is read in any case; a missing or unknown
``period`` or an unknown time zone answers 400 naming the value.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from pydantic import BaseModel

from airflow_lineage_provider.consumer.deps import stored_answer
from airflow_lineage_provider.consumer.marquez.params import bad_parameter, query_choice
from airflow_lineage_provider.consumer.models import Problem
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.operations import stats
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["stats"], dependencies=[Depends(requires(Access.READ))])


class LineageMetric(BaseModel):
    """Events per interval, by type (Marquez's ``LineageMetric``)."""

    startInterval: str
    endInterval: str
    fail: int
    start: int
    complete: int
    abort: int


class IntervalMetric(BaseModel):
    """Jobs, datasets or sources seen by the end of an interval (Marquez's ``IntervalMetric``)."""

    startInterval: str
    endInterval: str
    count: int


PeriodText = Annotated[str | None, Query(max_length=16, description="DAY (24 hours) or WEEK (7 days).")]
ZoneText = Annotated[str | None, Query(max_length=64, description="An IANA time zone (Europe/Berlin).")]
PERIOD_CHOICES = {name: name for name in stats.PERIODS}


def _zone(value: str | None, required: bool) -> ZoneInfo:
    if value is None or not value.strip():
        if required:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="timezone must be given for period WEEK")
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(value.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise bad_parameter("timezone", value, "an IANA time zone such as Europe/Berlin or UTC") from None


def _spans(period: str | None, zone: str | None, zone_required_for_week: bool) -> list[stats.Interval]:
    chosen = query_choice(period, "period", PERIOD_CHOICES, None)
    if chosen is None:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="period must be given: DAY or WEEK")
    return stats.intervals(chosen, _zone(zone, zone_required_for_week and chosen == "WEEK"), datetime.now(timezone.utc))


_RESPONSES: dict[int | str, dict[str, Any]] = {400: {"model": Problem}}


@router.get(
    "/api/v1/stats/lineage-events",
    response_model=list[LineageMetric],
    responses=_RESPONSES,
    summary="Marquez: lineage events of each type per hour (DAY) or day (WEEK)",
)
async def get_lineage_event_stats(view: View, period: PeriodText = None, timezone: ZoneText = None) -> Response:
    spans = _spans(period, timezone, zone_required_for_week=True)

    def run() -> list[dict[str, Any]]:
        with view.read() as (conn, visible):
            return stats.lineage_event_metrics(conn, spans, visible)

    return await stored_answer(run)


async def _interval_answer(view: View, asset: str, period: str | None, zone: str | None) -> Response:
    spans = _spans(period, zone, zone_required_for_week=False)

    def run() -> list[dict[str, Any]]:
        with view.read() as (conn, visible):
            return stats.interval_metrics(conn, asset, spans, visible)

    return await stored_answer(run)


@router.get(
    "/api/v1/stats/jobs",
    response_model=list[IntervalMetric],
    responses=_RESPONSES,
    summary="Marquez: jobs seen by the end of each hour (DAY) or day (WEEK)",
)
async def get_job_stats(view: View, period: PeriodText = None, timezone: ZoneText = None) -> Response:
    return await _interval_answer(view, "jobs", period, timezone)


@router.get(
    "/api/v1/stats/datasets",
    response_model=list[IntervalMetric],
    responses=_RESPONSES,
    summary="Marquez: datasets seen by the end of each hour (DAY) or day (WEEK)",
)
async def get_dataset_stats(view: View, period: PeriodText = None, timezone: ZoneText = None) -> Response:
    return await _interval_answer(view, "datasets", period, timezone)


@router.get(
    "/api/v1/stats/sources",
    response_model=list[IntervalMetric],
    responses=_RESPONSES,
    summary="Marquez: sources (dataset namespaces) seen by the end of each hour (DAY) or day (WEEK)",
)
async def get_source_stats(view: View, period: PeriodText = None, timezone: ZoneText = None) -> Response:
    return await _interval_answer(view, "sources", period, timezone)
