"""Deferred apply: an ingest answered once its events are logged, and applied to the graph in bounded batches.

With ``ingest_apply = deferred`` an ingest transaction stores each new raw event (``lineage_events``, as always:
the answer's stored and duplicate counts are known at once) and logs it in ``lineage_pending_events``
(:func:`.ingest.log_events`); it commits and is answered. A 201 still means committed: the event is durable, and
so is the debt of applying it. A thread of the serving process (:class:`DeferredApply`, started when something
is logged, when a read has to wait, and when the store is first opened, so a server killed mid-load applies on
restart what it logged) then takes the oldest pending events and applies them to the graph
(:func:`.ingest.apply_events`) in one transaction that also deletes their log rows: an event is applied exactly
once, whoever crashes when.

A batch is bounded three ways, so what it costs the server and the database does not depend on how wide the
events are: at most :data:`APPLY_BATCH_EVENTS` events, :data:`APPLY_BATCH_BYTES` of raw events read, and
:data:`APPLY_BATCH_ROWS` rows to write (:func:`.ingest.event_rows`: the datasets an event names, their
column-lineage fields and symlinks) — always at least one event, so an oversized event is applied alone.

The debt is bounded too: while the log holds ``max_pending_events`` events or ``max_pending_bytes`` bytes of raw
events, new ingests are refused with :class:`IngestBacklog` (503 with ``Retry-After``) before anything of them
is written (:meth:`DeferredApply.admit`: a count kept by the process, corrected by a look at the log at most
every :data:`LOOK_SECONDS`; :meth:`DeferredApply.check_room`, by the count alone, before a request's body is even
read). And an apply that takes longer than ``apply_timeout`` seconds (a statement timeout on PostgreSQL, a
deadline checked between statements on both stores) is given up: its batch is applied again event by event, for
as long as a read waits (:meth:`DeferredApply._retry_slow`), and the next batches take half its rows. An event is
set aside as too slow only when it ran past the bound alone with the graph — every other writer of the graph
held off, so that the time was its own work, not waiting for another transaction's locks — and the log behind
it moves on.

Why: eight single-event senders make groups of at most eight events, and on PostgreSQL most of what such a group
costs is per transaction and per statement — a dozen upserts that cost nearly as much for 8 rows as for 500.
Logging costs two small inserts per group; applying in batches of hundreds costs a fraction per event of
applying groups of 8 (``docs/benchmarks.md``, single-event ingest).

Reads stay as fresh as before for whoever posted: :meth:`LineageStore.read <..LineageStore.read>` first waits
until every event logged before the read began is applied (:meth:`DeferredApply.wait_applied`; one indexed
``max(seq)`` when nothing is pending), so a client that posts an event and then reads sees it, as with inline
apply. Each log row records the principal that posted it (``logged_by``): a read of the API that finds more than
:data:`READ_WAIT_OTHERS_EVENTS` events logged before it (another sender's bulk load, a backlog replayed after an
outage) waits only for its own principal's — at once when it has none. A read that finds more than
:data:`READ_WAIT_EVENTS` events pending up to the last it waits for, or still finds some after
:data:`READ_WAIT_SECONDS`, is not made to wait nor refused: it answers from what is applied and says how many
events it is behind (``stale_ok``; the API's ``Lineage-Pending-Events`` header). Writes that read the graph (a
tag, a reset, a prune) always wait for everything.

Several processes may share a store: each one's applier takes pending rows with ``FOR UPDATE SKIP LOCKED``
(PostgreSQL), so none is applied twice and a dead process's rows are taken by the others. A batch the database
refuses is applied again event by event; an event it still refuses alone is moved to ``lineage_unapplied_events``
with the reason (its raw event stays stored), counted in the statistics of ``GET /api/v1/retention``,
never silently dropped. A failure of the store itself (unreachable, restarted, a deadlock, a lock waited for past
half the apply timeout) leaves the rows pending and is retried with a growing pause. An event whose raw event a
reset or prune deleted while it was pending is not applied (its log row goes), even if it is kept parsed. On
PostgreSQL an applier that drains a log whose files a backlog made large truncates it (:mod:`.log_compaction`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select
from sqlalchemy.exc import SQLAlchemyError

from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.store.write import log_compaction
from airflow_lineage_provider.consumer.store.write.failures import failure_reason, is_store_failure, sqlstate
from airflow_lineage_provider.consumer.store.write.ingest import (
    AFTER_COMMIT,
    APPLY_DEADLINE,
    ApplyTimeout,
    apply_events,
    event_rows,
)
from airflow_lineage_provider.consumer.validation import EventError, LineageEvent, parse_event
from airflow_lineage_provider.defaults import INGEST_APPLY_MODES

if TYPE_CHECKING:
    from airflow_lineage_provider.consumer.store import LineageStore

log = logging.getLogger(__name__)

#: The name of the applier thread (a thread of the serving process, see :class:`DeferredApply`).
APPLIER_THREAD = "lineage-apply"
#: Most pending events applied in one transaction.
APPLY_BATCH_EVENTS = 500
#: Most rows one batch writes, counted by :func:`.ingest.event_rows` (a batch of ordinary events stops at
#: :data:`APPLY_BATCH_EVENTS` long before this); an event past it is applied alone.
APPLY_BATCH_ROWS = 10_000
#: Most bytes of raw events one batch reads from the store (those this process logged and still holds parsed
#: count too); an event past it is applied alone.
APPLY_BATCH_BYTES = 8 * 1024 * 1024
#: How long the applier waits after something was logged, for more to come, before it applies a batch (at once
#: when a read waits, or a full batch is waiting): what makes batches large under load.
APPLY_DELAY_SECONDS = float(os.environ.get("LINEAGE_APPLY_DELAY_MS", "50")) / 1000
#: Longest one apply transaction may take before it is given up (the default of ``ingest_apply_timeout_seconds``):
#: well under :data:`READ_WAIT_SECONDS`, so reads behind an event too slow to apply are answered.
APPLY_TIMEOUT_SECONDS = 10.0
#: Most events the ingest log may hold before new ingests are refused (default of ``ingest_log_max_events``).
MAX_PENDING_EVENTS = 10_000
#: Most bytes of raw events the ingest log may hold before new ingests are refused (``ingest_log_max_bytes``).
MAX_PENDING_BYTES = 8 * 1024 * 1024
#: How often :meth:`DeferredApply.admit` corrects the process's count of the log with a look at the log itself
#: (what other processes logged and applied).
LOOK_SECONDS = 1.0
#: ``Retry-After`` of an ingest refused because the log is over its bound: the applier takes a batch off the log
#: well within a second, and a sender told to wait longer leaves it idle once the log is drained (the byte bound
#: holds only a few seconds of applying for events of a few KB).
BACKLOG_RETRY_SECONDS = 1
#: How long the applier thread waits for more to apply before it ends (the next log or read starts another).
LINGER_SECONDS = 1.0
#: Longest a read waits for the events logged before it to be applied: then a write that reads the graph is
#: answered 503, a read of the API answers from what is applied (``stale_ok``).
READ_WAIT_SECONDS = 30.0
#: Most events logged before a read of the API and not applied yet that it waits for; behind more, it answers at
#: once from what is applied, saying how far behind (a few applier batches: well under a second of applying).
READ_WAIT_EVENTS = 2_000
#: Most events logged before a read of the API by other principals than its own (and not applied yet) that it
#: waits for: a tenth of an applier batch, a few tens of milliseconds of applying. Behind more (a bulk load of
#: another sender), it waits only for its own principal's events and answers, saying how far behind it is.
READ_WAIT_OTHERS_EVENTS = 100
#: How often a waiting read looks at the log again when no applier of this process has told it anything (the
#: events it waits for may be another process's).
READ_POLL_SECONDS = 0.02
#: Parsed events not applied yet (logged by this process, or read for a batch that had no room left for them),
#: kept so that the applier need not read and parse them again: at most this many, of at most :data:`HANDED_BYTES`
#: bytes of raw event in all (parsed, an event takes 3-5 times its raw size).
HANDED_EVENTS = 20_000
HANDED_BYTES = 16 * 1024 * 1024
#: Longest pause between attempts while the store itself fails.
MAX_RETRY_PAUSE_SECONDS = 5.0
#: Longest :meth:`DeferredApply.stop` waits for the applier to apply what is pending and end.
STOP_SECONDS = 30.0
#: PostgreSQL's SQLSTATE for a statement cancelled (by ``statement_timeout``, or by request).
_QUERY_CANCELED = "57014"
#: PostgreSQL's SQLSTATE for a statement the role has no privilege for.
_NO_PRIVILEGE = "42501"
#: PostgreSQL's ``lock_not_available``: ``LOCK ... NOWAIT`` found the lock held.
_LOCK_NOT_AVAILABLE = "55P03"
#: Tries at the drained log's lock, and the pause between two: a read looking at the log (it does when the applier
#: wakes it) holds a share of the lock for a moment, which alone would put the truncation off to a later drain.
COMPACT_TRIES, COMPACT_PAUSE_SECONDS = 5, 0.05


class ApplyBacklog(RuntimeError):
    """A write that reads the graph waited :data:`READ_WAIT_SECONDS` and the events logged before it are still not
    applied (answered 503 with Retry-After: the store is behind or failing)."""


class IngestBacklog(RuntimeError):
    """The ingest log holds more than its bound: an ingest refused before anything of it was written (answered
    503 with ``Retry-After: retry_after``)."""

    def __init__(self, message: str, retry_after: int = BACKLOG_RETRY_SECONDS) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def check_ingest_apply(mode: str, backend: str) -> str:
    """``inline`` or ``deferred`` for a store on ``backend`` (``sqlite``, ``postgresql``) set to ``mode``, one of
    :data:`~airflow_lineage_provider.defaults.INGEST_APPLY_MODES` (``inline``: applied in the ingest's transaction;
    ``deferred``: as this module describes; ``auto``: deferred on PostgreSQL, inline elsewhere); else a
    ``ValueError`` naming it and the choices.

    Why ``auto`` chooses so: on PostgreSQL deferred apply makes concurrent single-event senders faster, with less
    database work per event; on SQLite it gains little with one server process and loses with two (their
    appliers and writers take turns on the one write lock), and Airflow's API server runs several
    (``docs/benchmarks.md``, inline against deferred apply)."""
    if mode not in INGEST_APPLY_MODES:
        raise ValueError(f"ingest_apply must be one of {', '.join(INGEST_APPLY_MODES)}, got {mode!r}")
    if mode == "auto":
        return "deferred" if backend == "postgresql" else "inline"
    return mode


@dataclass(frozen=True)
class ApplyBounds:
    """How much one batch may take and how much the ingest log may hold (see the module); ``apply_timeout`` None:
    no time bound."""

    batch_events: int = APPLY_BATCH_EVENTS
    batch_rows: int = APPLY_BATCH_ROWS
    batch_bytes: int = APPLY_BATCH_BYTES
    max_pending_events: int = MAX_PENDING_EVENTS
    max_pending_bytes: int = MAX_PENDING_BYTES
    apply_timeout: float | None = APPLY_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        for name in ("batch_events", "batch_rows", "batch_bytes", "max_pending_events", "max_pending_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.apply_timeout is not None and not self.apply_timeout > 0:
            raise ValueError(f"apply_timeout must be more than 0 seconds (or None), got {self.apply_timeout}")


@dataclass
class ApplyStatistics:
    """What this process's applier did since the store was opened (for logs, tests and benchmarks)."""

    batches: int = 0
    events: int = 0
    #: The most events one batch applied.
    largest: int = 0
    #: Batches the database refused (or that took too long), applied again event by event; events moved to
    #: ``lineage_unapplied_events``, and of those, the ones set aside because applying them took too long.
    split: int = 0
    unapplied: int = 0
    timed_out: int = 0
    #: Attempts that failed because the store itself did (retried).
    store_failures: int = 0
    #: Reads that found events to wait for.
    waited_reads: int = 0
    #: Reads answered from what was applied while events logged before them were not (``stale_ok``).
    stale_reads: int = 0
    #: Ingest requests refused because the log was over its bound.
    refused_ingests: int = 0
    #: Times the drained log's files were truncated (:mod:`.log_compaction`).
    log_compactions: int = 0


