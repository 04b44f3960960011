"""uvicorn's HTTP protocol with the two timeouts it lacks, for ``airflow-lineage serve``.

uvicorn closes a keep-alive connection that stays idle after a response, but a connection that never
completes a request head (a fresh one that sends nothing, or one trickling headers) is kept forever, and
so is one whose client stops reading a large answer (the answer stays in memory). This protocol closes:

* a connection that has not sent a complete request head within ``head_seconds`` of opening, or of the
  previous response ending;
* a connection whose client has read nothing of an answer for ``stall_seconds`` while the answer waits
  in the write buffer (uvicorn pauses writing when the buffer is full).

It subclasses whichever protocol uvicorn would pick (httptools when installed, else h11) and only adds
timers; request handling is uvicorn's own.
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
        super().connection_made(transport)
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
