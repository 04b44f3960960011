"""Answers a client stops reading: each part must be handed to the server within ``stall_seconds``.

A server buffers what an app sends; once a connection's buffer is full (the client reads nothing), the server's
ASGI ``send`` waits until the client reads again — for ever, if it never does, holding the answer's remaining
parts (a graph walk's answer is sent in parts, :class:`.walk_limits.HeldAnswer`, counted against the answer
budget until sent). :class:`StalledReaders` is a pure ASGI middleware that gives every ``send`` a deadline: when
one has not returned within ``stall_seconds``, the response is abandoned — the waiting ``send`` is cancelled, the
app's handler gets :class:`ClientStalled` at that ``send`` (its ``finally`` blocks run: the answer's bytes
return to the budget), and the middleware returns without completing the response, so the server closes the
connection (uvicorn logs ``ASGI callable returned without completing response.``).

What stays is what the server had already handed on for that connection — the socket's send buffer in the
operating system (up to ``net.ipv4.tcp_wmem``'s maximum, 4 MiB by default on Linux), the transport's high-water
mark (64 KiB on asyncio) and the one part being sent (:data:`.walk_limits.SEND_CHUNK`) — until the client reads it
or the connection dies: a server closing a connection flushes its buffer first, and ASGI offers an app no way to
drop it unsent.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class ClientStalled(Exception):
    """Raised at a ``send`` that did not return within ``stall_seconds``: the client stopped reading."""


if sys.version_info >= (3, 11):

    async def _sent(send: Send, message: Message, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):  # one timer, no task
                await send(message)
        except TimeoutError:
            raise ClientStalled(f"the client read nothing of the answer for {seconds:g} s") from None

else:  # Python 3.10

    async def _sent(send: Send, message: Message, seconds: float) -> None:
        try:
            await asyncio.wait_for(send(message), seconds)
        except asyncio.TimeoutError:
            raise ClientStalled(f"the client read nothing of the answer for {seconds:g} s") from None


class StalledReaders:
    """ASGI middleware: a deadline of ``stall_seconds`` on every ``send`` of an HTTP response (see the module)."""

    def __init__(self, app: ASGIApp, stall_seconds: float) -> None:
        if not stall_seconds > 0:
            raise ValueError(f"stall_seconds must be more than 0, got {stall_seconds}")
        self.app = app
        self.stall_seconds = stall_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seconds = self.stall_seconds

        async def timed_send(message: Message) -> None:
            await _sent(send, message, seconds)

        try:
            await self.app(scope, receive, timed_send)
        except ClientStalled as stalled:
            log.info("abandoned the answer to %s %s: %s", scope.get("method"), scope.get("path"), stalled)
