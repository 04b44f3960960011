"""``GET /api/v1/events``: the raw events exactly as received, newest event time first, optionally of one job
namespace (``namespace``, Feast's name, or ``jobNamespace``) and one job name (``job_name``, Feast's name, or
``jobName``, the spelling of ``GET /api/v1/runs``); and
``GET /api/v1/events/{namespace}``, the events of one namespace's jobs, which Marquez's Python client asks for
(``list_events(namespace=...)``, the name not encoded: the rest of the path is the namespace).

A namespace-limited key gets only the events that name no hidden namespace anywhere, with the total
counted the same way (see :mod:`..store.read.queries`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response, status

from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Offset, utc_bound
from airflow_lineage_provider.consumer.limits.answer_limits import AnswerBound, answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.models import Events
from airflow_lineage_provider.consumer.routers.runs import UUID_PATTERN
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["events"], dependencies=[Depends(requires(Access.READ))])


RunId = Annotated[str | None, Query(alias="runId", pattern=UUID_PATTERN)]
After = Annotated[datetime | None, Query(description="Only events at or after this time.")]
Before = Annotated[datetime | None, Query(description="Only events before this time.")]
JobNamespace = Annotated[
    str | None, Query(max_length=5000, pattern=NO_NUL, description="Only events of jobs in this namespace.")
]
JobNamespaceCamel = Annotated[
    str | None,
    Query(alias="jobNamespace", max_length=5000, pattern=NO_NUL, description="Same as namespace (runs' spelling)."),
]
JobName = Annotated[
    str | None, Query(max_length=5000, pattern=NO_NUL, description="Only events of jobs with this name (Feast's).")
]
JobNameCamel = Annotated[
    str | None,
    Query(alias="jobName", max_length=5000, pattern=NO_NUL, description="Same as job_name (runs' spelling)."),
]


def one_of(spellings: dict[str, str | None]) -> str | None:
    """The value given under either spelling of one filter; 400 naming both when they disagree."""
    given = {name: value for name, value in spellings.items() if value is not None}
    if len(set(given.values())) > 1:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"{' and '.join(given)} are two spellings of one filter and disagree: give one",
        )
    return next(iter(given.values()), None)


def _listing(
    view: View,
    limit: int,
    offset: int,
    run_id: str | None,
    after: datetime | None,
    before: datetime | None,
    namespace: str | None,
    job_name: str | None,
    bound: AnswerBound,
) -> Callable[[], dict]:
    since, until = utc_bound(after, "after"), utc_bound(before, "before")

    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = queries.list_events(
                conn,
                limit,
                offset,
                run_id,
                since,
                until,
                visible,
                job_namespace=namespace,
                job_name=job_name,
                admit=bound.admit,
            )
        return {"events": items, "totalCount": total}

    return run


@router.get(
    "/api/v1/events", dependencies=[KnownQuery], response_model=Events, summary="Raw events as received, newest first"
)
async def get_events(
    request: Request,
    view: View,
    run_id: RunId = None,
    after: After = None,
    before: Before = None,
    namespace: JobNamespace = None,
    job_namespace: JobNamespaceCamel = None,
    job_name: JobName = None,
    job_name_camel: JobNameCamel = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    namespace = one_of({"namespace": namespace, "jobNamespace": job_namespace})
    name = one_of({"job_name": job_name, "jobName": job_name_camel})
    bound = answer_bound(request)
    return await bound.answer(_listing(view, limit, offset, run_id, after, before, namespace, name, bound))


@router.get(
    "/api/v1/events/{namespace:path}",
    dependencies=[KnownQuery],
    response_model=Events,
    summary="Raw events of one namespace's jobs, newest first (Marquez client's list_events(namespace))",
)
async def get_namespace_events(
    request: Request,
    view: View,
    namespace: Annotated[str, Path(max_length=5000, pattern=NO_NUL, description="The jobs' namespace.")],
    run_id: RunId = None,
    after: After = None,
    before: Before = None,
    job_name: JobName = None,
    job_name_camel: JobNameCamel = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    name = one_of({"job_name": job_name, "jobName": job_name_camel})
    bound = answer_bound(request)
    return await bound.answer(_listing(view, limit, offset, run_id, after, before, namespace, name, bound))
