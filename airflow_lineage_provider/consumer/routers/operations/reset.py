"""``POST /api/v1/reset``: remove the whole store's lineage, or one namespace's (admin access).

``?namespace=NS`` resets that namespace (its jobs, datasets and everything that refers to them, see
:mod:`...store.operations.reset`); without it the whole store goes, which needs ``confirm=all`` as well, so that a stray
POST cannot empty it. ``dryRun=true`` answers what would go and changes nothing (no confirmation needed).
A key limited to namespace patterns may reset a namespace it sees when the reset stays inside the namespaces
it sees (409 otherwise, dry run too, without naming the others); a hidden or unknown namespace is 404 alike,
and a whole-store reset needs a key without namespace limits. Every reset, dry or not, is written to the
audit log.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, status

from airflow_lineage_provider.consumer.deps import Namespace, Store
from airflow_lineage_provider.consumer.ingest.service import StoreUnavailable, reset_now
from airflow_lineage_provider.consumer.models import Problem, ResetResult
from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import Access, Principal
from airflow_lineage_provider.consumer.security.auth import Admin, requires
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.operations.reset import SharedNamespace
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store_view import StoreView

router = APIRouter(tags=["retention"], dependencies=[Depends(requires(Access.ADMIN))])

DryRun = Annotated[bool, Query(alias="dryRun", description="Only count what would go.")]
Confirm = Annotated[
    Literal["all"] | None, Query(description="'all': required to reset the whole store (no namespace given).")
]


def _check(
    store: LineageStore, principal: Principal, namespace: str | None, dry_run: bool, confirm: str | None
) -> None:
    """400 for a whole-store reset without ``confirm=all``, 403 for one by a limited key, 404 for a namespace
    that holds no job or dataset (or is hidden from the key)."""
    if namespace is None:
        if principal.namespaces is not None:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                detail=f"{principal.who} is limited to some namespaces: it may reset one of them "
                "(?namespace=NS), not the whole store",
            )
        if not dry_run and confirm != "all":
            raise HTTPException(
                status.HTTP_400_BAD_REQUEST,
                detail="a reset without namespace removes the whole store (every event, run, job and dataset): "
                "add confirm=all to do that, dryRun=true to see what would go, or namespace=NS to reset one "
                "namespace",
            )
        return
    with StoreView(store, principal.namespaces).read() as (conn, visible):
        found = queries.namespace_exists(conn, namespace, visible)
    if not found:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job or dataset in namespace {namespace!r}")


@router.post(
    "/api/v1/reset",
    response_model=ResetResult,
    responses={
        400: {"model": Problem},
        403: {"model": Problem},
        404: {"model": Problem},
        409: {"model": Problem, "description": "A limited key's namespace is shared with namespaces it cannot see."},
        503: {"model": Problem},
    },
    summary="Reset the whole store (confirm=all) or one namespace; dryRun=true says what would go",
)
def post_reset(
    store: Store,
    principal: Admin,
    namespace: Namespace = None,
    dry_run: DryRun = False,
    confirm: Confirm = None,
) -> dict:
    _check(store, principal, namespace, dry_run, confirm)  # a plain def endpoint: run in FastAPI's thread pool
    try:
        counts = reset_now(store, namespace, dry_run, principal.namespaces)
    except StoreUnavailable:
        audit.reset(principal, namespace=namespace, dry_run=dry_run, removed=None, status=503)
        raise
    except SharedNamespace as shared:
        audit.reset(principal, namespace=namespace, dry_run=dry_run, removed=None, status=409)
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(shared)) from None
    removed = counts.as_dict()
    audit.reset(principal, namespace=namespace, dry_run=dry_run, removed=removed, status=200)
    return {"dryRun": dry_run, "namespace": namespace, "counts": removed}
