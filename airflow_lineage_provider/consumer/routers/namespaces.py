"""``GET /api/v1/namespaces`` and ``GET /api/v1/namespaces/{namespace}``: Marquez's ``Namespace`` objects.

A namespace exists while some job or dataset lives in it; a namespace-limited key sees the visible ones
only, and gets Marquez's 404 for a hidden one, exactly as for a missing one. ``ownerName`` is
``anonymous``: what Marquez answers for namespaces created by OpenLineage events (they name no owner).

Every name a producer used keeps its namespace alive, an alias's too (docs/identity.md): a namespace whose
datasets are all other names of datasets listed elsewhere is still listed, and its dataset listing is empty.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from airflow_lineage_provider.consumer.deps import Limit, Offset, stored_answer
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez.errors import NOT_FOUND, marquez_answer, namespace_not_found
from airflow_lineage_provider.consumer.marquez.paths import Namespace
from airflow_lineage_provider.consumer.models import Namespaces
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["namespaces"], dependencies=[Depends(requires(Access.READ))])


@router.get(
    "/api/v1/namespaces",
    dependencies=[KnownQuery],
    response_model=Namespaces,
    summary="Namespaces of jobs and datasets",
)
async def get_namespaces(view: View, limit: Limit = 100, offset: Offset = 0) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = queries.list_namespaces(conn, limit, offset, visible)
        return {"namespaces": items, "totalCount": total}

    return await stored_answer(run)


@router.get("/api/v1/namespaces/{namespace}", responses=NOT_FOUND, summary="One namespace (Marquez's Namespace)")
async def get_namespace(view: View, namespace: Namespace) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            found = queries.get_namespace(conn, namespace, visible)
        if found is None:
            raise namespace_not_found(namespace)
        return found

    return await marquez_answer(run)
