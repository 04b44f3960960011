"""Grouped commits: ingest requests that arrive together are written in one transaction, by one writer thread.

The stock HTTP transport sends one event per request, and eight Airflow workers send eight at once. Written a
transaction each, they queue for the store's write lock and pay a commit each (a WAL flush on PostgreSQL);
written together, they pay one. So requests queue here, and one writer thread (started when a request finds none
running, ended once nothing has come for :data:`LINGER_SECONDS`) takes every request waiting (up to
:data:`MAX_GROUP_EVENTS` events, at least one request), writes their events in one transaction, and answers each
once that transaction has committed. Requests that arrive meanwhile wait for the next group. A request that finds
the store idle, with no concurrent senders of late, is written at once, alone.

Under concurrent load the writer waits a moment for the other senders' requests before it takes a group, as
PostgreSQL's ``commit_delay`` waits for sibling transactions. When the group it took last held more than one
request, it waits until as many requests wait as were in its hands at once (waiting or being written) at most in
the last second or two — the senders that are active — or until :data:`GROUP_WAIT_SECONDS` (2 ms) have passed.
Eight senders answered together come back together, so a group holds all eight instead of the two or three
that arrived during the last write, and a transaction's fixed cost (a dozen statements, the commit's pages) is
shared by all of them (what that saves per event: ``docs/benchmarks.md``, single-event ingest). A lone
sender (groups of one) never waits; ``group_wait=0`` turns the wait off.

An HTTP request hands its body over once and is answered on its event loop (:meth:`GroupedIngest.submit`: the
body is checked in the writer thread, as part of its group, and one wake-up of the loop answers every request of
a group); a thread can also wait for its events (:meth:`GroupedIngest.ingest`).

The guarantees of a request written alone hold:

* an answer of success means committed: no request is answered before the commit of its group returns;
* one bad event fails only its own request: a group the database refuses (a value it will not keep) is written
  again request by request, each as :func:`.service.store_events` writes it (then event by event); a body that
  is not lineage fails only its own request, before anything is written;
* a failure of the store itself (unreachable, locked past the busy timeout) fails every request of the group
  with :class:`.StoreUnavailable` (503, the sender retries): none was answered as stored, so a server killed
  while a group is written loses nothing a sender was told is stored;
* with deferred apply, the requests of a group taken while the ingest log is over its bound fail with
  :class:`.IngestBacklog` (503 with ``Retry-After``) before anything of them is decoded or written
  (:meth:`.DeferredApply.admit`): the log takes no more debt than the applier can pay. (The HTTP route refuses
  sooner, before reading a body, when the process's own count says the log is full:
  :meth:`.DeferredApply.check_room`.)

Each event is counted stored for the first request of its group that holds it and duplicate for any other, as
a batch counts an event it holds twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from airflow_lineage_provider.consumer.ingest.service import StoreUnavailable, store_events, write_events
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.write.deferred_apply import IngestBacklog
from airflow_lineage_provider.consumer.store.write.ingest import IngestResult
from airflow_lineage_provider.consumer.validation import LineageEvent

log = logging.getLogger(__name__)

#: Most events one grouped transaction takes from waiting requests (a request larger than this is written
#: alone): the size of a batch the ingest writes fastest per event, and a bound on a group's transaction.
MAX_GROUP_EVENTS = 500
#: Most bytes of raw events one grouped transaction writes (a request larger than this is written alone): what
#: the ingest log's statement holds in the database's memory, whatever the size of the events.
MAX_GROUP_BYTES = 16 * 1024 * 1024
#: How long the writer thread waits for another request before it ends (a client posting one event after
#: another finds it still there, instead of a thread started per request).
LINGER_SECONDS = 0.5
#: Longest a writer waits for the requests of concurrent senders before it takes a group (see the module).
GROUP_WAIT_SECONDS = 0.002
#: How long the requests in a writer's hands at once count towards the senders expected (:class:`_Senders`): the
#: window they were seen in, and the next.
SENDERS_WINDOW_SECONDS = 1.0

#: What a request gets: its counts and ``index → error`` for its events the database refused.
Outcome = tuple[IngestResult, dict[int, str]]


@dataclass(eq=False)
class _Request:
    """One request's events (or how to get them: ``prepare``, run by the writer) and what came of them."""

    events: list[LineageEvent] = field(default_factory=list)
    prepare: Callable[[], Sequence[LineageEvent]] | None = None
    #: Bytes of the body ``prepare`` decodes (what it costs to prepare, before its events are known).
    size: int = 0
    #: Who posted it (:attr:`.Principal.log_name`; None: no request), recorded in the ingest log.
    sender: str | None = None
    done: bool = False
    result: IngestResult = field(default_factory=IngestResult)
    errors: dict[int, str] = field(default_factory=dict)
    failure: BaseException | None = None
    #: Where the request waits: an event loop's future (submit) or a thread's event (ingest).
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[Outcome] | None = None
    finished: threading.Event | None = None

    def outcome(self) -> Outcome:
        if self.failure is not None:
            raise self.failure
        return self.result, self.errors


