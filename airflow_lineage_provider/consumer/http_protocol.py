"""uvicorn's HTTP protocol with the two timeouts it lacks, for ``airflow-lineage serve``.

uvicorn closes a keep-alive connection that stays idle after a response, but a connection that never
completes a request head (a fresh one that sends nothing, or one trickling headers) is kept forever, and
so is one whose client stops reading a large answer (the answer stays in memory). This protocol closes:

* a connection that has not sent a complete request head within ``head_seconds`` of opening, or of the
  previous response ending;
* a connection whose client has read nothing of an answer for ``stall_seconds`` while the answer waits
  in the write buffer (uvicorn pauses writing when the buffer is full).

It subclasses whichever protocol uvicorn would pick (httptools when installed, else h11) and only adds
timers, and writes a response's head together with its first body part (:class:`HeadWithBody`): uvicorn writes
them one after the other, two ``send`` calls and two TCP segments per answer, where one does — a sixth of a
single-event ingest request's CPU time in the server went to those writes. Request handling is uvicorn's own.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # uvicorn without httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


def guarded_protocol(head_seconds: float, stall_seconds: float) -> type[Any]:
    """The protocol class to pass as uvicorn's ``http=``, with these timeouts."""
    return type(
        "GuardedHttpProtocol", (GuardedHttpProtocol,), {"head_seconds": head_seconds, "stall_seconds": stall_seconds}
    )


class GuardedHttpProtocol(_Base):
    """uvicorn's HTTP protocol closing connections that never send a request head or stop reading."""

    head_seconds: float
    stall_seconds: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._waiting_after: Any = None
        super().connection_made(HeadWithBody(transport))  # type: ignore[arg-type]
        self._await_head()

    def _await_head(self) -> None:
        """Start the head timer; a request cycle other than ``self.cycle`` now means a head arrived."""
        self._cancel_head()
        self._waiting_after = self.cycle
        self._head_timer = self.loop.call_later(self.head_seconds, self._drop, "no complete request head")

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._head_timer is not None and self.cycle is not None and self.cycle is not self._waiting_after:
            self._cancel_head()

    def on_response_complete(self) -> None:
        self.transport.flush()  # type: ignore[attr-defined]  # a head without a body part (HEAD, 204)
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.stall_seconds, self._drop, "the client stopped reading")

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().connection_lost(exc)

    def _drop(self, why: str) -> None:
        """Close the connection now, discarding anything unsent."""
        self._head_timer = self._stall_timer = None
        if not self.transport.is_closing():
            self.logger.debug("closing an HTTP connection: %s", why)
            self.transport.abort()


class HeadWithBody:
    """A transport that holds a response head (uvicorn's ``HTTP/1.1 <status>`` line and headers, not a 1xx
    interim answer) back until the next write, and writes both at once.

    Anything held is written before anything else and on every other way out (:meth:`flush`, which the protocol
    calls when a response is complete, ``close``, ``write_eof``), so bytes are never reordered or lost; the
    worst a body part that happens to look like a head can meet is waiting for the next write. Every other
    attribute is the wrapped transport's.
    """

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held = b""

    def write(self, data: bytes) -> None:
        if self._held:
            data, self._held = self._held + data, b""
        elif data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.1 1") and data.endswith(b"\r\n\r\n"):
            self._held = data
            return
        self._transport.write(data)

    def flush(self) -> None:
        """Write what is held, if anything."""
        if self._held:
            held, self._held = self._held, b""
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
