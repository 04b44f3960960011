"""``/api/v1/retention``: what retention is set to and what it did (``GET``), and a prune now (``POST``).

``GET`` needs read access: it shows the configuration, counts and times, no lineage. The counts are the
whole store's, so a key limited to namespace patterns gets 403 unless its patterns match every namespace
the store holds (it would otherwise learn the size of what it may not see). ``POST`` prunes: destructive,
it needs admin access, and is recorded in the store's prune history like the timer's prunes. A limited admin
key prunes only what lies wholly inside the namespaces it sees, and is answered (and recorded) those counts.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status

from airflow_lineage_provider.consumer.deps import Store, stored_answer
from airflow_lineage_provider.consumer.ingest.service import RetentionSchedule, StoreUnavailable, prune_now
from airflow_lineage_provider.consumer.models import Problem, Pruned, RetentionStatus
from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import Admin, Reader, requires
from airflow_lineage_provider.consumer.store.operations.retention import PruneRecord, recent_prunes, statistics
from airflow_lineage_provider.consumer.store.read.text import iso
from airflow_lineage_provider.consumer.store_view import StoreView, View

router = APIRouter(tags=["retention"])


def prune_report(record: PruneRecord) -> dict[str, Any]:
    """A prune record as the API shows it."""
    return {
        "prunedAt": iso(record.pruned_at),
        "cutoff": iso(record.cutoff),
        "trigger": record.trigger,
        "events": record.events,
        "runs": record.runs,
        "durationSeconds": record.duration_seconds,
    }


def configured_days(schedule: RetentionSchedule) -> float:
    """The days a prune without ``days`` keeps: the configured ``retention_days``; 400 when retention is off."""
    if schedule.days is None:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail="days: no retention is configured (retention_days, consumer_retention_days or --retention-days), "
            "so a prune needs days=N, the days to keep",
        )
    return schedule.days


def retention_status(view: StoreView, schedule: RetentionSchedule, who: str) -> dict[str, Any]:
    """The answer of ``GET /api/v1/retention``; 403 for a key that does not see every namespace."""
    with view.read() as (conn, _visible):
        if not view.sees_every_namespace(conn):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                detail=f"{who} sees only some namespaces; the retention statistics count the whole "
                "store: ask with a key that sees every namespace",
            )
        held = statistics(conn)
        last = recent_prunes(conn, 1)
    next_check = schedule.next_check if schedule.running else None
    return {
        "configuration": {
            "retentionDays": schedule.days,
            "enabled": schedule.days is not None,
            "checkIntervalHours": schedule.interval / 3600,
            "timerRunning": schedule.running,
            "nextCheckAt": iso(next_check),
        },
        "statistics": {
            "events": held.events,
            "runs": held.runs,
            "jobs": held.jobs,
            "datasets": held.datasets,
            "oldestEventTime": iso(held.oldest_event_time),
            "newestEventTime": iso(held.newest_event_time),
            "oldestReceivedAt": iso(held.oldest_received_at),
            "newestReceivedAt": iso(held.newest_received_at),
            "pendingEvents": held.pending,
            "unappliedEvents": held.unapplied,
        },
        "lastPrune": prune_report(last[0]) if last else None,
    }


@router.get(
    "/api/v1/retention",
    response_model=RetentionStatus,
    responses={403: {"model": Problem}},
    dependencies=[Depends(requires(Access.READ))],
    summary="Retention: its configuration, what the store holds, and the last prune",
)
async def get_retention(request: Request, view: View, principal: Reader) -> Response:
    return await stored_answer(lambda: retention_status(view, request.app.state.retention, principal.who))


@router.post(
    "/api/v1/retention",
    response_model=Pruned,
    dependencies=[Depends(requires(Access.ADMIN))],
    summary="Prune events and runs older than N days, by default the configured retention (a limited key: only "
    "what lies inside its namespaces)",
)
def post_retention(
    request: Request,
    store: Store,
    principal: Admin,
    days: Annotated[
        float | None,
        Query(gt=0, le=100_000, description="Keep this many days; without it, the configured retention_days."),
    ] = None,
) -> dict:
    if days is None:
        days = configured_days(request.app.state.retention)
    try:
        # a plain def endpoint: FastAPI runs it in its thread pool
        result = prune_now(store, days, "api", principal.namespaces)
    except StoreUnavailable:
        audit.prune(principal, days=days, events=None, runs=None, status=503)
        raise
    audit.prune(principal, days=days, events=result.events, runs=result.runs, status=200)
    return {"events": result.events, "runs": result.runs}
