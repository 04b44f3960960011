"""``/api/v1/ingest-log/unapplied``: the events deferred apply set aside (``GET``), and a requeue (``POST``).

Deferred apply (:mod:`...store.write.deferred_apply`) sets an event aside when the graph cannot take it alone; its raw
event is kept and it is counted as ``unappliedEvents`` by ``GET /api/v1/retention``. Here an operator sees which
events and why, and — once the cause is gone (a trigger dropped, a bug fixed by an upgrade) — puts them back in
the ingest log to be applied again (:func:`..service.requeue_unapplied`). Both need admin access and a key
without namespace limits: the list spans every namespace, and a requeue changes the whole graph.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status

from airflow_lineage_provider.consumer.deps import Store, stored_answer
from airflow_lineage_provider.consumer.ingest.service import StoreUnavailable, requeue_unapplied
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.models import Problem, Requeued, UnappliedEvents
from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import Access, Principal
from airflow_lineage_provider.consumer.security.auth import Admin, requires
from airflow_lineage_provider.consumer.store.read.text import iso
from airflow_lineage_provider.consumer.store.write.unapplied import unapplied
from airflow_lineage_provider.consumer.store_view import StoreView

router = APIRouter(tags=["retention"], dependencies=[Depends(requires(Access.ADMIN))])

_LIMITED: dict[int | str, dict[str, Any]] = {403: {"model": Problem}, 503: {"model": Problem}}


def _whole_store(principal: Principal) -> None:
    if principal.namespaces is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            detail=f"{principal.who} is limited to some namespaces; the ingest log spans every namespace: use a key "
            "without namespace limits",
        )


def _listing(view: StoreView, limit: int) -> dict[str, Any]:
    with view.read() as (conn, _every):  # a principal without namespace limits (_whole_store)
        rows, total = unapplied(conn, limit)
    return {
        "unapplied": [
            {
                "eventKey": row.event_key,
                "failedAt": iso(row.failed_at),
                "reason": row.reason,
                "eventType": row.event_type,
                "eventTime": iso(row.event_time),
                "jobNamespace": row.job_namespace,
                "jobName": row.job_name,
                "producer": row.producer,
            }
            for row in rows
        ],
        "totalCount": total,
    }


@router.get(
    "/api/v1/ingest-log/unapplied",
    dependencies=[KnownQuery],
    response_model=UnappliedEvents,
    responses=_LIMITED,
    summary="Events deferred apply set aside (the graph could not take them), newest first, with the reason",
)
async def get_unapplied(
    store: Store,
    principal: Admin,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many, newest first.")] = 100,
) -> Response:
    _whole_store(principal)
    return await stored_answer(lambda: _listing(StoreView(store, principal.namespaces), limit))


@router.post(
    "/api/v1/ingest-log/unapplied/requeue",
    response_model=Requeued,
    responses=_LIMITED,
    summary="Put the set-aside events back in the ingest log and apply them again",
)
def post_requeue(store: Store, principal: Admin) -> dict[str, int]:
    _whole_store(principal)  # a plain def endpoint: FastAPI runs it in its thread pool
    try:
        done, left = requeue_unapplied(store)
    except StoreUnavailable:
        audit.requeue(principal, requeued=None, unapplied=None, status=503)
        raise
    audit.requeue(principal, requeued=done.requeued, unapplied=left, status=200)
    return {"requeued": done.requeued, "gone": done.gone, "unapplied": left}
