"""Listings refuse query parameters they do not take: a 400 naming them, never a filter silently ignored.

A listing asked with a misspelt or unsupported filter (``GET /api/v1/events?job=load``) would otherwise answer
every item, as if the filter had matched them all. :data:`KnownQuery`, put in a listing route's
``dependencies``, answers 400 naming the unknown parameters and the ones the route takes. The names allowed
are the route's own declared query parameters (its aliases, with those of its dependencies: ``limit``,
``offset``, ...), read from the route FastAPI matched, so a parameter added to a route is allowed at once.
Every parameter Marquez's web UI and Python client send to the listings is declared by the routes
(``../shared/spec/marquez``; tested in ``tests/test_consumer_queries.py``).
"""

from __future__ import annotations

from weakref import ReferenceType, ref

from fastapi import Depends, HTTPException, Request, status
from fastapi.dependencies.utils import get_flat_dependant
from fastapi.routing import APIRoute

#: The query names each route takes, computed once per route: by ``id`` (routes compare by value, so they are
#: no dict keys), with a weak reference telling a live route from a new one given a dead one's id.
_DECLARED: dict[int, tuple[ReferenceType[APIRoute], frozenset[str]]] = {}


def declared_query_names(route: APIRoute) -> frozenset[str]:
    """The query parameter names ``route`` declares, its dependencies' included (by alias)."""
    known = _DECLARED.get(id(route))
    if known is not None and known[0]() is route:
        return known[1]
    names = frozenset(param.alias for param in get_flat_dependant(route.dependant).query_params)
    key = id(route)
    _DECLARED[key] = (ref(route, lambda _: _DECLARED.pop(key, None)), names)
    return names


def refuse_unknown_query(request: Request) -> None:
    """400 naming the query parameters the matched route does not declare (and the ones it does)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    allowed = declared_query_names(route)
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
