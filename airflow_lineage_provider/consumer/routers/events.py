"""``GET /api/v1/events``: the raw events exactly as received, newest event time first; and
``GET /api/v1/events/{namespace}``, the events of one namespace's jobs, which Marquez's Python client asks for
(``list_events(namespace=...)``, the name not encoded: the rest of the path is the namespace).

A namespace-limited key gets only the events that name no hidden namespace anywhere, with the total
counted the same way (see :mod:`..store.queries`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from airflow_lineage_provider.consumer.access import Access, Principal
from airflow_lineage_provider.consumer.answer_limits import AnswerBound, answer_bound
from airflow_lineage_provider.consumer.auth import Reader, requires
from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Offset, Store, utc_bound
from airflow_lineage_provider.consumer.models import Events
from airflow_lineage_provider.consumer.routers.runs import UUID_PATTERN
from airflow_lineage_provider.consumer.store import LineageStore, queries
from airflow_lineage_provider.consumer.store.visibility import visible_namespaces

router = APIRouter(tags=["events"], dependencies=[Depends(requires(Access.READ))])


RunId = Annotated[str | None, Query(alias="runId", pattern=UUID_PATTERN)]
After = Annotated[datetime | None, Query(description="Only events at or after this time.")]
Before = Annotated[datetime | None, Query(description="Only events before this time.")]
JobNamespace = Annotated[
    str | None, Query(max_length=5000, pattern=NO_NUL, description="Only events of jobs in this namespace.")
]


def _listing(
    store: LineageStore,
    principal: Principal,
    limit: int,
    offset: int,
    run_id: str | None,
    after: datetime | None,
    before: datetime | None,
    namespace: str | None,
    bound: AnswerBound,
) -> Callable[[], dict]:
    since, until = utc_bound(after, "after"), utc_bound(before, "before")

    def run() -> dict:
        with store.read() as conn:
            visible = visible_namespaces(conn, principal.namespaces)
            items, total = queries.list_events(
                conn, limit, offset, run_id, since, until, visible, job_namespace=namespace, admit=bound.admit
            )
        return {"events": items, "totalCount": total}

    return run


@router.get("/api/v1/events", response_model=Events, summary="Raw events as received, newest first")
async def get_events(
    request: Request,
    store: Store,
    principal: Reader,
    run_id: RunId = None,
    after: After = None,
    before: Before = None,
    namespace: JobNamespace = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)
    return await bound.answer(_listing(store, principal, limit, offset, run_id, after, before, namespace, bound))


@router.get(
    "/api/v1/events/{namespace:path}",
    response_model=Events,
    summary="Raw events of one namespace's jobs, newest first (Marquez client's list_events(namespace))",
)
async def get_namespace_events(
    request: Request,
    store: Store,
    principal: Reader,
    namespace: Annotated[str, Path(max_length=5000, pattern=NO_NUL, description="The jobs' namespace.")],
    run_id: RunId = None,
    after: After = None,
    before: Before = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    bound = answer_bound(request)
    return await bound.answer(_listing(store, principal, limit, offset, run_id, after, before, namespace, bound))
