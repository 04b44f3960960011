"""The consumer's FastAPI app: OpenLineage ingest, graph and column-lineage walks, listings, retention."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from airflow_lineage_provider.consumer.api_docs import api_docs_router
from airflow_lineage_provider.consumer.feast import GraphNodePaths
from airflow_lineage_provider.consumer.feast import router as feast_router
from airflow_lineage_provider.consumer.ingest.grouped_ingest import GroupedIngest, writers_for
from airflow_lineage_provider.consumer.ingest.service import RetentionSchedule, StoreUnavailable
from airflow_lineage_provider.consumer.limits.hosts import AllowedHosts
from airflow_lineage_provider.consumer.limits.other_bodies import OtherBodies
from airflow_lineage_provider.consumer.limits.path_limits import PathLimits
from airflow_lineage_provider.consumer.limits.stalled_readers import StalledReaders
from airflow_lineage_provider.consumer.limits.walk_limits import RETRY_AFTER_SECONDS, WalkLimiter, WalksBusy
from airflow_lineage_provider.consumer.marquez import routes_datasets as marquez_datasets
from airflow_lineage_provider.consumer.marquez import routes_events as marquez_events
from airflow_lineage_provider.consumer.marquez import routes_jobs as marquez_jobs
from airflow_lineage_provider.consumer.marquez.paths import SegmentPaths
from airflow_lineage_provider.consumer.nodeids import NodeIdError
from airflow_lineage_provider.consumer.routers import (
    datasets,
    events,
    ingest,
    jobs,
    namespaces,
    runs,
    search,
    sources,
    tags,
)
from airflow_lineage_provider.consumer.routers.graph import (
    column_lineage,
    dataset_conflicts,
    drift,
    graph_listing,
    graph_walks,
)
from airflow_lineage_provider.consumer.routers.operations import (
    ingest_log,
    reset,
    retention,
    stats,
)
from airflow_lineage_provider.consumer.security.auth import LoginRequired
from airflow_lineage_provider.consumer.security.guards import GuardFactory, KeyGuard
from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.write.deferred_apply import ApplyBacklog, ApplyBounds, IngestBacklog
from airflow_lineage_provider.consumer.store_view import PendingHeader
from airflow_lineage_provider.consumer.ui import lineage_ui_router
from airflow_lineage_provider.consumer.validation import EventError, TooManyEvents
from airflow_lineage_provider.version import __version__

#: The routers every consumer app serves, in OpenAPI order.
ROUTERS: tuple[APIRouter, ...] = (
    ingest.router,
    graph_walks.router,
    column_lineage.router,
    namespaces.router,
    jobs.router,
    marquez_jobs.router,
    datasets.router,
    dataset_conflicts.router,
    marquez_datasets.router,
    sources.router,
    tags.router,
    search.router,
    runs.router,
    marquez_events.router,  # before events: /api/v1/events/lineage is not the namespace 'lineage'
    events.router,
    stats.router,
    graph_listing.router,
    drift.router,
    retention.router,
    reset.router,
    ingest_log.router,
    feast_router,  # Feast's consumer API, /api/v1/lineage/openlineage/... (consumer/feast/)
)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """While the app serves: the retention timer (when ``retention_days`` is set), stopped on shutdown; then the
    store is disposed (with deferred apply, its applier applies what is pending first and ends).

    Runs under ``airflow-lineage serve`` and inside Airflow's API server, which enters the lifespan of the
    apps plugins mount; schedulers and workers that only import the plugin start nothing.
    """
    app.state.retention.start(app.state.store)
    try:
        yield
    finally:
        await run_in_threadpool(app.state.retention.stop)
        await run_in_threadpool(app.state.store.dispose)


def create_app(
    store_url: str,
    api_key: str | None = None,
    *,
    engine: Engine | None = None,
    extra_routers: Sequence[APIRouter] = (),
    guard: GuardFactory = KeyGuard,
    **settings: Any,
) -> FastAPI:
    """Build the lineage consumer app for the store at ``store_url``.

    Nothing connects until the first request, so building the app is cheap (the Airflow plugin builds it
    in every process that loads plugins). ``settings`` are the other fields of
    :class:`~airflow_lineage_provider.consumer.settings.ConsumerSettings` (``max_body_bytes``, ``strict``,
    ``spec_dir``, ``retention_days``, ``keys``, ``anonymous``, ...). ``engine`` replaces the engine built
    from ``store_url``; ``extra_routers`` are included after the built-in ones (for pages served by the
    same app), each behind the auth dependency it declares.

    Every route needs a credential (docs/security.md): ``keys`` (:class:`~.access.ApiKey` with scopes
    read, write, admin) and ``api_key`` (a write key) are checked by ``guard``, built from them and
    ``anonymous``: a :class:`~.guards.KeyGuard` by default, the auth manager's guard inside Airflow. A
    key-only app with neither keys nor ``anonymous`` would refuse everything: that is a ValueError.

    Example::

        keys = (ApiKey("producers", Access.WRITE, "..."), ApiKey("admin", Access.ADMIN, "..."))
        app = create_app("sqlite:////var/lib/lineage/lineage.db", keys=keys)
        uvicorn.run(app, host="127.0.0.1", port=6580)
    """
    config = ConsumerSettings(store_url=store_url, api_key=api_key, **settings)
    keyring = config.all_keys()
    if guard is KeyGuard and not keyring and config.anonymous is None:
        raise ValueError(
            "the consumer has no credentials configured: pass keys=[ApiKey(name, scope, secret), ...] "
            "(or api_key=...), or anonymous=Access.READ/WRITE/ADMIN to opt in to anonymous access"
        )
    spec_validator = None
    if config.strict:
        from airflow_lineage_provider.consumer.ingest.strict import SpecValidator

        spec_validator = SpecValidator(config.spec_dir or "")
    app = FastAPI(
        title="airflow-lineage-provider consumer",
        version=__version__,
        description="OpenLineage ingest and lineage graph queries (Marquez-compatible graph shape).",
        docs_url=None,
        openapi_url=None,
        redoc_url=None,
        lifespan=_lifespan,
    )
    app.state.settings = config
    app.state.guard = guard(keyring, config.anonymous)
    app.state.store = LineageStore(
        store_url,
        engine=engine,
        graph_cache_nodes=config.graph_cache_nodes,
        namespace_aliases=config.namespace_aliases.mapping,  # the store's groups follow this configuration
        ingest_apply=config.ingest_apply,
        apply_bounds=ApplyBounds(
            max_pending_events=config.ingest_log_max_events,
            max_pending_bytes=config.ingest_log_max_bytes,
            apply_timeout=config.ingest_apply_timeout_seconds,
        ),
    )
    #: Ingest requests that arrive together are committed together (grouped_ingest.py).
    app.state.ingest = GroupedIngest(
        app.state.store, writers=writers_for(app.state.store), group_wait=config.ingest_group_wait_ms / 1000
    )
    app.state.spec_validator = spec_validator
    app.state.retention = RetentionSchedule(config)
    #: Other spellings of namespaces, read by the store's queries (docs/consumer.md, "Namespace aliases").
    app.state.namespace_aliases = config.namespace_aliases
    app.state.walks = WalkLimiter(
        config.max_concurrent_walks, config.max_waiting_walks, config.walk_answer_bytes, config.walk_timeout_seconds
    )
    app.add_middleware(SegmentPaths)  # Marquez's percent-encoded names in paths (marquez_paths.py)
    app.add_middleware(GraphNodePaths)  # and in the path of Feast's node graph (consumer/feast/paths.py)
    app.add_middleware(OtherBodies, upload_seconds=config.upload_seconds)  # small bodies, read before auth runs
    app.add_middleware(PathLimits)  # before routing: no NUL or over-long segment reaches a store (path_limits.py)
    app.add_middleware(PendingHeader)  # answers read behind deferred apply say how far (store_view.py)
    if config.allowed_hosts:
        app.add_middleware(AllowedHosts, hosts=config.allowed_hosts)
    # Outermost of the app's own: every send of every answer has a deadline (stalled_readers.py).
    app.add_middleware(StalledReaders, stall_seconds=config.stall_seconds)
    for router in (*ROUTERS, *extra_routers):
        app.include_router(router)
    app.include_router(lineage_ui_router())  # the lineage page at /ui (docs/ui.md)
    app.include_router(api_docs_router(app))  # /openapi.json and /docs, behind the same dependency
    _add_error_handlers(app)
    return app


def _problem(code: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=code, headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(LoginRequired)
    async def login_required(_request: Request, error: LoginRequired) -> RedirectResponse:
        return RedirectResponse(error.url, status_code=status.HTTP_303_SEE_OTHER)

    @app.exception_handler(TooManyEvents)
    async def too_many(_request: Request, error: TooManyEvents) -> JSONResponse:
        return _problem(status.HTTP_413_CONTENT_TOO_LARGE, str(error))

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

    @app.exception_handler(ApplyBacklog)
    async def apply_behind(_request: Request, error: ApplyBacklog) -> JSONResponse:
        return _problem(status.HTTP_503_SERVICE_UNAVAILABLE, str(error), {"Retry-After": "30"})

    @app.exception_handler(IngestBacklog)
    async def log_full(_request: Request, error: IngestBacklog) -> JSONResponse:
        return _problem(status.HTTP_503_SERVICE_UNAVAILABLE, str(error), {"Retry-After": str(error.retry_after)})

    @app.exception_handler(WalksBusy)
    async def walks_busy(_request: Request, error: WalksBusy) -> JSONResponse:
        return _problem(status.HTTP_503_SERVICE_UNAVAILABLE, str(error), {"Retry-After": str(RETRY_AFTER_SECONDS)})

    @app.exception_handler(PoolTimeout)
    async def store_busy(_request: Request, _error: PoolTimeout) -> JSONResponse:
        # Every pooled connection is in use: a transient overload, never the client's fault (a 4xx here
        # would make OpenLineage's HTTP transport drop the event instead of retrying).
        return _problem(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the lineage store is busy (every connection is in use): retry shortly",
            {"Retry-After": "5"},
        )

    @app.exception_handler(OperationalError)
    async def store_failed(_request: Request, error: OperationalError) -> JSONResponse:
        reason = str(error.orig or error).strip().splitlines()[0][:300]
        return _problem(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"the lineage store is unavailable: {reason}", {"Retry-After": "30"}
        )
