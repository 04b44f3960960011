"""Percent-encoded names in the path of Feast's node graph route: ``/graph/dataset/s3:%2F%2Flake/raw%2Forders``.

The ASGI server decodes the path before routing, so a namespace or name holding ``/`` (every Airflow dataset's
namespace does) would break into segments and match no route: Feast's own consumer cannot address such a node.
:class:`GraphNodePaths` routes that one path by its encoded segments, as :mod:`..marquez.paths` does for
Marquez's paths, and the route reads its parameters back with :func:`..marquez.paths.segment`.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

#: The path whose last two segments are a namespace and a name.
GRAPH_NODE_PREFIX = "/api/v1/lineage/openlineage/graph/"


def encoded_segments(raw: bytes) -> str:
    """``raw`` decoded segment by segment, each segment's ``%`` and ``/`` escaped again (``%25``, ``%2F``)."""
    return "/".join(
        unquote_to_bytes(part).decode("utf-8", "replace").replace("%", "%25").replace("/", "%2F")
        for part in raw.split(b"/")
    )


class GraphNodePaths:
    """ASGI middleware: route ``GET .../openlineage/graph/{type}/{namespace}/{name}`` by its encoded segments."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and GRAPH_NODE_PREFIX in scope["path"]:
            raw = scope.get("raw_path")
            if raw:
                scope = {**scope, "path": encoded_segments(raw.split(b"?", 1)[0])}
        await self.app(scope, receive, send)
