"""Listings: namespaces, jobs (with latest run), datasets (with schema), and search by name fragment.

Namespaces are passed as query parameters, not path segments, because they usually contain ``/``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from airflow_lineage_provider.consumer.deps import Limit, Offset, Store
from airflow_lineage_provider.consumer.models import Datasets, Jobs, Namespaces, SearchResults
from airflow_lineage_provider.consumer.store import LineageStore, queries

router = APIRouter(tags=["catalog"])

Namespace = Annotated[str | None, Query(max_length=5000, description="Only this namespace.")]
Contains = Annotated[str | None, Query(max_length=1000, description="Only names containing this text.")]


def _nodes(store: LineageStore, kind: str, namespace: str | None, contains: str | None, limit: int, offset: int):
    with store.read() as conn:
        return queries.list_nodes(conn, kind, namespace, limit, offset, contains)


@router.get("/api/v1/namespaces", response_model=Namespaces, summary="Namespaces of jobs and datasets")
async def get_namespaces(store: Store, limit: Limit = 100, offset: Offset = 0) -> dict:
    def run() -> dict:
        with store.read() as conn:
            items, total = queries.list_namespaces(conn, limit, offset)
        return {"namespaces": items, "totalCount": total}

    return await run_in_threadpool(run)


@router.get("/api/v1/jobs", response_model=Jobs, summary="Jobs with their facets, inputs, outputs and latest run")
async def get_jobs(
    store: Store, namespace: Namespace = None, name_contains: Contains = None, limit: Limit = 100, offset: Offset = 0
) -> dict:
    items, total = await run_in_threadpool(_nodes, store, "job", namespace, name_contains, limit, offset)
    return {"jobs": items, "totalCount": total}


@router.get("/api/v1/datasets", response_model=Datasets, summary="Datasets with their latest schema and facets")
async def get_datasets(
    store: Store, namespace: Namespace = None, name_contains: Contains = None, limit: Limit = 100, offset: Offset = 0
) -> dict:
    items, total = await run_in_threadpool(_nodes, store, "dataset", namespace, name_contains, limit, offset)
    return {"datasets": items, "totalCount": total}


@router.get("/api/v1/search", response_model=SearchResults, summary="Jobs and datasets by name fragment")
async def get_search(
    store: Store,
    q: Annotated[str, Query(min_length=1, max_length=1000, description="Text the name contains (any case).")],
    filter: Annotated[Literal["job", "dataset"] | None, Query(description="Only jobs or only datasets.")] = None,
    namespace: Namespace = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> dict:
    def run() -> dict:
        with store.read() as conn:
            items, total = queries.search(conn, q, filter, namespace, limit, offset)
        return {"results": items, "totalCount": total}

    return await run_in_threadpool(run)