@dataclass
class GroupStatistics:
    """How the grouping went since the server started (for logs and tests)."""

    groups: int = 0
    requests: int = 0
    events: int = 0
    #: Requests in the largest group written.
    largest: int = 0
    #: Groups taken after waiting for concurrent senders (:data:`GROUP_WAIT_SECONDS`), and of those, the ones
    #: taken when the wait ran out rather than when the senders expected had all sent.
    gathered: int = 0
    wait_expired: int = 0


class _Senders:
    """How many senders are active: the most requests in the writer's hands at once (waiting or being written)
    in the current window of :data:`SENDERS_WINDOW_SECONDS` or the one before it (so a sender that has stopped
    stops counting within two windows, and a burst is remembered a window after it). Used under
    :class:`GroupedIngest`'s lock."""

    def __init__(self) -> None:
        self._window = 0.0
        self._now = 0
        self._before = 0
        #: Requests in the group taken last.
        self.last = 0

    def seen(self, requests: int, at: float) -> None:
        """``requests`` were in the writer's hands at once at ``at``."""
        if at - self._window >= SENDERS_WINDOW_SECONDS:
            self._before = self._now if at - self._window < 2 * SENDERS_WINDOW_SECONDS else 0
            self._window, self._now = at, 0
        self._now = max(self._now, requests)

    def taken(self, size: int) -> None:
        """A group of ``size`` requests was taken."""
        self.last = size

    def expected(self, at: float) -> int:
        """The senders active at ``at`` (0 after two windows without a request)."""
        if at - self._window >= 2 * SENDERS_WINDOW_SECONDS:
            return 0
        if at - self._window >= SENDERS_WINDOW_SECONDS:
            return self._now
        return max(self._now, self._before)