@dataclass
class _Pending:
    seq: int
    event_key: str
    #: Bytes of its raw event; None: its raw event has gone (a reset or prune raced it): nothing to apply.
    size: int | None
    #: Its event once read: parsed, or the reason it cannot be read back (None: gone).
    event: LineageEvent | str | None = None


class DeferredApply:
    """The applier of ``store``'s ingest log in this process, within ``bounds`` (see the module)."""

    def __init__(self, store: LineageStore, bounds: ApplyBounds | None = None) -> None:
        self.store = store
        self.bounds = bounds or ApplyBounds()
        self.statistics = ApplyStatistics()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        #: Set by :meth:`logged` and :meth:`wake`: there may be something to apply the thread has not looked for.
        self._wanted = False
        #: Bumped after each committed batch (waiting reads look again).
        self._generation = 0
        self._handed: dict[str, LineageEvent] = {}
        self._handed_bytes = 0
        #: Reads waiting for the applier (it then applies at once).
        self._readers = 0
        #: Set while :meth:`stop` runs: the thread applies what is pending without waiting, then ends.
        self._stopping = False
        #: What the log holds, as far as this process knows: its last look, plus what it logged since, less what
        #: it applied since (events, bytes of raw event).
        self._backlog = [0, 0]
        self._looked_at = float("-inf")
        self._looking = False
        #: Most rows a batch takes now: ``batch_rows``, or less since a batch ran past the time bound (see
        #: :meth:`_apply_batch`). Used by the applier thread only.
        self._batch_rows = self.bounds.batch_rows
        #: Events this applier applied since it last looked at the log's size (see :meth:`_compact_log`), and
        #: whether it may truncate the log (False once the database said the store's role may not).
        self._unchecked = 0
        self._may_compact = True

    def logged(self, events: Iterable[LineageEvent]) -> None:
        """``events`` were logged by a transaction of this process that has committed: apply them soon."""
        events = list(events)
        with self._changed:
            self._backlog[0] += len(events)
            self._backlog[1] += sum(len(event.payload) for event in events)
            self._hand(events)
        self.wake()

    def _hand(self, events: Iterable[LineageEvent]) -> None:
        """Keep ``events`` parsed for the applier, within :data:`HANDED_EVENTS` and :data:`HANDED_BYTES`."""
        for event in events:
            size = len(event.payload)
            if len(self._handed) >= HANDED_EVENTS or self._handed_bytes + size > HANDED_BYTES:
                return
            if event.key not in self._handed:
                self._handed[event.key] = event
                self._handed_bytes += size

    def admit(self) -> None:
        """Raise :class:`IngestBacklog` when the ingest log holds ``max_pending_events`` events or
        ``max_pending_bytes`` bytes of raw events or more (by this process's count, looked up in the log at most
        every :data:`LOOK_SECONDS`): called before an ingest writes anything."""
        if time.monotonic() - self._looked_at >= LOOK_SECONDS:
            self._look()
        self._refuse_when_full()

    def check_room(self) -> None:
        """:meth:`admit` by this process's count alone, never waiting for the store: what an ingest request
        checks before it reads its body, so that while the log is full a refusal costs neither the upload nor the
        decoding. When the count is older than :data:`LOOK_SECONDS` and says full, a look at the log is started in
        the background (other processes may have applied what this one counts), for the requests that follow."""
        with self._changed:
            events, size = self._backlog
            if events < self.bounds.max_pending_events and size < self.bounds.max_pending_bytes:
                return
            stale = not self._looking and time.monotonic() - self._looked_at >= LOOK_SECONDS
        if stale:
            looker = threading.Thread(target=self._look, name="lineage-log-look", daemon=True)
            with suppress(RuntimeError):  # no thread can start now: admit() looks at the next write
                looker.start()
        self._refuse_when_full()

    def _refuse_when_full(self) -> None:
        bounds = self.bounds
        with self._changed:
            events, size = self._backlog
            if events < bounds.max_pending_events and size < bounds.max_pending_bytes:
                return
            self.statistics.refused_ingests += 1
        self.wake()
        # Neither what the log holds nor how much: the log spans every namespace, and any writer is told this.
        raise IngestBacklog(
            "the lineage store's ingest log is full (it holds ingest_log_max_events events or ingest_log_max_bytes"
            " bytes of raw events waiting to be applied to the graph): nothing of this request was stored; retry"
            f" in {BACKLOG_RETRY_SECONDS} s"
        )

    def _look(self) -> None:
        """Read what the log holds (one thread at a time; a failing store keeps the count as it was: the write that
        follows reports the failure)."""
        with self._changed:
            if self._looking:
                return
            self._looking = True
        try:
            with self.store.engine.connect() as conn:
                events, size = conn.execute(_backlog_query(conn.dialect.name)).one()
                conn.rollback()
            with self._changed:
                self._backlog = [int(events or 0), int(size or 0)]
        except SQLAlchemyError as error:
            log.debug("lineage store: could not look at the ingest log: %s", error)
        finally:
            with self._changed:
                self._looking = False
                self._looked_at = time.monotonic()

    def wake(self) -> None:
        """Make sure an applier thread looks at the log now (starting one if none runs)."""
        with self._changed:
            self._wanted = True
            self._changed.notify_all()
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=APPLIER_THREAD, daemon=True)
            thread = self._thread
        try:
            thread.start()
        except RuntimeError:  # no thread can start now: the next log or read tries again
            with self._changed:
                self._thread = None
            log.warning("lineage store: could not start the applier thread; pending events wait for the next try")

    @property
    def running(self) -> bool:
        """Whether an applier thread of this process is running now."""
        with self._changed:
            return self._thread is not None

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """End the applier thread, after it has applied what is pending (at once, without waiting for more); a
        failing store ends it at once. Returns when the thread has ended and given its connection back, or after
        ``timeout`` seconds (it is then left to end by itself, logged). What is still pending stays logged: the
        next log, read or opening of the store applies it. The applier can start again afterwards."""
        with self._changed:
            thread = self._thread
            if thread is None:
                return
            self._stopping = True
            self._changed.notify_all()
        try:
            thread.join(timeout)
        finally:
            with self._changed:
                self._stopping = False
        if thread.is_alive():
            log.warning("lineage store: the applier thread did not end within %.0f s of being stopped", timeout)

    def wait_applied(
        self,
        conn: Connection,
        stop: Callable[[], None] | None = None,
        stale_ok: bool = False,
        reader: str | None = None,
    ) -> int:
        """Return once every event logged before this call is applied, reading the log on ``conn`` (outside a
        transaction: each look is its own). Raises :class:`ApplyBacklog` after :data:`READ_WAIT_SECONDS`.

        With ``stale_ok`` (a read of the API) it never raises for the applier being behind, and waits less: when
        more than :data:`READ_WAIT_OTHERS_EVENTS` events logged before the call are pending, only for those the
        ``reader`` (:attr:`.Principal.log_name`; None: a read of no principal, which waits for all) logged
        itself — none: it returns at once — and not even for those when more than :data:`READ_WAIT_EVENTS` are
        pending up to its last one; after :data:`READ_WAIT_SECONDS` it returns too. The result is about how many
        events logged before the call are still not applied (0: the read sees everything logged before it).

        ``stop`` is called at every look while waiting: whatever it raises ends the wait (a walk whose client
        has gone)."""
        p = tables.pending_events.c
        head = conn.execute(select(func.max(p.seq))).scalar()
        conn.rollback()
        if head is None:
            return 0
        mine, logged_before = None, head
        if stale_ok:
            behind = self._behind(conn, head)
            if behind == 0:
                return 0
            if behind > READ_WAIT_OTHERS_EVENTS and reader is not None:
                # Many pending (a bulk load): wait only for the reader's own events, if any, and not too many.
                mine = tables.logged_by(reader)
                last = conn.execute(select(func.max(p.seq)).where(p.logged_by == mine, p.seq <= head)).scalar()
                conn.rollback()
                if last is None:
                    return self._stale(behind)
                behind, head = self._behind(conn, last), last
            if behind > READ_WAIT_EVENTS:
                return self._stale(behind)
        self.statistics.waited_reads += 1
        with self._changed:
            self._readers += 1
        try:
            self._wait_for(conn, head, stop, mine)
        except ApplyBacklog:
            if not stale_ok:
                raise
            self.statistics.stale_reads += 1
            return self._behind(conn, logged_before)
        finally:
            with self._changed:
                self._readers -= 1
        return 0 if mine is None else self._behind(conn, logged_before)  # others' events it did not wait for

    def _stale(self, behind: int) -> int:
        """A read answered at once from what is applied, ``behind`` events behind (the applier is woken)."""
        self.wake()
        self.statistics.stale_reads += 1
        return behind

    @staticmethod
    def _behind(conn: Connection, head: int) -> int:
        """About how many events up to ``head`` are pending: the span of their sequence numbers (two index
        lookups whatever the log holds; exact unless a logging transaction rolled back inside the span)."""
        first = conn.execute(select(func.min(tables.pending_events.c.seq))).scalar()
        conn.rollback()
        return 0 if first is None or first > head else head - first + 1

    def _wait_for(self, conn: Connection, head: int, stop: Callable[[], None] | None, mine: str | None) -> None:
        """Wait until no event up to ``head`` is pending — of those ``mine`` logged only, when given."""
        p = tables.pending_events.c
        deadline = time.monotonic() + READ_WAIT_SECONDS
        left = select(p.seq).where(p.seq <= head).limit(1)
        if mine is not None:
            left = left.where(p.logged_by == mine)
        while True:
            if stop is not None:
                stop()
            with self._changed:
                generation = self._generation
            self.wake()
            found = conn.execute(left).first()
            conn.rollback()
            if found is None:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ApplyBacklog(
                    f"the lineage store has not applied the events logged before this read after {READ_WAIT_SECONDS:g}"
                    " s (it is behind or failing: see the server's log); retry shortly"
                )
            with self._changed:
                wait = min(READ_POLL_SECONDS, remaining)
                self._changed.wait_for(partial(self._moved_on, generation), wait)

    def _due(self) -> bool:
        """Whether to apply now rather than wait for more (a read waits, a full batch is logged, or the applier
        is being stopped)."""
        return (
            self._stopping
            or self._readers > 0
            or len(self._handed) >= self.bounds.batch_events
            or self._handed_bytes >= self.bounds.batch_bytes
        )

    def _moved_on(self, generation: int) -> bool:
        return self._generation != generation

    def _run(self) -> None:
        """The applier thread: apply batches until nothing has been pending for :data:`LINGER_SECONDS` (nor is
        in the log, held by another process's applier: see :meth:`_others_hold_events`), or until nothing is
        pending once :meth:`stop` was called. Each batch takes a pooled connection and gives it back:
        none is kept while the thread waits for more."""
        pause = 0.0
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(self._due, APPLY_DELAY_SECONDS)
                    self._wanted = False
                try:
                    applied = self._apply_batch()
                    pause = 0.0
                except Exception as error:  # the store itself failed (or reading the log did): the rows stay pending
                    self.statistics.store_failures += 1
                    with self._changed:
                        if self._stopping:
                            log.warning(
                                "lineage store: stopped with events still pending (applied on the next start): %s",
                                error,
                            )
                            self._thread = None
                            return
                    pause = min(max(pause * 2, 0.05), MAX_RETRY_PAUSE_SECONDS)
                    log.warning("lineage store: applying pending events failed, retry in %.2f s: %s", pause, error)
                    with self._changed:
                        self._changed.wait_for(lambda: self._stopping, pause)
                    continue
                if applied:
                    self._unchecked += applied
                    continue
                if self._may_compact and self._unchecked >= log_compaction.CHECK_AFTER_EVENTS:
                    self._unchecked = 0
                    if self.store.engine.dialect.name == "postgresql":  # SQLite reuses the pages itself
                        self._compact_log()
                with self._changed:
                    if not (self._wanted or self._stopping):
                        self._changed.wait_for(lambda: self._wanted or self._stopping, LINGER_SECONDS)
                    if self._wanted and not self._stopping:
                        continue
                    if self._stopping:
                        self._thread = None
                        return
                if self._others_hold_events():
                    continue  # look again after the next linger: their applier may end without applying them
                with self._changed:
                    if not self._wanted:
                        self._thread = None
                        return
        finally:
            with self._changed:
                if self._thread is threading.current_thread():  # ended by something unexpected
                    self._thread = None

    def _others_hold_events(self) -> bool:
        """Whether the log holds events this applier could not take: another process's applier has them locked.
        It may end without applying them (its process killed, its connection cut), and nothing here would look at
        the log again before the next request; so the applier keeps looking, every :data:`LINGER_SECONDS`,
        until the log is empty. A failing store counts as holding events (the next batch reports it)."""
        try:
            with self.store.engine.connect() as conn:
                return conn.execute(select(tables.pending_events.c.seq).limit(1)).first() is not None
        except Exception:
            return True

    def _compact_log(self) -> None:
        """The log found empty after applying: give its files' space back when it has grown
        (:func:`.log_compaction.compact_drained_log`). A lock not free at once is tried again, up to
        :data:`COMPACT_TRIES` times (never waiting on it: an ingest would queue behind); then, or on any other
        failure, it is left for a later drain."""
        for tries_left in range(COMPACT_TRIES - 1, -1, -1):
            try:
                with self.store.write(applied=False) as conn:
                    compacted = log_compaction.compact_drained_log(conn)
                break
            except SQLAlchemyError as error:
                if tries_left and sqlstate(error) == _LOCK_NOT_AVAILABLE and not self._stopping:
                    time.sleep(COMPACT_PAUSE_SECONDS)
                    continue
                self._compaction_failed(error)
                return
        if compacted:
            self.statistics.log_compactions += 1
            log.info("lineage store: the drained ingest log was truncated to give its disk space back")

    def _compaction_failed(self, error: SQLAlchemyError) -> None:
        if sqlstate(error) == _NO_PRIVILEGE:  # the store's role may not truncate it: it never will
            self._may_compact = False
            log.warning(
                "lineage store: the drained ingest log cannot be truncated, its files keep their size: %s", error
            )
            return
        log.debug("lineage store: the ingest log was not compacted (tried at a later drain): %s", error)

    def _apply_batch(self) -> int:
        """Apply the oldest pending events not taken by another applier, within the batch bounds; how many log
        rows were done (at least one when any was taken)."""
        batch: list[_Pending] = []
        done: list[_Pending] = []
        started = time.monotonic()
        alone = False
        try:
            with self.store.write(applied=False) as conn:
                batch = self._take(conn)
                if not batch:
                    return 0
                # One event, on SQLite (whose writer is alone) or since a batch ran past the bound: applied alone
                # with the graph, so that running past the bound is its own doing (see _bounded).
                alone = len(batch) == 1 and (
                    conn.dialect.name != "postgresql" or self._batch_rows < self.bounds.batch_rows
                )
                with self._bounded(conn, alone) as started:
                    self._apply(conn, batch)
                    _done(conn, [one.seq for one in batch])
            done = batch
            self._sized(batch, time.monotonic() - started)
        except Exception as error:  # a refusal by the database, too slow, or a failure of the apply itself (a bug)
            if not batch:
                raise
            slow = self._too_slow(error, started)
            if not slow and _store_failed(error):
                raise
            self.statistics.split += 1
            if slow:
                self._sized(batch, None)
            if slow and alone:  # too slow alone with the graph: trying again would take as long
                self._apply_alone(batch[0], too_slow=True)
                done.append(batch[0])
            elif slow:
                self._retry_slow(batch, started, done)
            else:
                log.info(
                    "lineage store: a batch of %d pending events failed (%s); applying each alone",
                    len(batch),
                    error,
                )
                for one in batch:
                    self._apply_alone(one)
                    done.append(one)
        finally:
            if done:
                self._finished(done)
        return len(done)

    def _sized(self, batch: Sequence[_Pending], took: float | None) -> None:
        """Adjust the rows the next batches take after ``batch`` was applied in ``took`` seconds (None: it ran past
        the time bound): halved to half of ``batch``'s rows after a batch too slow, so that its events are not all
        tried together again, and doubled back (up to ``batch_rows``) after each batch applied within half the
        time bound. A sustained load of wide events then loses a bound's time once, not on every batch."""
        timeout = self.bounds.apply_timeout
        if timeout is None:
            return
        if took is None:
            rows = sum(event_rows(one.event) if isinstance(one.event, LineageEvent) else 1 for one in batch)
            self._batch_rows = max(1, min(self._batch_rows, rows) // 2)
        elif took < timeout / 2:
            self._batch_rows = min(self.bounds.batch_rows, self._batch_rows * 2)

    def _retry_slow(self, batch: Sequence[_Pending], started: float, done: list[_Pending]) -> None:
        """``batch`` ran past the time bound (begun at ``started``): apply its events again one by one, each with
        the bound and alone with the graph (:meth:`_apply_alone`), the ones done added to ``done``. Retries go on
        while they can end within :data:`READ_WAIT_SECONDS` of ``started`` — the first always, so the log moves
        on — and the events not retried stay pending, for the next batches (at most half as many rows now).

        Why one by one rather than in halves: a half that runs past the bound costs the whole bound again, so
        halving a batch of 500 ordinary events around one stuck event costs about nine bounds where one by one
        costs one bound and 499 short transactions; and events that are each within the bound but together
        past it are applied in the time they take, after the one bound lost."""
        timeout = self.bounds.apply_timeout or 0.0
        log.info("lineage store: a batch of %d pending events took too long; applying each alone", len(batch))
        for index, one in enumerate(batch):
            if done and time.monotonic() + timeout > started + READ_WAIT_SECONDS:
                log.info(
                    "lineage store: %d pending events of a batch that took too long are left for the next batches",
                    len(batch) - index,
                )
                return
            self._apply_alone(one)
            done.append(one)

    @contextmanager
    def _bounded(self, conn: Connection, alone: bool = False) -> Iterator[float]:
        """Bound the time of what ``conn`` runs in the block by ``apply_timeout``: a deadline :mod:`.ingest` checks
        before each statement, and on PostgreSQL a statement timeout (and a lock timeout of half of it, so that
        waiting for another writer's lock is a failure of the store, retried, not a slow event) for the rest of the
        transaction, or of the savepoint the block runs in. Yields when the bound starts.

        ``alone``: first make every other writer of the graph wait until the transaction ends (on PostgreSQL the
        lock a reset takes, ``SHARE ROW EXCLUSIVE`` on ``lineage_nodes``, which every graph write of the consumer
        conflicts with; reads and the ingest log's writes go on; SQLite's writer is alone anyway), and start the
        bound once it is held: an apply that still runs past the bound spent the time on its own work, not waiting
        for another transaction's locks, so it is too slow alone (waiting longer than the lock timeout for that
        lock is a failure of the store, retried later)."""
        timeout = self.bounds.apply_timeout
        if timeout is None:
            yield time.monotonic()
            return
        if conn.dialect.name == "postgresql":
            ms = max(1, round(timeout * 1000))
            conn.execute(_TIMEOUTS, {"statement": str(ms), "lock": str(max(1, ms // 2))})
            if alone:
                conn.exec_driver_sql("LOCK TABLE lineage_nodes IN SHARE ROW EXCLUSIVE MODE")
        started = time.monotonic()
        conn.info[APPLY_DEADLINE] = started + timeout
        try:
            yield started
        finally:
            conn.info.pop(APPLY_DEADLINE, None)

    def _too_slow(self, error: Exception, started: float) -> bool:
        """Whether ``error`` says the apply whose bound started at ``started`` ran past ``apply_timeout`` (a cancel
        that came sooner, by an operator, is the store's failure)."""
        if isinstance(error, ApplyTimeout):
            return True
        timeout = self.bounds.apply_timeout
        code = sqlstate(error)
        return code == _QUERY_CANCELED and timeout is not None and time.monotonic() - started >= timeout * 0.9

    def _slow_reason(self, one: _Pending) -> str:
        rows = f" (about {event_rows(one.event):,} rows)" if isinstance(one.event, LineageEvent) else ""
        return (
            f"applying this event{rows} took longer than {self.bounds.apply_timeout:g} s"
            " (ingest_apply_timeout_seconds); it was set aside so that the events logged after it are applied:"
            " raise the bound and requeue it"
        )

    def _take(self, conn: Connection) -> list[_Pending]:
        """The oldest pending rows not taken by another applier, locked for this transaction, within the batch's
        bounds of events, bytes and rows (at least one), their events read."""
        bounds = self.bounds
        taken: list[_Pending] = []
        size = 0
        with self._changed:
            kept = set(self._handed)
        candidates = conn.execute(_candidates(conn.dialect.name), {"most": bounds.batch_events}).all()
        if len(candidates) < bounds.batch_events:
            # Every pending row no other applier holds: what is kept parsed and not among them was applied by
            # another process's applier, or is being applied (kept from before the look: what was logged since
            # may not be in it). Forgotten, so that stale events neither fill the room nor make _due() true.
            self._forget(kept - {key for _seq, key, _length in candidates})
        for seq, key, length in candidates:
            if taken and size + (length or 0) > bounds.batch_bytes:
                break
            taken.append(_Pending(seq, key, length))
            size += length or 0
        if not taken:
            return taken
        self._read(conn, taken)
        rows = 0
        for index, one in enumerate(taken):
            weight = event_rows(one.event) if isinstance(one.event, LineageEvent) else 1
            if index and rows + weight > self._batch_rows:
                with self._changed:  # read already: kept for the next batch, which takes them (left locked now)
                    self._hand(one.event for one in taken[index:] if isinstance(one.event, LineageEvent))
                return taken[:index]
            rows += weight
        return taken

    def _read(self, conn: Connection, taken: Sequence[_Pending]) -> None:
        """Fill in the events of ``taken``: this process's parsed ones, else read from the store and parsed."""
        missing: dict[str, _Pending] = {}
        with self._changed:
            for one in taken:
                if one.size is None:  # its raw event has gone (a reset or prune): not applied, even if kept parsed
                    continue
                one.event = self._handed.get(one.event_key)
                if one.event is None:
                    missing[one.event_key] = one
        e = tables.events.c
        keyed = e.event_key.in_(bindparam("keys", expanding=True))
        query = select(e.event_key, *payloads.payload_columns()).where(keyed)
        keys = list(missing)
        for start in range(0, len(keys), 900):
            for key, *stored in conn.execute(query, {"keys": keys[start : start + 900]}):
                missing[key].event = _parsed(payloads.text_of(conn, *stored))

    def _apply(self, conn: Connection, batch: Sequence[_Pending]) -> None:
        events = [one.event for one in batch if isinstance(one.event, LineageEvent)]
        apply_events(conn, events)
        for one in batch:
            if isinstance(one.event, str):
                self._set_aside(conn, one, one.event)

    def _apply_alone(self, one: _Pending, too_slow: bool = False) -> None:
        """Apply one log row in a transaction of its own, alone with the graph (unless another applier has done it
        meanwhile); set its event aside when the database refuses it alone or it takes too long (at once when
        ``too_slow``: it did alone already). Waiting for another writer past the lock timeout raises, as a
        failure of the store: the row stays pending."""
        started = time.monotonic()
        with self.store.write(applied=False) as conn:
            p, e = tables.pending_events.c, tables.events.c
            taken = (
                select(p.seq, e.event_key)
                .select_from(tables.pending_events.outerjoin(tables.events, e.event_key == p.event_key))
                .where(p.seq == one.seq)
                .with_for_update(of=tables.pending_events, skip_locked=True)
            )
            row = conn.execute(taken).first()
            if row is None:
                return
            if row.event_key is None:  # its raw event went (a reset or prune) since it was read: nothing to apply
                _done(conn, [one.seq])
                return
            slow, reason = too_slow, self._slow_reason(one) if too_slow else None
            if not too_slow:
                callbacks = len(conn.info.get(AFTER_COMMIT, ()))
                try:
                    # alone with the graph (see _bounded); the savepoint's rollback lifts the bound too
                    with conn.begin_nested(), self._bounded(conn, alone=True) as started:
                        self._apply(conn, [one])
                except Exception as error:
                    slow = self._too_slow(error, started)
                    if not slow and _store_failed(error):
                        raise
                    del conn.info.get(AFTER_COMMIT, [])[callbacks:]  # what the failed apply asked for after commit
                    reason = self._reason(one, error, slow)
            if reason is not None:
                self._set_aside(conn, one, reason, slow)
            _done(conn, [one.seq])

    def _reason(self, one: _Pending, error: Exception, slow: bool) -> str:
        if slow:
            return self._slow_reason(one)
        if isinstance(error, SQLAlchemyError):
            return f"the lineage store refused this event: {failure_reason(error)}"
        # never expected: a bug; its traceback goes to the log, the event is kept
        log.error("lineage store: applying event %s failed", one.event_key, exc_info=error)
        return f"applying this event failed: {type(error).__name__}: {str(error)[:300]}"

    def _set_aside(self, conn: Connection, one: _Pending, reason: str, slow: bool = False) -> None:
        self.statistics.unapplied += 1
        self.statistics.timed_out += slow
        log.error("lineage store: event %s cannot be applied to the graph and was set aside: %s", one.event_key, reason)
        row = {"event_key": one.event_key, "failed_at": datetime.now(timezone.utc), "reason": reason[:2000]}
        conn.execute(insert(tables.unapplied_events).values(row))

    def _forget(self, keys: Iterable[str]) -> None:
        """Stop keeping the events of ``keys`` parsed."""
        with self._changed:
            for key in keys:
                handed = self._handed.pop(key, None)
                if handed is not None:
                    self._handed_bytes -= len(handed.payload)

    def _finished(self, batch: Sequence[_Pending]) -> None:
        self._forget(one.event_key for one in batch)
        with self._changed:
            self._backlog[0] = max(0, self._backlog[0] - len(batch))
            self._backlog[1] = max(0, self._backlog[1] - sum(one.size or 0 for one in batch))
            self._generation += 1
            self._changed.notify_all()
        stats = self.statistics
        stats.batches += 1
        stats.events += len(batch)
        stats.largest = max(stats.largest, len(batch))


def _parsed(payload: str) -> LineageEvent | str:
    """A stored event parsed again, or the reason it cannot be (never expected: it was checked when stored)."""
    try:
        return parse_event(json.loads(payload), max_depth=1_000_000, stored=True)  # checked when stored
    except (ValueError, EventError) as error:
        return f"the stored event cannot be read back: {error}"


def _store_failed(error: Exception) -> bool:
    """Whether ``error`` is the store's own failure (retry later), not something the batch's events caused."""
    return isinstance(error, SQLAlchemyError) and is_store_failure(error)


#: ``SET LOCAL statement_timeout`` and ``lock_timeout`` in one statement (milliseconds, as text).
_TIMEOUTS = select(
    func.set_config("statement_timeout", bindparam("statement"), True),
    func.set_config("lock_timeout", bindparam("lock"), True),
)


def _candidates(dialect: str) -> Any:
    """Up to ``:most`` of the oldest pending rows with the size of their raw events, locked for the transaction
    (rows another applier holds are skipped; SQLite's writer holds the whole store)."""
    p, e = tables.pending_events.c, tables.events.c
    return (
        select(p.seq, p.event_key, payloads.size_of(dialect))
        .select_from(tables.pending_events.outerjoin(tables.events, e.event_key == p.event_key))
        .order_by(p.seq)
        .limit(bindparam("most"))
        .with_for_update(of=tables.pending_events, skip_locked=True)
    )


def _backlog_query(dialect: str) -> Any:
    """What the log holds: events, and bytes of their raw events."""
    p, e = tables.pending_events.c, tables.events.c
    return select(func.count(p.seq), func.coalesce(func.sum(payloads.size_of(dialect)), 0)).select_from(
        tables.pending_events.outerjoin(tables.events, e.event_key == p.event_key)
    )


def _done(conn: Connection, seqs: list[int]) -> None:
    p = tables.pending_events.c
    for start in range(0, len(seqs), 900):
        conn.execute(delete(tables.pending_events).where(p.seq.in_(seqs[start : start + 900])))
