"""Listings refuse query parameters they do not take: a 400 naming them, never a filter silently ignored.

A listing asked with a misspelt or unsupported filter (``GET /api/v1/events?job=load``) would otherwise answer
every item, as if the filter had matched them all. :data:`KnownQuery`, put in a listing route's
``dependencies``, answers 400 naming the unknown parameters and the ones the route takes. The names allowed
are the route's own declared query parameters (its aliases, with those of its dependencies: ``limit``,
``offset``, ...), as the app's OpenAPI description lists them for the route FastAPI matched, so a parameter
added to a route is allowed at once.
Every parameter Marquez's web UI and Python client send to the listings is declared by the routes
(``../shared/spec/marquez``; tested in ``tests/test_consumer_queries.py``).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.routing import APIRoute

#: A path parameter's converter in a route's path (``{namespace:path}``).
_CONVERTER = re.compile(r"\{(\w+):\w+\}")


def declared_query_names(app: FastAPI, route: APIRoute, method: str) -> frozenset[str] | None:
    """The query parameter names ``route`` declares for ``method``, its dependencies' included (by alias), as the
    app's OpenAPI description lists them (FastAPI builds it once and keeps it); None for a route the description
    leaves out (a trailing-slash twin is looked up without its slash)."""
    paths: dict[str, Any] = app.openapi().get("paths", {})
    path = _CONVERTER.sub(r"{\1}", route.path)  # OpenAPI names /{namespace:path} as /{namespace}
    described = paths.get(path) or paths.get(path.rstrip("/"))
    operation = (described or {}).get(method.lower())
    if operation is None:
        return None
    return frozenset(param["name"] for param in operation.get("parameters", []) if param.get("in") == "query")


def refuse_unknown_query(request: Request) -> None:
    """400 naming the query parameters the matched route does not declare (and the ones it does)."""
    route = request.scope.get("route")
    app = request.scope.get("app")
    if not isinstance(route, APIRoute) or not isinstance(app, FastAPI):
        return
    allowed = declared_query_names(app, route, request.method)
    if allowed is None:
        return
    unknown = sorted({name for name in request.query_params if name not in allowed})
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"unknown query parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
            f"{route.path} takes {takes}",
        )


#: A listing route's dependency (``dependencies=[KnownQuery]``): unknown query parameters are a 400.
KnownQuery = Depends(refuse_unknown_query)
