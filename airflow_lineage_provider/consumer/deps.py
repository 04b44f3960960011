"""FastAPI dependencies shared by the routers: the store, the settings, paging, answers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Annotated, Any

import msgspec
from fastapi import Depends, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore

log = logging.getLogger(__name__)


def get_store(request: Request) -> LineageStore:
    """The app's lineage store."""
    return request.app.state.store


def get_settings(request: Request) -> ConsumerSettings:
    """The app's settings."""
    return request.app.state.settings


Store = Annotated[LineageStore, Depends(get_store)]
Settings = Annotated[ConsumerSettings, Depends(get_settings)]
#: Text parameters may not hold NUL: no store can compare with it (PostgreSQL refuses the statement).
NO_NUL = r"^[^\x00]*$"
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size.")]
Namespace = Annotated[str | None, Query(max_length=5000, pattern=NO_NUL, description="Only this namespace.")]
Contains = Annotated[str | None, Query(max_length=1000, pattern=NO_NUL, description="Only names containing this text.")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Items to skip.")]


async def stored_answer(read: Callable[[], Any]) -> Response:
    """Run ``read`` (a store read returning JSON-ready values) off the event loop and answer its JSON.

    Encoded with msgspec rather than through the route's pydantic response model: the values are events and
    facets validated at ingest, and re-validating them on the way out let one stored event that pydantic
    cannot serialize (a facet nested past its 255 levels) break every listing that shows it. The response
    model still documents the shape in the OpenAPI description.
    """
    body = await run_in_threadpool(lambda: msgspec.json.encode(read()))
    return Response(body, media_type="application/json")


def utc_bound(value: datetime | None, name: str) -> datetime | None:
    """A time parameter in UTC; 400 naming it when UTC cannot represent it (``0001-01-01T00:00:00+14:00``)."""
    if value is None:
        return None
    try:
        return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    except OverflowError:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"{name}: {value.isoformat()} is outside the times UTC can represent (years 1 to 9999)",
        ) from None