class GroupedIngest:
    """Writes ingest requests to ``store``, grouping those that arrive together (see the module).

    ``writers`` is how many groups may be written at once, each by its own thread and transaction: 1 for
    SQLite (one writer at a time holds its lock anyway), more for PostgreSQL, where one group's round trips and
    commit can overlap the next group's (:func:`writers_for`). ``group_wait`` is the longest a writer waits for
    concurrent senders' requests before it takes a group, in seconds (0: never waits; see the module).
    """

    def __init__(
        self,
        store: LineageStore,
        max_group_events: int = MAX_GROUP_EVENTS,
        writers: int = 1,
        group_wait: float = GROUP_WAIT_SECONDS,
    ) -> None:
        if writers < 1:
            raise ValueError(f"writers must be at least 1, got {writers}")
        if not 0 <= group_wait <= 1:
            raise ValueError(f"group_wait must be between 0 and 1 second, got {group_wait!r}")
        self.store = store
        self.max_group_events = max_group_events
        self.writers = writers
        self.group_wait = group_wait
        self._senders = _Senders()
        #: Requests in the groups being written (by the other writers, while one gathers).
        self._writing = 0
        self.statistics = GroupStatistics()
        self._pending: deque[_Request] = deque()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._changed = threading.Condition()

    @property
    def waiting(self) -> int:
        """Requests waiting for a group (not those being written)."""
        with self._changed:
            return len(self._pending)

    def ingest(self, events: Sequence[LineageEvent], sender: str | None = None) -> Outcome:
        """Store ``events`` (one request's, posted by ``sender``) as :func:`.service.store_events` does, in a group
        with the requests that wait at the same time; blocks until they are committed. Raises
        :class:`.StoreUnavailable`."""
        request = _Request(list(events), sender=sender, finished=threading.Event())
        self._queue(request)
        request.finished.wait()  # type: ignore[union-attr]
        return request.outcome()

    async def submit(
        self, prepare: Callable[[], Sequence[LineageEvent]], size: int = 0, sender: str | None = None
    ) -> Outcome:
        """Store the events ``prepare`` returns, as :meth:`ingest` does, answered on the running event loop.

        ``prepare`` runs in a writer thread just before its group is written, so CPU work such as decoding and
        checking a request body stays off the event loop without a thread hand-off of its own. What it raises is
        raised here, and nothing of that request is written; the other requests of its group are not affected.
        ``size``: the bytes of the body it decodes, which bound a group (:meth:`_take`); ``sender``: who posted it
        (:attr:`.Principal.log_name`).
        """
        loop = asyncio.get_running_loop()
        request = _Request(prepare=prepare, size=size, sender=sender, loop=loop, future=loop.create_future())
        self._queue(request)
        return await request.future  # type: ignore[misc]

    def _queue(self, request: _Request) -> None:
        """Add ``request`` to the queue: an idle writer takes it, else a new one when fewer than :attr:`writers`
        run, else the first writer done with its group (an idle writer is one waiting for requests, or waiting
        for concurrent senders' requests: :meth:`_gather`; all are woken, so the one gathering counts them)."""
        with self._changed:
            self._pending.append(request)
            self._senders.seen(len(self._pending) + self._writing, time.monotonic())
            if self._idle:
                self._changed.notify_all()
                return
            if len(self._threads) >= self.writers:
                return
            writer = self._new_writer()
        failure = self._start(writer)
        if failure is None:
            return
        with self._changed:
            if self._threads:
                return  # a running writer will take it
            self._pending.remove(request)  # nothing was written: the sender retries
        raise StoreUnavailable(f"the lineage store cannot be written now: {failure}") from failure

    def _new_writer(self) -> threading.Thread:
        writer = threading.Thread(target=self._write_groups, name="lineage-ingest", daemon=True)
        self._threads.add(writer)
        return writer

    def _start(self, writer: threading.Thread) -> RuntimeError | None:
        """Start ``writer`` (from :meth:`_new_writer`); when no thread can be started now, forget it and answer why."""
        try:
            writer.start()
        except RuntimeError as error:
            with self._changed:
                self._threads.discard(writer)
            return error
        return None

    def _write_groups(self) -> None:
        """A writer thread: write groups until no request has come for :data:`LINGER_SECONDS`."""
        me = threading.current_thread()
        ended = False
        try:
            with self.store.holding():  # one connection for the groups this thread writes
                self._write_until_idle(me)
            ended = True
        finally:
            if not ended:  # stopped by something no request caused: let another thread write the rest
                with self._changed:
                    self._threads.discard(me)
                    writer = self._new_writer() if self._pending and not self._threads else None
                if writer is not None:
                    self._start(writer)  # if none can start now, the next request starts one

    def _write_until_idle(self, me: threading.Thread) -> None:
        while True:
            with self._changed:
                if not self._pending:
                    self._linger()
                if not self._pending:
                    self._threads.discard(me)
                    return
                self._gather()
                if not self._pending:  # another writer took them meanwhile
                    continue
                group = self._take()
            try:
                self._write(group)
            finally:
                with self._changed:
                    self._writing -= len(group)
                self._answer(group)

    def _wait_idle(self, ready: Callable[[], bool], seconds: float) -> bool:
        """Wait as an idle writer (so that :meth:`_queue` wakes it for each request) until ``ready()`` or
        ``seconds`` have passed; whether ``ready()``. Holds the lock, which the wait releases."""
        self._idle += 1
        try:
            return self._changed.wait_for(ready, seconds)
        finally:
            self._idle -= 1

    def _linger(self) -> None:
        """Wait up to :data:`LINGER_SECONDS` for a request (a wake-up for one another writer took does not end
        the wait)."""
        self._wait_idle(lambda: bool(self._pending), LINGER_SECONDS)

    def _gather(self) -> None:
        """Under concurrent load, wait (at most :attr:`group_wait`) until as many requests wait as there are
        senders active (see the module); at once when the last group held one request."""
        if self.group_wait <= 0 or self._senders.last < 2:
            return
        # The senders whose requests another writer is writing now cannot send again before that group is done.
        expected = min(self._senders.expected(time.monotonic()) - self._writing, self.max_group_events)
        if len(self._pending) >= expected:
            return
        self.statistics.gathered += 1
        if not self._wait_idle(lambda: len(self._pending) >= expected, self.group_wait):
            self.statistics.wait_expired += 1

    def _take(self) -> list[_Request]:
        """The next group: waiting requests in arrival order, up to :attr:`max_group_events` events (a request
        whose events are not known yet — its body is checked by the writer — counts as one) and
        :data:`MAX_GROUP_BYTES` of bodies to decode or raw events (at least one request): what a group holds
        decoded at once is bounded, whatever its requests' bodies."""
        group = [self._pending.popleft()]
        total, size = max(len(group[0].events), 1), _weight(group[0])
        while self._pending:
            events, weight = max(len(self._pending[0].events), 1), _weight(self._pending[0])
            if total + events > self.max_group_events or size + weight > MAX_GROUP_BYTES:
                break
            total, size = total + events, size + weight
            group.append(self._pending.popleft())
        self._senders.taken(len(group))
        self._writing += len(group)
        stats = self.statistics
        stats.groups, stats.requests = stats.groups + 1, stats.requests + len(group)
        stats.largest = max(stats.largest, len(group))
        return group

    def _write(self, group: list[_Request]) -> None:
        """Unless the ingest log is full (:meth:`_admitted`: then nothing of the group is decoded), prepare the
        requests that need it, then write the group's events, in transactions of at most :attr:`max_group_events`
        events and :data:`MAX_GROUP_BYTES` of raw events (a request larger than that alone)."""
        try:
            ready = [member for member in self._admitted(group) if _prepared(member)]
            with self._changed:
                self.statistics.events += sum(len(member.events) for member in ready)
            for part in _parts(ready, self.max_group_events, MAX_GROUP_BYTES):
                self._write_together(part)
        except BaseException as error:  # never leave a request of the group waiting, whatever went wrong
            for member in group:
                if member.failure is None and not member.result.stored and not member.result.duplicates:
                    member.failure = error
            raise

    def _admitted(self, requests: list[_Request]) -> list[_Request]:
        """``requests``, when the ingest log takes them now (always without deferred apply); else none, each failed
        with :class:`.IngestBacklog`, nothing of them written."""
        deferred = self.store.deferred
        if deferred is None or not requests:
            return requests
        try:
            deferred.admit()
        except IngestBacklog as error:
            for request in requests:
                request.failure = error
            return []
        return requests

    def _write_together(self, group: list[_Request]) -> None:
        if len(group) == 1:
            self._write_alone(group[0])
            return
        try:
            result = write_events(self.store, [event for member in group for event in member.events], _senders(group))
        except StoreUnavailable as error:
            for member in group:
                member.failure = error
            return
        except SQLAlchemyError:  # a value the database refuses: find whose, request by request
            for member in group:
                self._write_alone(member)
            return
        claimed: set[str] = set()
        for member in group:
            for event in member.events:
                if event.key in result.inserted and event.key not in claimed:
                    claimed.add(event.key)
                    member.result.stored += 1
                else:
                    member.result.duplicates += 1

    def _write_alone(self, request: _Request) -> None:
        try:
            request.result, request.errors = store_events(self.store, request.events, _senders([request]))
        except Exception as error:
            request.failure = error

    @staticmethod
    def _answer(group: list[_Request]) -> None:
        """Tell every request of ``group`` what came of it: a waiting thread at once, the requests of each event
        loop with one call into that loop."""
        waiting: defaultdict[asyncio.AbstractEventLoop, list[_Request]] = defaultdict(list)
        for member in group:
            member.done = True
            if member.finished is not None:
                member.finished.set()
            elif member.loop is not None:
                waiting[member.loop].append(member)
        for loop, members in waiting.items():
            try:
                loop.call_soon_threadsafe(_settle, members)
            except RuntimeError:  # the loop has closed: nobody waits for these answers any more
                log.debug("an event loop closed before %d ingest requests were answered", len(members))


