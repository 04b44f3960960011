"""``GET /api/v1/search``: jobs and datasets by name, as Marquez's search answers (``SearchResultList``).

Marquez's parameters: ``q`` (required; matched case-insensitively anywhere in the name, ``%`` and ``_`` are
wildcards and ``\\`` escapes them), ``filter`` (``JOB`` or ``DATASET``), ``sort`` (``NAME``, the default, or
``UPDATE_AT``: most recently updated first), ``limit`` (default 100), ``namespace`` (exact), ``before`` and
``after`` (``YYYY-MM-DD``: updated before that day began / after it began, in UTC). Values of ``filter`` and
``sort`` are read in any case (``job``, ``name``, ``updated_at`` too). Ours besides Marquez's: ``offset`` for
paging, and ``totalCount`` counts the matches, not only the page (Marquez answers the page's size): exactly up to
:data:`~airflow_lineage_provider.consumer.store.read.queries.SEARCH_TOTAL_BOUND` matches (or to the page's end when
it is further), else it is that many and the answer carries :data:`TOTAL_HEADER` ``at-least``; ``sort=UPDATE_AT``
counts every match. A blank ``q``
answers no result, as Marquez does. Marquez's web UI asks ``/api/v1/search/?q=...`` (with a slash): both
paths answer.

A dataset known under several names (docs/identity.md) is found by any of its (visible) names and answers once,
under its canonical name (``updatedAt``: the latest of its names'); ``totalCount`` counts datasets, not names.
``namespace``, ``before`` and ``after`` apply to the dataset as answered. ``renderings=collapsed`` leaves out
the renderings of templated declared names, as ``GET /api/v1/datasets`` does.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Namespace, Offset
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez.params import query_choice, query_date
from airflow_lineage_provider.consumer.models import Problem, SearchResults
from airflow_lineage_provider.consumer.routers.graph.graph_walks import ListedRenderings
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["search"], dependencies=[Depends(requires(Access.READ))])

#: Marquez's ``filter`` values (and the spec's lower-case words) → the node kind.
FILTERS = {"JOB": "job", "DATASET": "dataset"}
#: Marquez's ``sort`` values (and the column names its description gives) → :data:`queries.SEARCH_ORDERS`.
SORTS = {"NAME": "name", "UPDATE_AT": "updated_at", "UPDATED_AT": "updated_at"}

#: Set (to ``at-least``) on an answer whose ``totalCount`` is a lower bound: counting stopped at the bound.
TOTAL_HEADER = "Lineage-Total-Count"

DateText = Annotated[str | None, Query(max_length=32, description="YYYY-MM-DD (a UTC day).")]


@router.get(
    "/api/v1/search",
    dependencies=[KnownQuery],
    response_model=SearchResults,
    responses={
        200: {
            "headers": {
                TOTAL_HEADER: {
                    "description": "at-least: totalCount is a lower bound (counting stopped at the bound)",
                    "schema": {"type": "string", "enum": ["at-least"]},
                }
            }
        },
        400: {"model": Problem},
    },
    summary="Jobs and datasets by name (Marquez's search)",
)
@router.get("/api/v1/search/", dependencies=[KnownQuery], include_in_schema=False)
async def get_search(
    view: View,
    request: Request,
    q: Annotated[
        str,
        Query(
            max_length=1000,
            pattern=NO_NUL,
            description="Text the name contains (any case); % matches any characters, _ one, \\ escapes.",
        ),
    ],
    filter: Annotated[str | None, Query(max_length=16, description="JOB or DATASET.")] = None,
    sort: Annotated[str | None, Query(max_length=16, description="NAME (default) or UPDATE_AT.")] = None,
    limit: Limit = 100,
    namespace: Namespace = None,
    before: DateText = None,
    after: DateText = None,
    offset: Offset = 0,
    shown: ListedRenderings = "expanded",
) -> Response:
    kind = query_choice(filter, "filter", FILTERS, None)
    order = query_choice(sort, "sort", SORTS, "name")
    until, since = query_date(before, "before"), query_date(after, "after")
    text = q.strip()
    bound = answer_bound(request)
    at_least = False

    def run() -> dict:
        nonlocal at_least
        if not text:
            return {"totalCount": 0, "results": []}
        with view.read() as (conn, visible):
            items, total = queries.search(
                conn,
                text,
                kind,
                namespace,
                limit,
                offset,
                visible,
                sort=order or "name",
                before=None if until is None else _midnight(until),
                after=None if since is None else _midnight(since),
                admit=bound.admit,
                without_renderings=shown == "collapsed",
            )
        at_least = total.at_least
        return {"totalCount": total.matches, "results": items}

    answer = await bound.answer(run)
    if at_least:
        answer.headers[TOTAL_HEADER] = "at-least"
    return answer


def _midnight(day: date) -> datetime:
    """The instant ``day`` begins in UTC (Marquez compares its timestamps with the date itself)."""
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
