"""``GET /api/v1/graph``: the whole lineage graph, a page of nodes at a time, with the edges leaving them.

Parameters: ``namespace`` (only its nodes; their edges may lead to other namespaces), ``limit`` (nodes per
page, default 100, at most 10,000) and ``offset``. Nodes come in (kind, namespace, name) order, each as the
graph walks show it (``id``, ``type``, ``data``); ``edges`` are those whose origin is on the page, so paging
through ``totalCount`` nodes yields every edge once. ``symlinks`` lists the page's datasets' other names.
Feast's ``GET /lineage/openlineage/graph`` answers ``nodes``, ``edges``, ``symlinks`` and ``total_nodes``
(here ``totalCount``, as every listing of this API names it). A key limited to namespace patterns sees only
its namespaces' nodes, and only the edges and symlinks between visible namespaces. Renderings of templated
names are collapsed into their pattern's node as in ``GET /api/v1/lineage`` unless ``renderings=expanded``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from airflow_lineage_provider.consumer.deps import Namespace, Offset
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.models import GraphListing, Problem
from airflow_lineage_provider.consumer.routers.graph.graph_walks import ShownRenderings
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.graph.listing import GraphPage, graph_page
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["lineage"], dependencies=[Depends(requires(Access.READ))])

#: Most nodes one page may hold.
MAX_PAGE_NODES = 10_000
PageLimit = Annotated[int, Query(ge=1, le=MAX_PAGE_NODES, description="Nodes per page (at most 10,000).")]


@router.get(
    "/api/v1/graph",
    dependencies=[KnownQuery],
    response_model=GraphListing,
    responses={400: {"model": Problem}},
    summary="The whole lineage graph, paged: nodes in kind, namespace, name order and the edges leaving them",
)
async def get_graph(
    request: Request,
    view: View,
    namespace: Namespace = None,
    limit: PageLimit = 100,
    offset: Offset = 0,
    shown: ShownRenderings = "collapsed",
) -> Response:
    bound = answer_bound(request)

    def run() -> GraphPage:
        with view.read() as (conn, visible):
            return graph_page(
                conn,
                limit,
                offset,
                namespace=namespace,
                visible=visible,
                cards=view.store.graph_cards,
                admit=bound.admit,
                shown=shown,
            )

    return await bound.answer(run)
