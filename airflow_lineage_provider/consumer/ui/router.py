"""The lineage page's routes: ``GET /ui`` (the page) and ``GET /ui/assets/<file>`` (its scripts and styles).

The page is static: hand-written HTML, CSS and JavaScript modules shipped in ``assets/`` and read once.
It calls the consumer's own API (``/api/v1/lineage``, ``/api/v1/search``, ...) relative to the path the
app is mounted at, which the page learns from the request's ``root_path`` (``/lineage`` inside Airflow,
empty standalone, or whatever a reverse proxy passes to uvicorn's ``--root-path``).
"""

from __future__ import annotations

import hashlib
import html
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.responses import HTMLResponse

from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import guard_of, requires

#: Where the page lives inside the consumer app.
UI_PATH = "/ui"

_MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

#: Everything the page loads comes from this app; nothing inline, nothing from elsewhere.
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)
_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class Asset:
    """One file of the page, with its media type and an ETag for revalidation."""

    body: bytes
    media_type: str
    etag: str


@cache
def _assets() -> dict[str, Asset]:
    folder = resources.files(__package__).joinpath("assets")
    found: dict[str, Asset] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _MEDIA_TYPES:
            body = entry.read_bytes()
            found[entry.name] = Asset(body, _MEDIA_TYPES[suffix], f'"{hashlib.sha256(body).hexdigest()[:20]}"')
    return found


@cache
def _page_template() -> str:
    return resources.files(__package__).joinpath("assets").joinpath("index.html").read_text(encoding="utf-8")


def page_html(base: str, auth_mode: str = "key", login_url: str = "") -> str:
    """The page for an app mounted at ``base`` (``""`` standalone, ``"/lineage"`` in Airflow).

    ``auth_mode`` tells the page how its API calls authenticate: ``key`` (it asks for a key when the
    server answers 401) or ``airflow`` (the session cookie; on 401 it links to ``login_url``).
    """
    values = {"{{BASE}}": base.rstrip("/"), "{{AUTH}}": auth_mode, "{{LOGIN}}": login_url}
    page = _page_template()
    for placeholder, value in values.items():
        page = page.replace(placeholder, html.escape(value, quote=True))
    return page


def lineage_ui_router() -> APIRouter:
    """A router serving the lineage page at ``/ui`` and its assets at ``/ui/assets/<file>``.

    Every route asks for :attr:`~..access.Access.PAGE` access: anyone standalone (the page asks for a key
    itself), a logged-in user inside Airflow (a browser without a session is sent to Airflow's login).
    Include it in a consumer app (``create_app(..., extra_routers=[lineage_ui_router()])``); inside
    Airflow the page is then at ``/lineage/ui``. Open ``/ui?nodeId=<node id>`` to start from a node, e.g.
    ``/ui?nodeId=dataset%3Awarehouse%3Aorders`` (the id URL-encoded, as any query parameter).
    """
    router = APIRouter(prefix=UI_PATH, include_in_schema=False, dependencies=[Depends(requires(Access.PAGE))])

    @router.get("", response_class=HTMLResponse)
    async def lineage_page(request: Request) -> HTMLResponse:
        guard = guard_of(request)
        login = guard.login_url(request) or ""
        return HTMLResponse(page_html(request.scope.get("root_path", ""), guard.mode, login), headers=_HEADERS)

    @router.get("/assets/{name}")
    async def lineage_page_asset(name: str, request: Request) -> Response:
        asset = _assets().get(name)
        if asset is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"the lineage page has no asset {name!r}")
        headers = {**_HEADERS, "ETag": asset.etag}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)

    return router
