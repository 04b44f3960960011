"""The lineage store as code outside the consumer reads it: never migrated, never applied to, never written.

An Airflow worker runs ``CollectLineageOperator`` with whatever release of this package its image has, against the
store a consumer of perhaps another release owns. So the reader (:class:`ReadOnlyStore`) only reads: it checks the
store's schema version once and refuses, naming both versions, a store it does not read (never migrating it), and
it leaves applying logged events to the consumer (``ingest_apply = deferred``, :mod:`.deferred_apply`): a read
waits a bounded time for what was logged before it to be applied, then reads what is applied and says how far
behind the graph is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.engine import make_url

from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, StoreVersionError, current_version

log = logging.getLogger(__name__)

#: How long a read waits for the events logged before it to be applied by the consumer, at most.
APPLIED_WAIT_SECONDS = 10.0
#: How often it looks again meanwhile.
APPLIED_POLL_SECONDS = 0.05


def shown_url(url: str) -> str:
    """``url`` with its password hidden, for messages."""
    return make_url(url).render_as_string(hide_password=True)


def version_problem(url: str, found: int | None) -> str | None:
    """What is wrong with a store at schema version ``found`` (None: no lineage tables) for this release; None when
    it reads it."""
    where = f"the lineage store at {shown_url(url)}"
    if found is None:
        return f"{where} has no lineage tables yet: start its consumer (airflow-lineage serve) once to create it"
    if found > LATEST:
        return (
            f"{where} is at schema version {found}, newer than version {LATEST} this release of "
            "airflow-lineage-provider reads: upgrade the package where this runs to the consumer's release"
        )
    if found < LATEST:
        return (
            f"{where} is at schema version {found}, older than version {LATEST} this release reads: upgrade the "
            "consumer (it migrates the store when it starts), or run this release's readers against it only after"
        )
    return None


def _missing_sqlite_file(url: str) -> bool:
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return False
    return not Path(database).expanduser().exists()


class ReadOnlyStore:
    """Read transactions on the lineage store at ``url``; see the module.

    Raises :class:`StoreVersionError` on first use when the store is not at the schema version this release reads.
    """

    def __init__(self, url: str, applied_wait: float = APPLIED_WAIT_SECONDS) -> None:
        self.url = url
        self.applied_wait = applied_wait
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    @property
    def engine(self) -> Engine:
        """The engine, created and its schema version checked on first access."""
        with self._lock:
            if self._engine is None:
                if _missing_sqlite_file(self.url):  # connecting would create an empty one
                    raise StoreVersionError(str(version_problem(self.url, None)))
                engine = create_store_engine(self.url)
                try:
                    with engine.connect() as conn:
                        problem = version_problem(self.url, current_version(conn))
                except BaseException:
                    engine.dispose()
                    raise
                if problem is not None:
                    engine.dispose()
                    raise StoreVersionError(problem)
                self._engine = engine
            return self._engine

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a read transaction, once the events logged before the call are applied (or
        :attr:`applied_wait` seconds passed: then what is applied, with a warning saying how many are not)."""
        with self.engine.connect() as conn:
            self._wait_applied(conn)
            with conn.begin():
                yield conn

    def _wait_applied(self, conn: Connection) -> None:
        p = tables.pending_events.c
        head = conn.execute(select(func.max(p.seq))).scalar()
        conn.rollback()
        if head is None:
            return
        deadline = time.monotonic() + self.applied_wait
        left = select(func.count()).select_from(tables.pending_events).where(p.seq <= head)
        while True:
            behind = conn.execute(left).scalar() or 0
            conn.rollback()
            if not behind:
                return
            if time.monotonic() >= deadline:
                log.warning(
                    "lineage store at %s: %d events logged before this read are not applied yet after %g s (the "
                    "consumer applying them is behind or not running); reading the graph as applied",
                    shown_url(self.url),
                    behind,
                    self.applied_wait,
                )
                return
            time.sleep(APPLIED_POLL_SECONDS)

    def dispose(self) -> None:
        """Close the pooled connections (the store can be used again: it then connects anew)."""
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None
