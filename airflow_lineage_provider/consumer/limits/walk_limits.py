"""Per-process bounds on graph walks: how many are computed at once, how many wait, how long one may take, and
how many answer bytes are held until their clients have read them.

A walk of ``maxNodes=100000`` costs about 20 MB of answer and a core for a second or more. Here a walk runs in a
worker thread only when one of ``max_concurrent_walks`` turns is free; up to ``max_waiting_walks`` more wait for
a turn, and past that a walk is answered 503 with ``Retry-After`` (never queued without bound).

A walk nobody waits for any more is stopped: when its client disconnects (seen on the ASGI ``receive`` channel,
``http.disconnect``), or when ``walk_timeout_seconds`` have passed since it was admitted. Waiting for a turn, it
leaves the queue at once. Running, its statement is cancelled in the database through the driver's public call
— ``cancel()`` of a psycopg connection (PostgreSQL's cancel request), ``interrupt()`` of a ``sqlite3``
connection — sent again every :data:`INTERRUPT_SECONDS` until the walk's thread ends, so a statement that began
between two of them is cancelled too; the walk also checks between its steps (:meth:`Walk.check`). The cancelled
statement fails in the walk's thread, its transaction is rolled back and the connection goes back to the pool
as any other whose statement failed. A walk past its time is answered 504 (503 with ``Retry-After`` when it was
still waiting for a turn), naming the limit.

An answer's bytes count against ``walk_answer_bytes`` from when it is built until it has been sent (or its client
has gone); a walk that would go past it is answered 503 too. Listings count against the same budget
(:mod:`.answer_limits`). An answer whose client stops reading for ``stall_seconds`` is abandoned
(:mod:`.stalled_readers`), which returns those bytes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from airflow_lineage_provider.consumer.security.access import PRINCIPAL_STATE, Principal

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from airflow_lineage_provider.consumer.store import LineageStore

log = logging.getLogger(__name__)

#: Seconds a client is told to wait before retrying a refused walk.
RETRY_AFTER_SECONDS = 5
#: Seconds between two interrupts of a stopped walk's connection, until its thread ends.
INTERRUPT_SECONDS = 0.05
#: Seconds after which a walk's client is watched: a disconnect sooner is seen when the walk is answered.
WATCH_AFTER_SECONDS = 0.05
#: Why a walk was stopped.
CLIENT_GONE, TIME_UP = "the client disconnected", "walk_timeout_seconds passed"


class WalksBusy(RuntimeError):
    """Every walk turn is taken and the queue is full, or answers in flight hold their byte budget."""


class WalkStopped(RuntimeError):
    """Raised in a walk's thread at its next step once it was stopped (its client gone or its time up)."""


class _Unstarted(Exception):
    """A walk stopped while it waited for a turn."""


class Walk:
    """One admitted walk, shared by its thread and the event loop: the connection it reads on (so that its
    statement can be cancelled from the loop) and why it was stopped, if it was."""

    def __init__(self, state: dict[str, object] | None = None) -> None:
        #: The request's ASGI state (where a read behind deferred apply notes how far: ``store_view.PendingHeader``).
        self.state: dict[str, object] = {} if state is None else state
        #: Why the walk was stopped (:data:`CLIENT_GONE`, :data:`TIME_UP`); None while it is wanted.
        self.stopped: str | None = None
        #: Cancels the turn's wait while the walk waits for one.
        self.waiting: anyio.CancelScope | None = None
        #: The limiter's timer (to start watching, then to stop the walk when its time is up), the task watching
        #: its client, and the one interrupting its connection once it was stopped while running.
        self.timer: asyncio.TimerHandle | None = None
        self.watcher: asyncio.Task[None] | None = None
        self.interrupting: asyncio.Task[None] | None = None
        self._lock = threading.Lock()
        self._cancel: Callable[[], Any] | None = None

    @contextmanager
    def reading(
        self, store: LineageStore, behind: Callable[[int], None] | None = None, reader: str | None = None
    ) -> Iterator[Connection]:
        """``store.read(behind=behind, reader=reader)``, with the connection registered for :meth:`interrupt` while
        the block runs (it is unregistered before the transaction ends and the connection returns to the pool).
        Without ``reader``, the read is for the principal the request's state names (:data:`.PRINCIPAL_STATE`)."""
        if reader is None and isinstance(principal := self.state.get(PRINCIPAL_STATE), Principal):
            reader = principal.log_name
        # a walk stopped while it waits for deferred apply ends there
        with store.read(stop=self.check, behind=behind, reader=reader) as conn:
            driver = conn.connection.driver_connection
            cancel = getattr(driver, "interrupt" if conn.dialect.name == "sqlite" else "cancel", None)
            with self._lock:
                self._cancel = cancel
            try:
                self.check()  # stopped before the connection was registered
                yield conn
            finally:
                with self._lock:
                    self._cancel = None

    def check(self) -> None:
        """Raise :class:`WalkStopped` once the walk was stopped: called between the walk's steps."""
        if self.stopped is not None:
            raise WalkStopped(self.stopped)

    def interrupt(self) -> None:
        """Cancel the statement the walk's connection runs, if it holds one now (from any thread; under the lock,
        so never on a connection already given back)."""
        with self._lock:
            if self._cancel is None:
                return
            try:
                self._cancel()
            except Exception as error:  # a connection that broke: its statement fails with it
                log.debug("could not interrupt a walk's statement: %s", error)