def _senders(group: list[_Request]) -> dict[str, str]:
    """Who posted each event of ``group`` (the first request that holds it, as the counts do)."""
    senders: dict[str, str] = {}
    for member in group:
        if member.sender is not None:
            for event in member.events:
                senders.setdefault(event.key, member.sender)
    return senders


def _weight(request: _Request) -> int:
    """Bytes ``request`` holds: its body until prepared, then its raw events."""
    if request.events:
        return sum(len(event.payload) for event in request.events)
    return request.size


def _prepared(request: _Request) -> bool:
    """Whether ``request`` has events to write, once its ``prepare`` (if any) has run; a ``prepare`` that raises
    fails only its own request."""
    if request.prepare is not None:
        try:
            request.events = list(request.prepare())
        except Exception as error:
            request.failure = error
            return False
    return bool(request.events)


def _parts(requests: list[_Request], most: int, most_bytes: int) -> list[list[_Request]]:
    """``requests`` in order, cut into runs of at most ``most`` events and ``most_bytes`` bytes of raw events (a
    larger request is a run of its own)."""
    parts: list[list[_Request]] = []
    size = weight = 0
    for request in requests:
        count = len(request.events)
        raw = sum(len(event.payload) for event in request.events)
        if not parts or size + count > most or weight + raw > most_bytes:
            parts.append([])
            size = weight = 0
        parts[-1].append(request)
        size += count
        weight += raw
    return parts


def _settle(members: list[_Request]) -> None:
    """On the requests' event loop: complete each one's future (unless its sender gave up and cancelled it)."""
    for member in members:
        future = member.future
        if future is None or future.done():
            continue
        if member.failure is not None:
            future.set_exception(member.failure)
        else:
            future.set_result((member.result, member.errors))


#: Groups written at once on PostgreSQL (:func:`writers_for`).
POSTGRESQL_WRITERS = 2


def writers_for(store: LineageStore) -> int:
    """How many groups :class:`GroupedIngest` writes at once to ``store``: one on SQLite (its single write lock),
    :data:`POSTGRESQL_WRITERS` on PostgreSQL (one group's round trips and commit overlap the next one's; the
    ingest locks rows in one order, and a deadlock is retried)."""
    return 1 if make_url(store.url).get_backend_name() == "sqlite" else POSTGRESQL_WRITERS
