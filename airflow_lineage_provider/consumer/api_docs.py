"""``GET /openapi.json`` and ``GET /docs`` (Swagger UI), served behind the auth dependency like every route.

FastAPI's own documentation routes take no dependencies, so the app turns them off and serves them here
at :attr:`~.access.Access.PAGE`: open to anyone standalone (they hold no lineage data, and the page that
asks for a key must load), a logged-in user inside Airflow.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires


def api_docs_router(app: FastAPI) -> APIRouter:
    """The two routes, for ``app``'s own OpenAPI document."""
    router = APIRouter(include_in_schema=False, dependencies=[Depends(requires(Access.PAGE))])

    @router.get("/openapi.json")
    async def openapi_document() -> JSONResponse:
        document: dict[str, Any] = app.openapi()
        return JSONResponse(document)

    @router.get("/docs")
    async def swagger_ui(request: Request) -> HTMLResponse:
        base = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(openapi_url=f"{base}/openapi.json", title=f"{app.title} - API docs")

    return router
