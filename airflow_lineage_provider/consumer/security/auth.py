"""The one auth dependency every route of the consumer declares: :func:`requires`.

A route states the access level it needs; the app's guard (``app.state.guard``, see :mod:`.guards`)
resolves the request's credential to a :class:`~.access.Principal` or refuses it. Refused writes are
written to the audit log. The lineage page asks at :attr:`Access.PAGE`: a browser opening it without a
session is sent to the guard's login page instead of getting a JSON error.

Example::

    router = APIRouter(dependencies=[Depends(requires(Access.READ))])

    @router.get("/api/v1/things")
    async def things(principal: Reader) -> dict: ...  # the principal, for namespace-limited keys
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import PRINCIPAL_STATE, Access, Principal
from airflow_lineage_provider.consumer.security.guards import Guard

# Declared so the OpenAPI document (and /docs' "Authorize" button) shows both ways to send a credential;
# the guard reads the headers itself.
_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="A consumer API key.")
_bearer = HTTPBearer(auto_error=False, description="A consumer API key, or inside Airflow an Airflow JWT.")


class LoginRequired(Exception):
    """The lineage page was asked for without a session: the app answers with a redirect to ``url``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def guard_of(request: Request) -> Guard:
    """The app's guard."""
    return request.app.state.guard


async def authorize(request: Request, access: Access) -> Principal:
    """The principal of ``request`` for ``access`` (what :func:`requires` runs)."""
    guard = guard_of(request)
    try:
        principal = await guard.authorize(request, access)
    except HTTPException as refusal:
        if access >= Access.WRITE:
            audit.refused(request, access, refusal.status_code)
        # A person opening a page (a browser navigation asks for HTML) goes to the login page; the page's
        # scripts and a client fetching /openapi.json get the 401, not a login form in place of what they asked.
        if access is Access.PAGE and refusal.status_code == 401 and "text/html" in request.headers.get("accept", ""):
            url = guard.login_url(request)
            if url:
                raise LoginRequired(url) from None
        raise
    # Kept in the request's state, for what serves it outside the route's arguments (a walk's reads wait for the
    # events its principal logged: ``walk_limits.Walk.reading``).
    request.scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
    return principal


@cache
def requires(access: Access) -> Callable[..., Awaitable[Principal]]:
    """The FastAPI dependency for ``access`` (one function per level, so FastAPI resolves it once)."""

    async def dependency(
        request: Request,
        _key: Annotated[str | None, Security(_api_key_header)] = None,
        _token: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None,
    ) -> Principal:
        return await authorize(request, access)

    dependency.__name__ = f"requires_{access.name.lower()}"
    dependency.__qualname__ = dependency.__name__
    return dependency


Reader = Annotated[Principal, Depends(requires(Access.READ))]
Writer = Annotated[Principal, Depends(requires(Access.WRITE))]
Admin = Annotated[Principal, Depends(requires(Access.ADMIN))]
PageViewer = Annotated[Principal, Depends(requires(Access.PAGE))]
