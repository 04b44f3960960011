"""Percent-encoded names in the paths of Feast's node routes: ``/graph/dataset/s3:%2F%2Flake/raw%2Forders``,
``/datasets/s3:%2F%2Flake/raw%2Forders/versions``.

The ASGI server decodes the path before routing, so a namespace or name holding ``/`` (every Airflow dataset's
namespace does) would break into segments and match no route: Feast's own consumer cannot address such a node.
:class:`GraphNodePaths` routes those paths by their encoded segments, as :mod:`..marquez.paths` does for
Marquez's paths, and the routes read their parameters back with :func:`..marquez.paths.segment`.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

#: The paths whose segments after the prefix name a node by namespace and name.
NODE_PREFIXES = ("/api/v1/lineage/openlineage/graph/", "/api/v1/lineage/openlineage/datasets/")


def encoded_segments(raw: bytes) -> str:
    """``raw`` decoded segment by segment, each segment's ``%`` and ``/`` escaped again (``%25``, ``%2F``)."""
    return "/".join(
        unquote_to_bytes(part).decode("utf-8", "replace").replace("%", "%25").replace("/", "%2F")
        for part in raw.split(b"/")
    )


class GraphNodePaths:
    """ASGI middleware: route Feast's node paths (:data:`NODE_PREFIXES`) by their encoded segments."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and any(prefix in scope["path"] for prefix in NODE_PREFIXES):
            raw = scope.get("raw_path")
            if raw:
                scope = {**scope, "path": encoded_segments(raw.split(b"?", 1)[0])}
        await self.app(scope, receive, send)
