"""Request bodies of every route but ingest: small, and whole within the upload deadline, before any handler runs.

Ingest reads its bodies itself (:mod:`.request_body`: up to ``max_body_bytes``, gzip, a total deadline). Every
other route takes at most a small JSON body (a tag's description) or none, but FastAPI reads a declared body
before the route's dependencies run — the credential check included — so without this an anonymous client could
send any amount, or trickle it for ever. :class:`OtherBodies` reads such a body first, at most
:data:`OTHER_BODY_BYTES`, within ``upload_seconds``, and hands it on; past either bound it answers (413 or 408,
the connection closed) before the app sees the request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Most bytes of a request body on a route other than ingest (a tag's description is at most 10,000 characters).
OTHER_BODY_BYTES = 64 * 1024
#: The ingest routes (after any mount prefix), whose handlers read and bound their bodies themselves.
INGEST_PATHS = ("/api/v1/lineage", "/api/v1/lineage/batch")


def _is_ingest(scope: Scope) -> bool:
    return scope["method"] == "POST" and scope["path"].rstrip("/").endswith(INGEST_PATHS)


class OtherBodies:
    """ASGI middleware: the body of a request to any route but ingest, read whole first (see the module)."""

    def __init__(self, app: ASGIApp, upload_seconds: float) -> None:
        self.app = app
        self.upload_seconds = upload_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_ingest(scope):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > OTHER_BODY_BYTES:
            await _refuse(scope, receive, send, 413, _too_large())
            return
        seconds = self.upload_seconds
        try:
            first = await _whole_body(receive, seconds)
        except _TooLarge:
            await _refuse(scope, receive, send, 413, _too_large())
            return
        except asyncio.TimeoutError:
            detail = f"the body did not arrive within {seconds:g} s (upload_seconds): the request was dropped"
            await _refuse(scope, receive, send, 408, detail)
            return
        await self.app(scope, _replay(first, receive), send)


class _TooLarge(Exception):
    pass


def _too_large() -> str:
    return f"the body is larger than this route accepts ({OTHER_BODY_BYTES} bytes)"


async def _whole_body(receive: Receive, seconds: float) -> Message:
    """The body as one ``http.request`` message (or the ``http.disconnect`` that came instead), within ``seconds``."""
    deadline = time.monotonic() + seconds
    parts: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise asyncio.TimeoutError
        message = await asyncio.wait_for(receive(), left)
        if message["type"] != "http.request":
            return message
        part = message.get("body", b"")
        size += len(part)
        if size > OTHER_BODY_BYTES:
            raise _TooLarge
        parts.append(part)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(parts), "more_body": False}


def _replay(first: Message, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives ``first`` once, then whatever the server sends (a disconnect, say)."""
    pending = [first]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    """Answer ``status`` and close the connection: the client is (or may be) mid-body."""
    await JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})(scope, receive, send)
