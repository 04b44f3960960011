"""The consumer's FastAPI app: OpenLineage ingest, graph and column-lineage walks, listings, retention."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from airflow_lineage_provider.consumer.nodeids import NodeIdError
from airflow_lineage_provider.consumer.routers import (
    column_lineage,
    datasets,
    events,
    ingest,
    jobs,
    lineage,
    namespaces,
    retention,
    runs,
    search,
)
from airflow_lineage_provider.consumer.service import RetentionSchedule, StoreUnavailable
from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.ui import lineage_ui_router
from airflow_lineage_provider.consumer.validation import EventError
from airflow_lineage_provider.version import __version__

#: The routers every consumer app serves, in OpenAPI order.
ROUTERS: tuple[APIRouter, ...] = (
    ingest.router,
    lineage.router,
    column_lineage.router,
    namespaces.router,
    jobs.router,
    datasets.router,
    search.router,
    runs.router,
    events.router,
    retention.router,
)


def create_app(
    store_url: str,
    api_key: str | None = None,
    *,
    engine: Engine | None = None,
    extra_routers: Sequence[APIRouter] = (),
    **settings: Any,
) -> FastAPI:
    """Build the lineage consumer app for the store at ``store_url``.

    Nothing connects until the first request, so building the app is cheap (the Airflow plugin builds it
    in every process that loads plugins). ``settings`` are the other fields of
    :class:`~airflow_lineage_provider.consumer.settings.ConsumerSettings` (``max_body_bytes``, ``strict``,
    ``spec_dir``, ``retention_days``, ...). ``engine`` replaces the engine built from ``store_url``;
    ``extra_routers`` are included after the built-in ones (for pages served by the same app).

    Example::

        app = create_app("sqlite:////var/lib/lineage/lineage.db", api_key="s3cret")
        uvicorn.run(app, host="127.0.0.1", port=6580)
    """
    config = ConsumerSettings(store_url=store_url, api_key=api_key, **settings)
    spec_validator = None
    if config.strict:
        from airflow_lineage_provider.consumer.strict import SpecValidator

        spec_validator = SpecValidator(config.spec_dir or "")
    app = FastAPI(
        title="airflow-lineage-provider consumer",
        version=__version__,
        description="OpenLineage ingest and lineage graph queries (Marquez-compatible graph shape).",
    )
    app.state.settings = config
    app.state.store = LineageStore(store_url, engine=engine, graph_cache_nodes=config.graph_cache_nodes)
    app.state.spec_validator = spec_validator
    app.state.retention = RetentionSchedule(config)
    for router in (*ROUTERS, *extra_routers):
        app.include_router(router)
    app.include_router(lineage_ui_router())  # the lineage page at /ui (docs/ui.md)
    _add_error_handlers(app)
    return app


def _problem(code: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=code, headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(EventError)
    async def bad_event(_request: Request, error: EventError) -> JSONResponse:
        return _problem(status.HTTP_400_BAD_REQUEST, str(error))

    @app.exception_handler(NodeIdError)
    async def bad_node_id(_request: Request, error: NodeIdError) -> JSONResponse:
        return _problem(status.HTTP_400_BAD_REQUEST, str(error))

    @app.exception_handler(RequestValidationError)
    async def bad_parameters(_request: Request, error: RequestValidationError) -> JSONResponse:
        messages = [
            f"{'.'.join(str(part) for part in e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in error.errors()
        ]
        return _problem(status.HTTP_400_BAD_REQUEST, "; ".join(messages) or "invalid request")

    @app.exception_handler(StoreUnavailable)
    async def store_down(_request: Request, error: StoreUnavailable) -> JSONResponse:
        return _problem(status.HTTP_503_SERVICE_UNAVAILABLE, str(error), {"Retry-After": "30"})

    @app.exception_handler(OperationalError)
    async def store_failed(_request: Request, error: OperationalError) -> JSONResponse:
        reason = str(error.orig or error).strip().splitlines()[0][:300]
        return _problem(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"the lineage store is unavailable: {reason}", {"Retry-After": "30"}
        )
