"""Reading an ingest request's body: bounded in size, in time and in decoding work.

* **Size**: ``max_body_bytes`` before and after gunzip (413).
* **Time**: the whole body must arrive within ``upload_seconds`` of the handler starting to read it, and no
  pause between two parts may last :data:`BODY_IDLE_SECONDS` (408, and the connection is closed), so a client
  trickling a large body cannot hold its bytes in memory for long.
* **Decoding**: gzip is inflated in a worker thread, never on the event loop, in time linear in the body: each
  member is fed to zlib through a bounded window (zlib copies what follows a member's end), and a body of more
  than :data:`MAX_GZIP_MEMBERS` members is refused (400).
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
import zlib
from collections.abc import AsyncIterator

from fastapi import HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

log = logging.getLogger(__name__)

#: Longest pause between two parts of a request body before the request is dropped (408), in seconds.
BODY_IDLE_SECONDS = 30.0
#: Most gzip members one body may hold (``cat a.gz b.gz`` makes two; producers send one).
MAX_GZIP_MEMBERS = 1000
#: Compressed bytes handed to zlib at a time: what it copies at most after a member ends.
GZIP_WINDOW = 64 * 1024
#: Zero bytes gzip allows after a member.
_PADDING = re.compile(rb"\x00*")
#: Sent with a 408: the client is mid-body, so the connection cannot carry another request.
_CLOSE = {"Connection": "close"}


def _too_large(limit: int) -> HTTPException:
    return HTTPException(
        status.HTTP_413_CONTENT_TOO_LARGE,
        detail=f"the body is larger than this consumer accepts ({limit} bytes): send fewer events per request",
    )


def _timed_out(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_408_REQUEST_TIMEOUT, detail=detail, headers=_CLOSE)


def _dropped(request: Request, idle: bool, upload_seconds: float) -> HTTPException:
    if not idle:  # the total deadline came first
        log.info("dropped %s %s: its body took over %g s", request.method, request.url.path, upload_seconds)
        return _timed_out(
            f"the body did not arrive within {upload_seconds:g} s (upload_seconds): the request was dropped"
        )
    return _timed_out(f"no part of the body arrived for {BODY_IDLE_SECONDS:.0f} s: the request was dropped")


def _disconnected(request: Request) -> HTTPException:
    log.info("a client disconnected while sending %s %s; nothing was stored", request.method, request.url.path)
    return HTTPException(status.HTTP_400_BAD_REQUEST, detail="the client disconnected mid-upload")


if sys.version_info >= (3, 11):

    async def _read_parts(request: Request, upload_seconds: float, limit: int) -> list[bytes]:
        """The body's parts (Starlette's ``request.stream()``) under one timer (``asyncio.timeout``), moved on
        after each part to :data:`BODY_IDLE_SECONDS` from now or the total deadline, whichever is first: a body
        that came with its head costs one timer, whatever its parts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + upload_seconds
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(min(deadline, loop.time() + BODY_IDLE_SECONDS)) as timer:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise _too_large(limit)
                    chunks.append(chunk)
                    timer.reschedule(min(deadline, loop.time() + BODY_IDLE_SECONDS))
        except TimeoutError:
            raise _dropped(request, loop.time() < deadline, upload_seconds) from None
        except ClientDisconnect:
            raise _disconnected(request) from None
        return chunks

else:  # Python 3.10: a timer per part

    async def _read_parts(request: Request, upload_seconds: float, limit: int) -> list[bytes]:
        """The body's parts, each within :data:`BODY_IDLE_SECONDS` and all within ``upload_seconds``."""
        deadline = time.monotonic() + upload_seconds
        parts: AsyncIterator[bytes] = request.stream().__aiter__()
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                chunk = await asyncio.wait_for(parts.__anext__(), min(BODY_IDLE_SECONDS, left))
            except StopAsyncIteration:
                return chunks
            except asyncio.TimeoutError:
                raise _dropped(request, left >= BODY_IDLE_SECONDS, upload_seconds) from None
            except ClientDisconnect:
                raise _disconnected(request) from None
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)


async def read_body(request: Request) -> bytes:
    """The request body, gunzipped (in a worker thread) when ``Content-Encoding: gzip``; 413 past
    ``max_body_bytes``, 408 past ``upload_seconds``."""
    settings = request.app.state.settings
    limit: int = settings.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = b"".join(await _read_parts(request, settings.upload_seconds, limit))
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail=f"Content-Encoding {encoding!r} is not supported: use gzip"
        )
    if not body:
        return body
    return await run_in_threadpool(gunzip, body, limit)


def gunzip(body: bytes, limit: int, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Every gzip member of ``body`` (RFC 1952 allows several, as ``cat a.gz b.gz`` makes), inflated, in time
    linear in ``body``; 413 past ``limit`` bytes, 400 when it is not gzip, ends mid-member or holds more than
    ``max_members`` members."""
    view = memoryview(body)
    end, position, members = len(body), 0, 0
    parts: list[bytes] = []
    size = 0
    while position < end:
        members += 1
        if members > max_members:
            raise HTTPException(
                status.HTTP_400_BAD_REQUEST,
                detail=f"the gzip body holds more than {max_members} members: compress the body as one member",
            )
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not inflater.eof:
            if position >= end:
                raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="the gzip body is cut short (truncated member)")
            window = view[position : position + GZIP_WINDOW]
            try:
                part = inflater.decompress(window, limit + 1 - size)
            except zlib.error as error:
                raise HTTPException(
                    status.HTTP_400_BAD_REQUEST, detail=f"the gzip body cannot be read: {error}"
                ) from None
            size += len(part)
            if size > limit or inflater.unconsumed_tail:
                raise _too_large(limit)
            parts.append(part)
            position += len(window) - len(inflater.unused_data)
        match = _PADDING.match(body, position)  # zero padding after a member
        position = match.end() if match else position
    return b"".join(parts)
