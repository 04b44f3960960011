"""Percent-encoded names in Marquez's paths: ``/api/v1/namespaces/postgres%3A%2F%2Fdb%3A5432/datasets/...``.

Marquez's clients and web UI put namespaces and dataset/job names in path segments, percent-encoded,
and names usually contain ``/`` (``postgres://db:5432``, ``s3://bucket/path``). The ASGI server decodes
the path before routing, so ``%2F`` would become a segment break and no route would match.
:class:`SegmentPaths` rebuilds the routed path from ``raw_path`` for the Marquez prefixes, keeping each
segment's ``/`` and ``%`` escaped (``%2F``, ``%25``); a route then reads its parameters through
:func:`segment`, which undoes exactly that. Other paths are left alone.

    @router.get("/api/v1/namespaces/{namespace}/jobs/{job}")
    async def get_job(namespace: PathName, job: PathName): ...   # plain text: "postgres://db:5432"
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import Depends, Request
from starlette.types import ASGIApp, Receive, Scope, Send

#: Paths whose segments may hold encoded names (after any mount prefix).
PREFIXES = ("/api/v1/namespaces/",)


def _segment_path(raw: bytes) -> str:
    """``raw`` decoded segment by segment (UTF-8, escaped or not), each segment's ``%`` and ``/`` escaped again."""
    return "/".join(
        unquote_to_bytes(part).decode("utf-8", "replace").replace("%", "%25").replace("/", "%2F")
        for part in raw.split(b"/")
    )


def segment(value: str) -> str:
    """A path parameter of a Marquez route as the plain name (``%2F`` → ``/``, ``%25`` → ``%``)."""
    return value.replace("%2F", "/").replace("%25", "%")


class SegmentPaths:
    """ASGI middleware: route Marquez paths by their encoded segments (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and any(prefix in scope["path"] for prefix in PREFIXES):
            raw = scope.get("raw_path")
            if raw:
                scope = {**scope, "path": _segment_path(raw.split(b"?", 1)[0])}
        await self.app(scope, receive, send)


def path_name(parameter: str) -> object:
    """A dependency giving path parameter ``parameter`` as the plain name."""

    def read(request: Request) -> str:
        return segment(request.path_params[parameter])

    return Depends(read)


Namespace = Annotated[str, path_name("namespace")]
"""The ``{namespace}`` path parameter, decoded."""
Dataset = Annotated[str, path_name("dataset")]
"""The ``{dataset}`` path parameter, decoded."""
Job = Annotated[str, path_name("job")]
"""The ``{job}`` path parameter, decoded."""
Field = Annotated[str, path_name("field")]
"""The ``{field}`` path parameter, decoded."""
