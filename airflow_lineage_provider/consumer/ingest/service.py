"""What the ingest endpoints do between parsing and answering: store, isolate bad events, retention.

Storage errors caused by an event's content (a value the database refuses) are reported against that
event, after the batch is retried one event at a time so that the others are still stored. Errors of
the store itself (unreachable, locked, disk full) are :class:`StoreUnavailable`, answered with 503 so
senders retry; they are never blamed on the input.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from airflow_lineage_provider.consumer.security.access import NamespaceScope
from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.operations.reset import (
    ResetCounts,
    check_confined,
    reset_all,
    reset_namespace,
)
from airflow_lineage_provider.consumer.store.operations.retention import (
    PruneRecord,
    last_scheduled_prune,
    prune,
    record_prune,
)
from airflow_lineage_provider.consumer.store.read.visibility import visible_namespaces
from airflow_lineage_provider.consumer.store.write.deferred_apply import DeferredApply
from airflow_lineage_provider.consumer.store.write.failures import failure_reason, is_store_failure, sqlstate
from airflow_lineage_provider.consumer.store.write.ingest import IngestResult, ingest_events, log_events
from airflow_lineage_provider.consumer.store.write.unapplied import Requeued, count_unapplied, requeue
from airflow_lineage_provider.consumer.validation import LineageEvent

log = logging.getLogger(__name__)
T = TypeVar("T")
#: Who posted each event: its key → :attr:`.Principal.log_name`.
Senders = Mapping[str, str]


class StoreUnavailable(RuntimeError):
    """The lineage store cannot be written or read right now (answered with 503 and Retry-After)."""


#: PostgreSQL SQLSTATEs of transient conflicts between concurrent writers: retried, never reported.
_RETRYABLE = {"40001", "40P01"}
ATTEMPTS = 5


def _retryable(error: SQLAlchemyError) -> bool:
    return sqlstate(error) in _RETRYABLE


def _retrying(what: str, work: Callable[[Connection], T], store: LineageStore, applied: bool = True) -> T:
    """``work`` in one write transaction, retried after a deadlock or serialization conflict, and once on a new
    connection when the one it ran on turned out dead (a database restarted, a connection the server closed:
    the transaction did not happen, or happened and its events are then duplicates). ``applied``: as
    :meth:`.LineageStore.write`'s (False only for the ingest itself)."""
    reconnected = False
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with store.write(applied) as conn:
                return work(conn)
        except OperationalError as error:
            if error.connection_invalidated and not reconnected:
                reconnected = True
                log.info("retrying %s on a new connection: %s", what, failure_reason(error))
                continue
            if not _retryable(error) or attempt == ATTEMPTS:
                raise
            log.info("retrying %s after a conflict with another writer (%s): %s", what, attempt, failure_reason(error))
            time.sleep(0.01 * attempt * attempt)
    raise AssertionError("unreachable")


def _write(store: LineageStore, events: Sequence[LineageEvent], senders: Senders | None) -> IngestResult:
    if store.deferred is None:
        return _retrying("a lineage ingest", lambda conn: ingest_events(conn, events), store)
    result = _retrying("a lineage ingest", lambda conn: log_events(conn, events, senders), store, applied=False)
    if result.inserted:
        store.deferred.logged(event for event in events if event.key in result.inserted)
    return result


def write_events(store: LineageStore, events: Sequence[LineageEvent], senders: Senders | None = None) -> IngestResult:
    """Store ``events`` in one transaction. Raises :class:`StoreUnavailable` when the store itself failed, and
    the database's ``SQLAlchemyError`` when it refused a value (whose, the caller finds out). ``senders``: who
    posted each event (key → :attr:`.Principal.log_name`), for read-your-writes with deferred apply."""
    try:
        return _write(store, events, senders)
    except SQLAlchemyError as error:
        if is_store_failure(error):
            raise StoreUnavailable(f"the lineage store is unavailable: {failure_reason(error)}") from error
        raise


def store_events(
    store: LineageStore, events: Sequence[LineageEvent], senders: Senders | None = None
) -> tuple[IngestResult, dict[int, str]]:
    """Store ``events`` (posted by ``senders``, as :func:`write_events`); return the counts and ``index → error``
    for events the database refused."""
    try:
        return write_events(store, events, senders), {}
    except StoreUnavailable:
        raise
    except SQLAlchemyError as error:
        if len(events) == 1:
            return IngestResult(), {0: f"the lineage store refused this event: {failure_reason(error)}"}
    total, errors = IngestResult(), {}
    for index, event in enumerate(events):
        result, failed = store_events(store, [event], senders)
        total.stored += result.stored
        total.duplicates += result.duplicates
        if failed:
            errors[index] = failed[0]
    return total, errors


