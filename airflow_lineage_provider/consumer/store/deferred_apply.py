"""Deferred apply: an ingest answered once its events are logged, and applied to the graph in large batches.

With ``ingest_apply = deferred`` an ingest transaction stores each new raw event (``lineage_events``, as always:
the answer's stored and duplicate counts are known at once) and logs it in ``lineage_pending_events``
(:func:`.ingest.log_events`); it commits and is answered. A 201 still means committed: the event is durable, and
so is the debt of applying it. A thread of the serving process (:class:`DeferredApply`, started when something
is logged, when a read has to wait, and when the store is first opened, so a server killed mid-load applies on
restart what it logged) then takes up to :data:`APPLY_BATCH_EVENTS` pending events at a time, oldest first, and
applies them to the graph (:func:`.ingest.apply_events`) in one transaction that also deletes their log rows:
an event is applied exactly once, whoever crashes when.

Why: eight single-event senders make groups of at most eight events, and on PostgreSQL most of what such a group
costs is per transaction and per statement — a dozen upserts that cost nearly as much for 8 rows as for 500.
Logging costs two small inserts per group; applying in batches of hundreds costs a fraction per event of
applying groups of 8 (``docs/benchmarks.md``, issue 18, section 4).

Reads stay as fresh as before: :meth:`LineageStore.read <..LineageStore.read>` first waits until every event
logged before the read began is applied (:meth:`DeferredApply.wait_applied`; one indexed ``max(seq)`` when
nothing is pending), so a client that posts an event and then reads sees it, as with inline apply.

Several processes may share a store: each one's applier takes pending rows with ``FOR UPDATE SKIP LOCKED``
(PostgreSQL), so none is applied twice and a dead process's rows are taken by the others. A batch the database
refuses is applied again event by event; an event it still refuses alone is moved to ``lineage_unapplied_events``
with the reason (its raw event stays stored), counted in the statistics of ``GET /api/v1/retention``,
never silently dropped. A failure of the store itself (unreachable, restarted, a deadlock) leaves the rows pending
and is retried with a growing pause.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.exc import SQLAlchemyError

from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.failures import failure_reason, is_store_failure
from airflow_lineage_provider.consumer.store.ingest import AFTER_COMMIT, apply_events
from airflow_lineage_provider.consumer.validation import EventError, LineageEvent, parse_event
from airflow_lineage_provider.defaults import INGEST_APPLY_MODES

if TYPE_CHECKING:
    from airflow_lineage_provider.consumer.store import LineageStore

log = logging.getLogger(__name__)

#: The name of the applier thread (a thread of the serving process, see :class:`DeferredApply`).
APPLIER_THREAD = "lineage-apply"
#: Most pending events applied in one transaction.
APPLY_BATCH_EVENTS = 500
#: How long the applier waits after something was logged, for more to come, before it applies a batch (at once
#: when a read waits, or :data:`APPLY_BATCH_EVENTS` are waiting): what makes batches large under load.
APPLY_DELAY_SECONDS = float(os.environ.get("LINEAGE_APPLY_DELAY_MS", "50")) / 1000
#: How long the applier thread waits for more to apply before it ends (the next log or read starts another).
LINGER_SECONDS = 1.0
#: Longest a read waits for the events logged before it to be applied before it is answered 503.
READ_WAIT_SECONDS = 30.0
#: How often a waiting read looks at the log again when no applier of this process has told it anything (the
#: events it waits for may be another process's).
READ_POLL_SECONDS = 0.02
#: Parsed events this process logged and has not applied yet, kept so its applier need not parse them again.
HANDED_EVENTS = 20_000
#: Longest pause between attempts while the store itself fails.
MAX_RETRY_PAUSE_SECONDS = 5.0
#: Longest :meth:`DeferredApply.stop` waits for the applier to apply what is pending and end.
STOP_SECONDS = 30.0


class ApplyBacklog(RuntimeError):
    """A read waited :data:`READ_WAIT_SECONDS` and the events logged before it are still not applied (answered
    503 with Retry-After: the store is behind or failing)."""


def check_ingest_apply(mode: str, backend: str) -> str:
    """``inline`` or ``deferred`` for a store on ``backend`` (``sqlite``, ``postgresql``) set to ``mode``, one of
    :data:`~airflow_lineage_provider.defaults.INGEST_APPLY_MODES` (``inline``: applied in the ingest's transaction;
    ``deferred``: as this module describes; ``auto``: deferred on PostgreSQL, inline elsewhere); else a
    ``ValueError`` naming it and the choices.

    Why ``auto`` chooses so: on PostgreSQL deferred apply took 8 concurrent single-event senders 1.3-2.1x
    faster, with a third to a half less database work per event and a lower one-client latency; on SQLite it
    gained little with one server process and lost a third with two (their appliers and writers take turns on
    the one write lock), and Airflow's API server runs several (``docs/benchmarks.md``, issue 18)."""
    if mode not in INGEST_APPLY_MODES:
        raise ValueError(f"ingest_apply must be one of {', '.join(INGEST_APPLY_MODES)}, got {mode!r}")
    if mode == "auto":
        return "deferred" if backend == "postgresql" else "inline"
    return mode


