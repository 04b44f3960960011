"""Marquez's sources: ``GET /api/v1/sources`` (SourceList) and ``GET /api/v1/sources/{source}`` (Source).

Sources are derived from what the events say about datasets (the rule: :mod:`..store.read.sources`). A
namespace-limited key sees the sources of the datasets it may see; a source no visible dataset has is
unknown to it (404, as for a missing one). A source name may hold ``/`` (``postgres://db:5432``): the
path's last part, whatever it holds, is the name.

Sources count every stored name of a dataset, aliases included (docs/identity.md): two names of one table
often live in two real sources — a file system and a metastore, two host names of one database — and each is
a connection some producer named.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from airflow_lineage_provider.consumer.deps import NO_NUL, Limit, Offset
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez.errors import NOT_FOUND, MarquezError, marquez_answer
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.read import sources
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["marquez: sources"], dependencies=[Depends(requires(Access.READ))])

SourceName = Annotated[str, Path(max_length=5000, pattern=NO_NUL, description="The source's name.")]


@router.get("/api/v1/sources", dependencies=[KnownQuery], summary="Sources of the datasets (SourceList)")
async def list_sources(view: View, limit: Limit = 100, offset: Offset = 0) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = sources.list_sources(conn, limit, offset, visible)
        return {"sources": items, "totalCount": total}

    return await marquez_answer(run)


@router.get("/api/v1/sources/{source:path}", responses=NOT_FOUND, summary="A source (Source)")
async def get_source(view: View, source: SourceName) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            found = sources.get_source(conn, source, visible)
        if found is None:
            raise MarquezError(404, f"Source '{source}' not found.")
        return found

    return await marquez_answer(run)