#: Seconds before a failed timer prune is tried again (at most the interval itself).
RETRY_SECONDS = 300.0
#: PostgreSQL advisory lock taken by scheduled prunes, so two processes due at once prune once.
_PRUNE_LOCK = 6580007


class RetentionSchedule:
    """When an app prunes by itself: every ``retention_check_interval_hours`` on a timer while the app runs,
    and after an ingest at most once per interval per process. Nothing without ``retention_days``.

    The timer (a daemon thread, :meth:`start` and :meth:`stop`, run by the app's lifespan) counts the interval
    from the store's last scheduled prune (``timer`` or ``ingest``, in ``lineage_prunes``), whichever process
    ran it: several processes sharing a store prune about once per interval between them, and a restarted
    one does not prune again before the interval has passed. An app whose lifespan never runs (built and
    called in code) still prunes after ingests.
    """

    def __init__(self, settings: ConsumerSettings) -> None:
        self.days = settings.retention_days
        self.interval = settings.retention_check_interval_hours * 3600
        #: When the timer will next check, while it runs (UTC); None otherwise.
        self.next_check: datetime | None = None
        self._last = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the timer thread is running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, store: LineageStore) -> bool:
        """Start the timer (once; again after :meth:`stop`); False when retention is off."""
        if self.days is None:
            return False
        with self._lock:
            if not self.running:
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._tick, args=(store, self._stop), name="lineage-retention-timer", daemon=True
                )
                self._thread.start()
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the timer and wait up to ``timeout`` seconds for a prune in progress to end."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None:
            thread.join(timeout)
        self.next_check = None

    def maybe_run(self, store: LineageStore) -> None:
        """After an ingest: start a prune when retention is on and this process has not started one within
        the interval (the first ingest of a process always does)."""
        if self.days is None:
            return
        with self._lock:
            now = time.monotonic()
            if self._last and now - self._last < self.interval:
                return
            self._last = now
        threading.Thread(target=self._after_ingest, args=(store,), name="lineage-retention", daemon=True).start()

    def _after_ingest(self, store: LineageStore) -> None:
        try:
            prune_now(store, self.days or 0, trigger="ingest")
        except Exception:
            log.exception("lineage retention failed; it will be tried again after the next interval")

    def _tick(self, store: LineageStore, stop: threading.Event) -> None:
        """The timer: wait until a scheduled prune is due, prune, and again, until ``stop`` is set."""
        while not stop.is_set():
            try:
                wait = self._seconds_until_due(store)
                if wait <= 0:
                    prune_when_due(store, self.days or 0, self.interval)
                    continue
            except Exception:
                log.exception("lineage retention on the timer failed; it will be tried again")
                wait = min(self.interval, RETRY_SECONDS)
            self.next_check = datetime.now(timezone.utc) + timedelta(seconds=wait)
            stop.wait(wait)

    def _seconds_until_due(self, store: LineageStore) -> float:
        with store.read() as conn:
            last = last_scheduled_prune(conn)
        if last is None:
            return 0.0
        return (last + timedelta(seconds=self.interval) - datetime.now(timezone.utc)).total_seconds()


def _pruning(
    days: float, trigger: str, due_after: float | None = None, namespaces: NamespaceScope | None = None
) -> Callable[[Connection], PruneRecord | None]:
    """The work of one prune in a write transaction: prune, and record it in ``lineage_prunes``.

    With ``due_after`` (seconds), first check under a lock that no scheduled prune ran within that time
    (another process may just have pruned): None, and nothing done, when one did. With ``namespaces`` (a
    limited key's patterns), prune only what lies wholly inside the namespaces they show
    (:func:`..store.operations.retention.prune`).
    """

    def work(conn: Connection) -> PruneRecord | None:
        started = time.perf_counter()
        if due_after is not None:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PRUNE_LOCK})")
            last = last_scheduled_prune(conn)
            if last is not None and datetime.now(timezone.utc) - last < timedelta(seconds=due_after):
                return None
        at = datetime.now(timezone.utc)
        cutoff = at - timedelta(days=days)
        result = prune(conn, cutoff, visible_namespaces(conn, namespaces))
        record = PruneRecord(at, cutoff, trigger, result.events, result.runs, time.perf_counter() - started)
        record_prune(conn, record)
        return record

    return work