def reading(
    store: LineageStore, walk: Walk | None, behind: Callable[[int], None] | None = None, reader: str | None = None
) -> AbstractContextManager[Connection]:
    """``walk.reading(store, behind, reader)``, or ``store.read(behind=behind, reader=reader)`` for a walk run
    outside a limiter (benchmarks, tests)."""
    return store.read(behind=behind, reader=reader) if walk is None else walk.reading(store, behind, reader)


class WalkLimiter:
    """Runs walks in worker threads within the bounds the module describes."""

    def __init__(self, concurrent: int, waiting: int, answer_bytes: int, timeout: float = 30.0) -> None:
        self.concurrent, self.waiting, self.answer_bytes, self.timeout = concurrent, waiting, answer_bytes, timeout
        self._turns: anyio.CapacityLimiter | None = None
        self._threads: anyio.CapacityLimiter | None = None
        self._lock = threading.Lock()
        self._admitted = 0
        self._running = 0
        self._stopped = 0
        self._held_bytes = 0

    @property
    def held_bytes(self) -> int:
        """Bytes of answers built and not yet sent."""
        return self._held_bytes

    @property
    def running(self) -> int:
        """Walks whose thread is computing now (stopped ones included until their thread ends)."""
        return self._running

    @property
    def admitted(self) -> int:
        """Walks running or waiting for a turn."""
        return self._admitted

    @property
    def stopped(self) -> int:
        """Walks stopped since the limiter was made (client gone or time up)."""
        return self._stopped

    async def answer(self, request: Request, compute: Callable[..., bytes], *args: Any) -> Response:
        """Run ``compute(*args, walk=...)`` (returning the answer's JSON bytes) in a turn and answer it, stopping
        it when the client of ``request`` disconnects or its time is up.

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
        walk = Walk(request.scope.setdefault("state", {}))
        started = time.monotonic()
        # A walk that ends within WATCH_AFTER_SECONDS costs one timer; a longer one gets a task reading its
        # client's channel, and a timer for its time.
        walk.timer = asyncio.get_running_loop().call_later(
            min(WATCH_AFTER_SECONDS, self.timeout), self._watch, request.receive, walk
        )
        failed: Exception | None = None
        try:
            body = await self._compute(walk, compute, args)
        except Exception as error:
            if walk.stopped is None:
                raise
            failed, body = error, b""
        finally:
            for pending in (walk.timer, walk.watcher, walk.interrupting):
                if pending is not None:
                    pending.cancel()
            with self._lock:
                self._admitted -= 1
        if failed is None:
            self.hold(len(body))
            return HeldAnswer(body, release=functools.partial(self.release, len(body)))
        self._stopped += 1
        path = request.url.path
        if walk.stopped == CLIENT_GONE:
            log.debug("a client disconnected during GET %s; its walk was stopped", path)
            return Response(status_code=499)  # nobody reads it: for access logs only
        log.info("a walk (GET %s) was stopped after %.1f s: walk_timeout_seconds passed", path, self.timeout)
        return self._timed_out(not isinstance(failed, _Unstarted), time.monotonic() - started)

    async def _compute(self, walk: Walk, compute: Callable[..., bytes], args: tuple[Any, ...]) -> bytes:
        """Wait for a turn, then run the walk in a thread of its own; :class:`_Unstarted` when stopped while
        waiting, the walk thread's error (or :class:`WalkStopped`) when stopped while running."""
        if self._turns is None:  # created on the event loop that serves the app
            self._turns = anyio.CapacityLimiter(self.concurrent)
            self._threads = anyio.CapacityLimiter(self.concurrent)
        try:
            self._turns.acquire_nowait()  # a free turn and nobody waiting for one
        except anyio.WouldBlock:
            with anyio.CancelScope() as waiting:
                walk.waiting = waiting
                await self._turns.acquire()
            walk.waiting = None
            if waiting.cancelled_caught:  # stopped while it waited: it leaves the queue, no turn taken
                raise _Unstarted(walk.stopped) from None
        try:
            walk.check()
            self._running += 1
            try:
                body = await anyio.to_thread.run_sync(
                    functools.partial(compute, *args, walk=walk), limiter=self._threads
                )
            finally:
                self._running -= 1
            walk.check()  # finished although stopped: nobody wants it
            return body
        finally:
            self._turns.release()

    def _watch(self, receive: Receive, walk: Walk) -> None:
        """Start watching the walk's client, and time it (on the event loop, :data:`WATCH_AFTER_SECONDS` after it
        was admitted)."""
        loop = asyncio.get_running_loop()
        walk.watcher = loop.create_task(self._watch_client(receive, walk))
        walk.timer = loop.call_later(max(self.timeout - WATCH_AFTER_SECONDS, 0), self._stop, walk, TIME_UP)

    async def _watch_client(self, receive: Receive, walk: Walk) -> None:
        """Stop the walk when its client disconnects (``http.disconnect``; a GET's body parts are read and
        dropped). Under a server that answers ``http.disconnect`` only once the response is complete (a test
        client), this waits until it is cancelled."""
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
                if message["type"] != "http.request":
                    return
        except Exception:  # a server whose channel fails: the walk goes on, bounded by its time
            return
        self._stop(walk, CLIENT_GONE)

    def _stop(self, walk: Walk, why: str) -> None:
        """Stop the walk (on the event loop): out of the queue if it waits, else interrupt its connection until
        :meth:`answer` ends (once the walk's thread has)."""
        if walk.stopped is not None:
            return
        walk.stopped = why
        if walk.waiting is not None:
            walk.waiting.cancel()
        else:
            walk.interrupting = asyncio.get_running_loop().create_task(self._interrupt(walk))

    @staticmethod
    async def _interrupt(walk: Walk) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # In a thread: PostgreSQL's cancel request opens a connection of its own and waits for the reply.
            await loop.run_in_executor(None, walk.interrupt)
            await asyncio.sleep(INTERRUPT_SECONDS)

    def _timed_out(self, running: bool, seconds: float) -> JSONResponse:
        if not running:
            detail = (
                f"the lineage walk waited {seconds:.0f} s for a turn without getting one (walk_timeout_seconds = "
                f"{self.timeout:g}; {self.concurrent} walks run at once): retry shortly"
            )
            return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        detail = (
            f"the lineage walk did not finish within walk_timeout_seconds ({self.timeout:g} s) and was stopped: ask "
            "for a smaller depth or fewer nodes (maxNodes), or a direction other than both"
        )
        return JSONResponse({"detail": detail}, status_code=504)

    def hold(self, size: int) -> None:
        """Count ``size`` bytes of an answer as held until :meth:`release`; :class:`WalksBusy` when they would
        take what is held past ``answer_bytes`` (a single answer larger than the budget passes when nothing else
        is held)."""
        with self._lock:
            if self._held_bytes and self._held_bytes + size > self.answer_bytes:
                raise WalksBusy(
                    f"lineage answers of {self._held_bytes} bytes are still being sent to their clients (at most "
                    f"{self.answer_bytes} are held): retry shortly, or ask for fewer nodes (maxNodes) or a smaller "
                    "page (limit)"
                )
            self._held_bytes += size

    def exchange(self, held: int, size: int) -> None:
        """Count ``size`` bytes instead of ``held`` ones, never refusing (what they count is built already)."""
        with self._lock:
            self._held_bytes += size - held

    def release(self, size: int) -> None:
        """Stop counting ``size`` bytes."""
        with self._lock:
            self._held_bytes -= size


#: Bytes handed to the server per write: it waits for the client to take each before the next.
SEND_CHUNK = 256 * 1024


class HeldAnswer(Response):
    """A JSON answer sent in parts, whose bytes return to the answer budget once sent or once sending stops.

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
