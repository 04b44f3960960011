"""``GET /api/v1/datasets``: datasets with their latest schema, facets and symlinks, by namespace and name, paged.

The namespace is a query parameter, not a path segment, because namespaces usually contain ``/``.

A dataset known under several names (docs/identity.md) is listed once, under its canonical name, and
``totalCount`` counts datasets, not names; ``name_contains`` matches any of its names, ``namespace`` the
canonical one. Each dataset carries ``aliases`` (``[{namespace, name, via, producers}]``: its other names, how
each joined it — ``symlink``, ``dataSource`` or ``namespaceAlias`` — and the producers that used each) and
``aliasConflicts`` (``[{namespace, name}]``: names it claims that another dataset claims too, which therefore
link nothing; see ``GET /api/v1/datasets/conflicts``). ``renderings=collapsed`` leaves out the renderings of
templated declared names (their patterns are listed), see docs/declared-lineage.md#renderings-in-graph-answers.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from airflow_lineage_provider.consumer.deps import Contains, Limit, Namespace, Offset
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.models import Datasets
from airflow_lineage_provider.consumer.routers.graph.graph_walks import ListedRenderings
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["datasets"], dependencies=[Depends(requires(Access.READ))])


@router.get(
    "/api/v1/datasets",
    dependencies=[KnownQuery],
    response_model=Datasets,
    summary="Datasets with their latest schema, facets and symlinks",
)
async def get_datasets(
    view: View,
    request: Request,
    namespace: Namespace = None,
    name_contains: Contains = None,
    limit: Limit = 100,
    offset: Offset = 0,
    shown: ListedRenderings = "expanded",
) -> Response:
    bound = answer_bound(request)

    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = queries.list_nodes(
                conn,
                "dataset",
                namespace,
                limit,
                offset,
                name_contains,
                visible,
                admit=bound.admit,
                without_renderings=shown == "collapsed",
            )
        return {"datasets": items, "totalCount": total}

    return await bound.answer(run)
