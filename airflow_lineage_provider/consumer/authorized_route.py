"""A route class for the hot write endpoints: the one auth check, then the endpoint, without FastAPI's
per-request dependency resolution.

FastAPI resolves a route's dependency tree on every request (``solve_dependencies``: the request, the two
credential-header declarations, the auth dependency): about 5% of a single-event ingest request's CPU time in
the server. For ``POST /api/v1/lineage`` and ``/api/v1/lineage/batch``, whose only dependency is the auth
dependency (:func:`.auth.requires`), :class:`AuthorizedRoute` runs what that dependency runs — :func:`.auth.authorize`
at the level it declares — and calls the endpoint as ``endpoint(request, principal)``; what the endpoint returns
is answered as it is when a Response, else as JSON (no response-model validation: the ingest endpoints answer
with their own responses). The route still declares
the dependency (the OpenAPI description, the security tests and every other reader of the route see it); a route
of this class without it, or with any other dependency, is refused when it is built.

Example::

    router = APIRouter(dependencies=[Depends(requires(Access.WRITE))], route_class=AuthorizedRoute)

    @router.post("/api/v1/things")
    async def post_thing(request: Request, principal: Writer) -> Any: ...
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from airflow_lineage_provider.consumer.access import Access
from airflow_lineage_provider.consumer.auth import authorize, requires


def _declared_access(route: APIRoute) -> Access:
    """The level the route's one auth dependency asks for; TypeError when it declares anything else."""
    levels: dict[Any, Access] = {requires(level): level for level in Access}
    found = {levels.get(dependency.call) for dependency in route.dependant.dependencies}
    if len(found) != 1 or None in found:
        raise TypeError(
            f"{route.path}: an AuthorizedRoute takes exactly one dependency, the auth dependency requires(...) "
            f"(declared on the route, its router or as the principal parameter); found "
            f"{[getattr(d.call, '__name__', d.call) for d in route.dependant.dependencies]}"
        )
    (level,) = found
    assert level is not None
    return level


class AuthorizedRoute(APIRoute):
    """An API route answered by ``endpoint(request, principal)`` once :func:`.auth.authorize` has let the
    request through at the level of the route's auth dependency (see the module)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.access = _declared_access(self)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint, access, code = self.endpoint, _declared_access(self), self.status_code or 200

        async def handler(request: Request) -> Response:
            principal = await authorize(request, access)
            answer = await endpoint(request, principal)
            if isinstance(answer, Response):
                return answer
            return JSONResponse(jsonable_encoder(answer), status_code=code)  # not the response model's validation

        return handler
