"""One check of every request's path and query before routing: nothing a store cannot hold reaches it.

Path segments and query values become names and namespaces the routes look up. PostgreSQL refuses a text value
holding NUL (a 500 with a traceback, where SQLite quietly finds nothing), and no name or namespace is longer than
:data:`~airflow_lineage_provider.consumer.validation.MAX_NAME_LENGTH` characters. :class:`PathLimits` answers 400
naming the problem for:

* a path segment or a query parameter holding NUL (``%00``);
* a path segment longer than a name can be;
* a path longer than :data:`MAX_PATH_BYTES` (before decoding).

A path without ``%`` and a query without ``%00`` (every ingest request, most reads) costs two byte searches.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from airflow_lineage_provider.consumer.validation import MAX_NAME_LENGTH

#: Longest request path (as sent, percent-encoded) the consumer reads: a namespace and a name at their limits,
#: each fully percent-encoded, with the route's own segments.
MAX_PATH_BYTES = 4 * 3 * MAX_NAME_LENGTH


def path_problem(raw_path: bytes, query: bytes) -> str | None:
    """What is wrong with a request's raw path and query string for the consumer, or None."""
    if len(raw_path) > MAX_PATH_BYTES:
        return f"the path is {len(raw_path)} bytes long; at most {MAX_PATH_BYTES} are read"
    if b"%00" in query or b"\x00" in query:
        return "a query parameter holds NUL (%00): no name, namespace or value the consumer stores can"
    if b"%" not in raw_path and b"\x00" not in raw_path and len(raw_path) <= MAX_NAME_LENGTH:
        return None
    for index, part in enumerate(raw_path.split(b"/")):
        segment = unquote_to_bytes(part) if b"%" in part else part
        if b"\x00" in segment:
            return f"path segment {index} holds NUL (%00): no name or namespace the consumer stores can"
        length = len(segment.decode("utf-8", "replace"))
        if length > MAX_NAME_LENGTH:
            return (
                f"path segment {index} is {length} characters long: names and namespaces hold at most {MAX_NAME_LENGTH}"
            )
    return None


class PathLimits:
    """ASGI middleware: 400 for a request whose path or query the consumer could not look up (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw_path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
            problem = path_problem(raw_path.split(b"?", 1)[0], scope.get("query_string", b""))
            if problem is not None:
                await JSONResponse({"detail": problem}, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)