def _run_prune(store: LineageStore, work: Callable[[Connection], T]) -> T:
    try:
        return _retrying("lineage retention", work, store)
    except OperationalError as error:
        raise StoreUnavailable(f"the lineage store is unavailable: {failure_reason(error)}") from error


def _logged(record: PruneRecord, namespaces: NamespaceScope | None = None) -> PruneRecord:
    within = "" if namespaces is None else f" within namespaces matching {list(namespaces.patterns)}"
    log.info(
        "lineage retention (%s) pruned %s events and %s runs older than %s%s",
        record.trigger,
        record.events,
        record.runs,
        record.cutoff.isoformat(timespec="seconds"),
        within,
    )
    return record


def prune_now(
    store: LineageStore, days: float, trigger: str = "api", namespaces: NamespaceScope | None = None
) -> PruneRecord:
    """Prune events and runs older than ``days`` days now, and record the prune (``trigger``: what asked).

    ``namespaces``: a limited key's patterns; only what lies wholly inside the namespaces they show goes, and
    the record holds those counts."""
    record = _run_prune(store, _pruning(days, trigger, namespaces=namespaces))
    assert record is not None
    return _logged(record, namespaces)


def prune_when_due(store: LineageStore, days: float, interval: float) -> PruneRecord | None:
    """The timer's prune: as :func:`prune_now`, unless a scheduled prune ran in the last ``interval`` seconds
    (checked in the same transaction, under an advisory lock on PostgreSQL): None then."""
    record = _run_prune(store, _pruning(days, "timer", due_after=interval))
    return None if record is None else _logged(record)


def reset_now(
    store: LineageStore, namespace: str | None, dry_run: bool = False, namespaces: NamespaceScope | None = None
) -> ResetCounts:
    """Reset the whole store (``namespace`` None) or one namespace (:mod:`..store.operations.reset`); a dry run counts
    what would go in a read transaction. After a reset this process's cached node data is dropped: a node
    made later may get the id of one that went (SQLite reuses the highest ids), at its first version.

    ``namespaces``: a limited key's patterns; a namespace reset then raises :class:`.SharedNamespace`, changing
    nothing, when it would touch what lies outside the namespaces they show (checked in the same transaction)."""

    def work(conn: Connection) -> ResetCounts:
        if namespace is None:
            return reset_all(conn, dry_run)
        return reset_namespace(conn, namespace, dry_run, visible_namespaces(conn, namespaces))

    try:
        if dry_run:
            with store.read() as conn:
                return work(conn)
        if namespace is not None and namespaces is not None:  # a cheap refusal first: no lock, nobody held off
            with store.read() as conn:
                visible = visible_namespaces(conn, namespaces)
                if visible is not None:
                    check_confined(conn, namespace, visible)
        counts = _retrying("a lineage reset", work, store)  # after what was logged before it is applied: it goes too
    except OperationalError as error:
        raise StoreUnavailable(f"the lineage store is unavailable: {failure_reason(error)}") from error
    _forget_cached_nodes(store)
    return counts


#: The store's in-memory caches of node data, keyed by node id and version.
_NODE_CACHES = ("graph_cards", "job_objects")


def _forget_cached_nodes(store: LineageStore) -> None:
    """Replace the store's node caches with empty ones of the same capacity."""
    for name in _NODE_CACHES:
        cache = getattr(store, name, None)
        if cache is not None:
            setattr(store, name, type(cache)(cache.capacity))


def requeue_unapplied(store: LineageStore) -> tuple[Requeued, int]:
    """Put the events deferred apply set aside back in the ingest log (:func:`..store.write.unapplied.requeue`) and
    return once they are applied or set aside again; what was done, and how many events are set aside after.

    A store that applies inline (it may hold set-aside events of a deferred server that shared it) applies
    them with an applier of its own for the call. Raises :class:`.ApplyBacklog` when they are not done within
    the read wait (the applier is behind or failing), :class:`StoreUnavailable` when the store fails."""
    applier = store.deferred or DeferredApply(store)
    try:
        done = _retrying("a requeue of set-aside events", requeue, store)
        if done.requeued:
            applier.wake()
            with store.engine.connect() as conn:
                applier.wait_applied(conn)
        with store.read() as conn:
            left = count_unapplied(conn)
    except OperationalError as error:
        raise StoreUnavailable(f"the lineage store is unavailable: {failure_reason(error)}") from error
    finally:
        if applier is not store.deferred:
            applier.stop()
    log.info("lineage store: %d set-aside events put back in the ingest log; %d set aside now", done.requeued, left)
    return done, left