@dataclass
class ApplyStatistics:
    """What this process's applier did since the store was opened (for logs, tests and benchmarks)."""

    batches: int = 0
    events: int = 0
    #: The most events one batch applied.
    largest: int = 0
    #: Batches the database refused, applied again event by event; events moved to ``lineage_unapplied_events``.
    split: int = 0
    unapplied: int = 0
    #: Attempts that failed because the store itself did (retried).
    store_failures: int = 0
    #: Reads that found events to wait for.
    waited_reads: int = 0


@dataclass(frozen=True)
class _Pending:
    seq: int
    event_key: str
    payload: str | None  # None: its raw event has gone (a reset or prune raced it): nothing to apply


class DeferredApply:
    """The applier of ``store``'s ingest log in this process (see the module)."""

    def __init__(self, store: LineageStore, batch_events: int = APPLY_BATCH_EVENTS) -> None:
        if batch_events < 1:
            raise ValueError(f"batch_events must be at least 1, got {batch_events}")
        self.store = store
        self.batch_events = batch_events
        self.statistics = ApplyStatistics()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        #: Set by :meth:`logged` and :meth:`wake`: there may be something to apply the thread has not looked for.
        self._wanted = False
        #: Bumped after each committed batch (waiting reads look again).
        self._generation = 0
        self._handed: dict[str, LineageEvent] = {}
        #: Reads waiting for the applier (it then applies at once).
        self._readers = 0
        #: Set while :meth:`stop` runs: the thread applies what is pending without waiting, then ends.
        self._stopping = False

    def logged(self, events: Iterable[LineageEvent]) -> None:
        """``events`` were logged by a transaction of this process that has committed: apply them soon."""
        with self._changed:
            if len(self._handed) < HANDED_EVENTS:
                self._handed.update((event.key, event) for event in events)
        self.wake()

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

    def wait_applied(self, conn: Connection) -> None:
        """Return once every event logged before this call is applied, reading the log on ``conn`` (outside a
        transaction: each look is its own). Raises :class:`ApplyBacklog` after :data:`READ_WAIT_SECONDS`."""
        p = tables.pending_events.c
        head = conn.execute(select(func.max(p.seq))).scalar()
        conn.rollback()
        if head is None:
            return
        self.statistics.waited_reads += 1
        with self._changed:
            self._readers += 1
        try:
            self._wait_for(conn, head)
        finally:
            with self._changed:
                self._readers -= 1

    def _wait_for(self, conn: Connection, head: int) -> None:
        p = tables.pending_events.c
        deadline = time.monotonic() + READ_WAIT_SECONDS
        left = select(p.seq).where(p.seq <= head).limit(1)
        while True:
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
        return self._stopping or self._readers > 0 or len(self._handed) >= self.batch_events

    def _moved_on(self, generation: int) -> bool:
        return self._generation != generation

    def _run(self) -> None:
        """The applier thread: apply batches until nothing has been pending for :data:`LINGER_SECONDS`, or until
        nothing is pending once :meth:`stop` was called. Each batch takes a pooled connection and gives it back:
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
                    continue
                with self._changed:
                    if not (self._wanted or self._stopping):
                        self._changed.wait_for(lambda: self._wanted or self._stopping, LINGER_SECONDS)
                    if self._stopping or not self._wanted:
                        self._thread = None
                        return
        finally:
            with self._changed:
                if self._thread is threading.current_thread():  # ended by something unexpected
                    self._thread = None

    def _apply_batch(self) -> int:
        """Apply the oldest pending events not taken by another applier; how many log rows were done."""
        batch: list[_Pending] = []
        try:
            with self.store.write(applied=False) as conn:
                batch = _take(conn, self.batch_events)
                if not batch:
                    return 0
                self._apply(conn, batch)
                _done(conn, [one.seq for one in batch])
        except Exception as error:  # a refusal by the database, or a failure of the apply itself (a bug)
            if _store_failed(error) or not batch:
                raise
            self.statistics.split += 1
            log.info("lineage store: a batch of %d pending events failed (%s); applying each alone", len(batch), error)
            for one in batch:
                self._apply_alone(one)
        self._finished(batch)
        return len(batch)

    def _apply(self, conn: Connection, batch: Sequence[_Pending]) -> None:
        events, unreadable = [], []
        for one in batch:
            event = self._event(one)
            if isinstance(event, str):
                unreadable.append((one, event))
            elif event is not None:
                events.append(event)
        apply_events(conn, events)
        for one, reason in unreadable:
            self._set_aside(conn, one, reason)

    def _apply_alone(self, one: _Pending) -> None:
        """Apply one log row in a transaction of its own (unless another applier has done it meanwhile); set its
        event aside when the database refuses it alone."""
        with self.store.write(applied=False) as conn:
            p = tables.pending_events.c
            taken = select(p.seq).where(p.seq == one.seq).with_for_update(skip_locked=True)
            if conn.execute(taken).first() is None:
                return
            callbacks = len(conn.info.get(AFTER_COMMIT, ()))
            try:
                with conn.begin_nested():
                    self._apply(conn, [one])
            except Exception as error:
                if _store_failed(error):
                    raise
                del conn.info.get(AFTER_COMMIT, [])[callbacks:]  # what the failed apply asked for after commit
                if isinstance(error, SQLAlchemyError):
                    reason = f"the lineage store refused this event: {failure_reason(error)}"
                else:  # never expected: a bug; its traceback goes to the log, the event is kept
                    log.exception("lineage store: applying event %s failed", one.event_key)
                    reason = f"applying this event failed: {type(error).__name__}: {str(error)[:300]}"
                self._set_aside(conn, one, reason)
            _done(conn, [one.seq])

    def _event(self, one: _Pending) -> LineageEvent | str | None:
        """The event of a log row (this process's parsed one, else parsed from its stored JSON); None when its
        raw event has gone; the reason when it cannot be read back (never expected: it was checked when stored)."""
        with self._changed:
            handed = self._handed.get(one.event_key)
        if handed is not None:
            return handed
        if one.payload is None:
            return None
        try:
            return parse_event(json.loads(one.payload), max_depth=1_000_000, stored=True)  # checked when stored
        except (ValueError, EventError) as error:
            return f"the stored event cannot be read back: {error}"

    def _set_aside(self, conn: Connection, one: _Pending, reason: str) -> None:
        self.statistics.unapplied += 1
        log.error("lineage store: event %s cannot be applied to the graph and was set aside: %s", one.event_key, reason)
        row = {"event_key": one.event_key, "failed_at": datetime.now(timezone.utc), "reason": reason[:2000]}
        conn.execute(insert(tables.unapplied_events).values(row))

    def _finished(self, batch: Sequence[_Pending]) -> None:
        with self._changed:
            for one in batch:
                self._handed.pop(one.event_key, None)
            self._generation += 1
            self._changed.notify_all()
        stats = self.statistics
        stats.batches += 1
        stats.events += len(batch)
        stats.largest = max(stats.largest, len(batch))


def _store_failed(error: Exception) -> bool:
    """Whether ``error`` is the store's own failure (retry later), not something the batch's events caused."""
    return isinstance(error, SQLAlchemyError) and is_store_failure(error)


def _take(conn: Connection, most: int) -> list[_Pending]:
    """Up to ``most`` of the oldest pending rows, with their raw events, locked for this transaction (rows another
    applier holds are skipped; SQLite's writer holds the whole store)."""
    p, e = tables.pending_events.c, tables.events.c
    query = (
        select(p.seq, p.event_key, e.payload)
        .select_from(tables.pending_events.outerjoin(tables.events, e.event_key == p.event_key))
        .order_by(p.seq)
        .limit(most)
        .with_for_update(of=tables.pending_events, skip_locked=True)
    )
    return [_Pending(seq, key, payload) for seq, key, payload in conn.execute(query)]


def _done(conn: Connection, seqs: list[int]) -> None:
    p = tables.pending_events.c
    for start in range(0, len(seqs), 900):
        conn.execute(delete(tables.pending_events).where(p.seq.in_(seqs[start : start + 900])))
