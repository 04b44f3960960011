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
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.ingest import IngestResult, ingest_events
from airflow_lineage_provider.consumer.store.retention import PruneResult, prune
from airflow_lineage_provider.consumer.validation import LineageEvent

log = logging.getLogger(__name__)
T = TypeVar("T")


class StoreUnavailable(RuntimeError):
    """The lineage store cannot be written or read right now (answered with 503 and Retry-After)."""


def _is_store_failure(error: SQLAlchemyError) -> bool:
    """The store itself failed (unreachable, locked, every pooled connection busy), not the event."""
    if isinstance(error, (OperationalError, PoolTimeout)):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


#: PostgreSQL SQLSTATEs of transient conflicts between concurrent writers: retried, never reported.
_RETRYABLE = {"40001", "40P01"}
ATTEMPTS = 5


def _retryable(error: SQLAlchemyError) -> bool:
    return getattr(getattr(error, "orig", None), "pgcode", None) in _RETRYABLE


def _retrying(what: str, work: Callable[[Connection], T], store: LineageStore) -> T:
    """``work`` in one write transaction, retried after a deadlock or serialization conflict."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with store.write() as conn:
                return work(conn)
        except OperationalError as error:
            if not _retryable(error) or attempt == ATTEMPTS:
                raise
            log.info("retrying %s after a conflict with another writer (%s): %s", what, attempt, _reason(error))
            time.sleep(0.01 * attempt * attempt)
    raise AssertionError("unreachable")


def _write(store: LineageStore, events: Sequence[LineageEvent]) -> IngestResult:
    return _retrying("a lineage ingest", lambda conn: ingest_events(conn, events), store)


def store_events(store: LineageStore, events: Sequence[LineageEvent]) -> tuple[IngestResult, dict[int, str]]:
    """Store ``events``; return the counts and ``index → error`` for events the database refused."""
    try:
        return _write(store, events), {}
    except SQLAlchemyError as error:
        if _is_store_failure(error):
            raise StoreUnavailable(f"the lineage store is unavailable: {_reason(error)}") from error
        if len(events) == 1:
            return IngestResult(), {0: f"the lineage store refused this event: {_reason(error)}"}
    total, errors = IngestResult(), {}
    for index, event in enumerate(events):
        result, failed = store_events(store, [event])
        total.stored += result.stored
        total.duplicates += result.duplicates
        if failed:
            errors[index] = failed[0]
    return total, errors


def _reason(error: SQLAlchemyError) -> str:
    original = getattr(error, "orig", None)
    return str(original or error).strip().splitlines()[0][:300]


class RetentionSchedule:
    """Runs :func:`prune` in a background thread at most once per interval, triggered by ingest."""

    def __init__(self, settings: ConsumerSettings) -> None:
        self.days = settings.retention_days
        self.interval = settings.retention_check_interval_hours * 3600
        self._last = 0.0
        self._lock = threading.Lock()

    def maybe_run(self, store: LineageStore) -> None:
        """Start a prune when retention is on and the interval has passed since the last one."""
        if self.days is None:
            return
        with self._lock:
            now = time.monotonic()
            if self._last and now - self._last < self.interval:
                return
            self._last = now
        threading.Thread(target=self._run, args=(store,), name="lineage-retention", daemon=True).start()

    def _run(self, store: LineageStore) -> None:
        try:
            result = prune_now(store, self.days or 0)
            log.info("lineage retention pruned %s events and %s runs", result.events, result.runs)
        except Exception:
            log.exception("lineage retention failed; it will be tried again after the next interval")


def prune_now(store: LineageStore, days: float) -> PruneResult:
    """Prune events and runs older than ``days`` days now."""
    cutoff = datetime.now(timezone.utc) - timedelta(days=days)
    try:
        return _retrying("lineage retention", lambda conn: prune(conn, cutoff), store)
    except OperationalError as error:
        raise StoreUnavailable(f"the lineage store is unavailable: {_reason(error)}") from error
