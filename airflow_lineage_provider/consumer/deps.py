"""FastAPI dependencies shared by the routers: the store, the settings, paging and the raw body."""

from __future__ import annotations

import asyncio
import logging
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from typing import Annotated, Any

import msgspec
from fastapi import Depends, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore

log = logging.getLogger(__name__)


def get_store(request: Request) -> LineageStore:
    """The app's lineage store."""
    return request.app.state.store


def get_settings(request: Request) -> ConsumerSettings:
    """The app's settings."""
    return request.app.state.settings


Store = Annotated[LineageStore, Depends(get_store)]
Settings = Annotated[ConsumerSettings, Depends(get_settings)]
#: Text parameters may not hold NUL: no store can compare with it (PostgreSQL refuses the statement).
NO_NUL = r"^[^\x00]*$"
Limit = Annotated[int, Query(ge=1, le=1000, description="Page size.")]
Namespace = Annotated[str | None, Query(max_length=5000, pattern=NO_NUL, description="Only this namespace.")]
Contains = Annotated[str | None, Query(max_length=1000, pattern=NO_NUL, description="Only names containing this text.")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="Items to skip.")]


async def stored_answer(read: Callable[[], Any]) -> Response:
    """Run ``read`` (a store read returning JSON-ready values) off the event loop and answer its JSON.

    Encoded with msgspec rather than through the route's pydantic response model: the values are events and
    facets validated at ingest, and re-validating them on the way out let one stored event that pydantic
    cannot serialize (a facet nested past its 255 levels) break every listing that shows it. The response
    model still documents the shape in the OpenAPI description.
    """
    body = await run_in_threadpool(lambda: msgspec.json.encode(read()))
    return Response(body, media_type="application/json")


def utc_bound(value: datetime | None, name: str) -> datetime | None:
    """A time parameter in UTC; 400 naming it when UTC cannot represent it (``0001-01-01T00:00:00+14:00``)."""
    if value is None:
        return None
    try:
        return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    except OverflowError:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"{name}: {value.isoformat()} is outside the times UTC can represent (years 1 to 9999)",
        ) from None


def _too_large(limit: int) -> HTTPException:
    return HTTPException(
        status.HTTP_413_CONTENT_TOO_LARGE,
        detail=f"the body is larger than this consumer accepts ({limit} bytes): send fewer events per request",
    )


#: Longest pause between two parts of a request body before the request is dropped (408), in seconds.
BODY_IDLE_SECONDS = 30.0


if sys.version_info >= (3, 11):

    async def _next_part(parts: AsyncIterator[bytes]) -> bytes:
        """The next part of a body, within :data:`BODY_IDLE_SECONDS` (``asyncio.timeout``: no task per part,
        unlike ``wait_for`` before Python 3.12; most bodies are one part, read at once)."""
        async with asyncio.timeout(BODY_IDLE_SECONDS):
            return await parts.__anext__()

else:  # Python 3.10

    async def _next_part(parts: AsyncIterator[bytes]) -> bytes:
        """The next part of a body, within :data:`BODY_IDLE_SECONDS`."""
        return await asyncio.wait_for(parts.__anext__(), BODY_IDLE_SECONDS)


def _received_whole(request: Request) -> bool:
    """Whether the server holds the whole body already, so reading it cannot wait: uvicorn's request cycle (behind
    the ASGI ``receive`` callable) has seen the body end. A small body usually comes with its head; the idle timer
    per part then costs ~4% of a single-event request's CPU for nothing. Another server, or a ``receive``
    wrapped by a middleware: False (the timer is used)."""
    cycle = getattr(request.receive, "__self__", None)
    event = getattr(cycle, "message_event", None)
    return getattr(cycle, "more_body", True) is False and isinstance(event, asyncio.Event) and event.is_set()


async def _at_once(parts: AsyncIterator[bytes]) -> bytes:
    return await parts.__anext__()


async def _chunks(request: Request) -> AsyncIterator[bytes]:
    """The body's parts as they arrive; 408 after :data:`BODY_IDLE_SECONDS` without one, and one log line
    (no traceback) when the client goes away mid-upload."""
    parts = request.stream().__aiter__()
    next_part = _next_part if not _received_whole(request) else _at_once
    while True:
        try:
            chunk = await next_part(parts)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise HTTPException(
                status.HTTP_408_REQUEST_TIMEOUT,
                detail=f"no part of the body arrived for {BODY_IDLE_SECONDS:.0f} s: the request was dropped",
            ) from None
        except ClientDisconnect:
            log.info("a client disconnected while sending %s %s; nothing was stored", request.method, request.url.path)
            raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="the client disconnected mid-upload") from None
        yield chunk


async def read_body(request: Request) -> bytes:
    """The request body, gunzipped when ``Content-Encoding: gzip``; 413 past ``max_body_bytes``."""
    limit: int = request.app.state.settings.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in _chunks(request):
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail=f"Content-Encoding {encoding!r} is not supported: use gzip"
        )
    return gunzip(body, limit)


def gunzip(body: bytes, limit: int) -> bytes:
    """Every gzip member of ``body`` (RFC 1952 allows several, as ``cat a.gz b.gz`` makes), inflated;
    413 past ``limit`` bytes, 400 when it is not gzip or ends mid-member."""
    parts: list[bytes] = []
    size, rest = 0, body
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(rest, limit + 1 - size)
        except zlib.error as error:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=f"the gzip body cannot be read: {error}") from None
        size += len(part)
        if size > limit or inflater.unconsumed_tail:
            raise _too_large(limit)
        if not inflater.eof:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="the gzip body is cut short (truncated member)")
        parts.append(part)
        rest = inflater.unused_data.lstrip(b"\x00")  # gzip allows zero padding after a member
    return b"".join(parts)
