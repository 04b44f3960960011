"""Per-process bounds on graph walks: how many are computed at once, how many wait, how many answer bytes
are held until their clients have read them.

A walk of ``maxNodes=100000`` costs about 20 MB of answer and a core for a second. Without bounds, 16 at
once took the server to 1.2 GB and delayed every other request by seconds, and clients that never read
their answers kept them all in memory. Here a walk runs in a worker thread only when one of
``max_concurrent_walks`` turns is free; up to ``max_waiting_walks`` more wait for a turn, and past that
a walk is answered 503 with ``Retry-After`` (never queued without bound). An answer's bytes count against
``walk_answer_bytes`` from when it is built until it has been sent (or its client has gone); a walk that
would go past it is answered 503 too. ``airflow-lineage serve`` drops a connection whose client stops
reading for a while (:mod:`.http_protocol`), which returns those bytes.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

#: Seconds a client is told to wait before retrying a refused walk.
RETRY_AFTER_SECONDS = 5


class WalksBusy(RuntimeError):
    """Every walk turn is taken and the queue is full, or answers in flight hold their byte budget."""


class WalkLimiter:
    """Runs walks in worker threads within the bounds the module describes."""

    def __init__(self, concurrent: int, waiting: int, answer_bytes: int) -> None:
        self.concurrent, self.waiting, self.answer_bytes = concurrent, waiting, answer_bytes
        self._turns: anyio.CapacityLimiter | None = None
        self._lock = threading.Lock()
        self._admitted = 0
        self._held_bytes = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of walk answers built and not yet sent."""
        return self._held_bytes

    async def answer(self, walk: Callable[..., bytes], *args: Any) -> Response:
        """Run ``walk(*args)`` (returning the answer's JSON bytes) in a turn and answer it.

        Raises:
            WalksBusy: no turn is free and ``waiting`` walks already wait, or the answer would take the
                bytes in flight past ``answer_bytes``.
        """
        with self._lock:
            if self._admitted >= self.concurrent + self.waiting:
                raise WalksBusy(
                    f"{self.concurrent} lineage walks are running and {self.waiting} waiting: retry shortly"
                )
            self._admitted += 1
        try:
            if self._turns is None:  # created on the event loop that serves the app
                self._turns = anyio.CapacityLimiter(self.concurrent)
            body = await anyio.to_thread.run_sync(functools.partial(walk, *args), limiter=self._turns)
        finally:
            with self._lock:
                self._admitted -= 1
        self._hold(len(body))
        return HeldAnswer(body, release=functools.partial(self._release, len(body)))

    def _hold(self, size: int) -> None:
        with self._lock:
            if self._held_bytes and self._held_bytes + size > self.answer_bytes:
                raise WalksBusy(
                    f"lineage answers of {self._held_bytes} bytes are still being sent to their clients "
                    f"(at most {self.answer_bytes} are held): retry shortly, or ask for fewer nodes (maxNodes)"
                )
            self._held_bytes += size

    def _release(self, size: int) -> None:
        with self._lock:
            self._held_bytes -= size


#: Bytes handed to the server per write: it waits for the client to take each before the next.
SEND_CHUNK = 256 * 1024


class HeldAnswer(Response):
    """A JSON answer sent in parts, whose bytes return to the walk budget once sent or once sending stops.

    In parts because the server buffers whatever it is given at once: one write of the whole answer
    would return immediately, leaving the bytes in the connection's buffer, uncounted, for as long as the
    client does not read them. Written part by part, the answer stays counted until the client took it.
    """

    media_type = "application/json"

    def __init__(self, body: bytes, release: Callable[[], None]) -> None:
        super().__init__(body)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            body = memoryview(self.body)
            for start in range(0, max(len(body), 1), SEND_CHUNK):
                end = start + SEND_CHUNK
                await send({"type": "http.response.body", "body": bytes(body[start:end]), "more_body": end < len(body)})
        finally:
            self._release()
