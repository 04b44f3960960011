"""The SQL lineage store: tables, migrations, ingest, graph walks and queries (SQLite or PostgreSQL).

:class:`LineageStore` owns the engine. It connects lazily, so building an app (for example when
Airflow imports the plugin in every process) costs nothing until the first request.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import msgspec
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.engine import URL, make_url

from airflow_lineage_provider.consumer.store.graph.cards import GraphCards
from airflow_lineage_provider.consumer.store.graph.identity import apply_namespace_aliases
from airflow_lineage_provider.consumer.store.graph.versioned_cache import VersionedCache
from airflow_lineage_provider.consumer.store.operations import packing
from airflow_lineage_provider.consumer.store.operations.idle_ping import ping_idle_connections
from airflow_lineage_provider.consumer.store.schema.migrations import migrate
from airflow_lineage_provider.consumer.store.write.deferred_apply import ApplyBounds, DeferredApply, check_ingest_apply
from airflow_lineage_provider.consumer.store.write.ingest import AFTER_COMMIT
from airflow_lineage_provider.defaults import GRAPH_CACHE_NODES, INGEST_APPLY
from airflow_lineage_provider.sqlite_engine import WRITE, SqliteSettings, configure_sqlite_engine
from airflow_lineage_provider.sqlite_writers import writer_turn, writers_of

log = logging.getLogger(__name__)


#: SQLite stores: WAL (readers never block the writer), writers begin with BEGIN IMMEDIATE, 30 s busy timeout.
SQLITE_SETTINGS = SqliteSettings(journal_mode="WAL", synchronous="NORMAL", busy_timeout=30.0, immediate="writers")


#: Executions of one statement on a psycopg (3) connection after which psycopg prepares it on the server (its
#: ``prepare_threshold``; psycopg's own default): the ingest's statements are prepared once per connection, then
#: only executed, sparing the server their parsing and planning.
PREPARE_THRESHOLD = 5
#: Environment switch of those server-side prepared statements: ``off`` (``0``, ``false``, ``no``) for a pooler
#: that hands each transaction another server connection (PgBouncer before 1.21 in transaction mode).
PREPARED_STATEMENTS_ENV = "LINEAGE_STORE_PREPARED_STATEMENTS"


def prepared_statements() -> bool:
    """Whether psycopg (3) connections of new engines prepare statements on the server (the environment's
    :data:`PREPARED_STATEMENTS_ENV`)."""
    return os.environ.get(PREPARED_STATEMENTS_ENV, "on").strip().lower() not in {"off", "0", "false", "no"}


def psycopg_installed() -> bool:
    """Whether psycopg 3 (``postgresql+psycopg``) can be used here: installed, with a libpq it can load."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False
    return True


def store_url(url: str | URL) -> URL:
    """``url`` with the PostgreSQL driver the store uses: a URL that names one keeps it (``postgresql+psycopg2://``
    stays on psycopg2); plain ``postgresql://`` (SQLAlchemy's default, psycopg2) becomes ``postgresql+psycopg://``
    when psycopg 3 is installed (the ``postgres`` extra installs it), else stays on psycopg2."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql" and psycopg_installed():
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def create_store_engine(url: str | URL, **kwargs: Any) -> Engine:
    """An engine for a lineage store URL (``sqlite:///path.db``, ``postgresql://...``: see :func:`store_url`).

    SQLite files are opened in WAL mode with a 30 s busy timeout and their folder is created. On psycopg (3) the
    statements are prepared on the server after :data:`PREPARE_THRESHOLD` executions (``prepare_threshold``; none
    with ``LINEAGE_STORE_PREPARED_STATEMENTS=off``, or a ``prepare_threshold`` given in ``connect_args``).
    """
    parsed = store_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:" and not parsed.database.startswith("file:"):
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, **kwargs)
        configure_sqlite_engine(engine, SQLITE_SETTINGS)
        return engine
    if parsed.get_driver_name() == "psycopg2":
        # ON CONFLICT statements are not sent as multi-row VALUES; batch them into few round trips instead.
        kwargs.setdefault("executemany_mode", "values_plus_batch")
    elif parsed.get_driver_name() == "psycopg":
        connect_args = kwargs["connect_args"] = dict(kwargs.get("connect_args") or {})
        connect_args.setdefault("prepare_threshold", PREPARE_THRESHOLD if prepared_statements() else None)
    engine = create_engine(parsed, **kwargs)
    if not kwargs.get("pool_pre_ping"):
        ping_idle_connections(engine)  # pool_pre_ping only for connections idle a while (idle_ping.py)
    return engine


class LineageStore:
    """A lineage store at ``url``: migrated on first use, then handing out connections.

    ``graph_cache_nodes`` bounds the graph cards kept in memory, and the Marquez job objects (0 turns the
    caches off). ``namespace_aliases`` (``alias → canonical``), when given, becomes the store's namespace
    aliases when it is first opened (:func:`.identity.apply_namespace_aliases`: the groups of the datasets
    they concern are derived again if it changed). ``apply_bounds``: how much deferred apply's batches take and
    its log holds (:class:`.ApplyBounds`; its defaults when None).

    Example::

        store = LineageStore("sqlite:////tmp/lineage.db")
        with store.write() as conn:
            ingest_events(conn, events)
        with store.read() as conn:
            graph = walk_graph(conn, root, depth=3)
    """

    def __init__(
        self,
        url: str,
        engine: Engine | None = None,
        graph_cache_nodes: int = GRAPH_CACHE_NODES,
        namespace_aliases: Mapping[str, str] | None = None,
        ingest_apply: str = INGEST_APPLY,
        apply_bounds: ApplyBounds | None = None,
    ) -> None:
        self.url = url
        self._engine = engine
        #: ``alias → canonical`` namespaces to apply when the store is first opened (None: keep the store's).
        self.namespace_aliases = None if namespace_aliases is None else dict(namespace_aliases)
        #: What graph answers show of each node, by node version (see :mod:`.graph.cards`).
        self.graph_cards = GraphCards(graph_cache_nodes)
        #: Marquez's Job objects of job listings, encoded, by node version (see :mod:`..marquez.jobs`).
        self.job_objects: VersionedCache[msgspec.Raw] = VersionedCache(graph_cache_nodes)
        #: The applier of the ingest log when events are applied after the answer (``ingest_apply="deferred"``,
        #: see :mod:`.deferred_apply`); None when each ingest applies its events in its own transaction.
        parsed = engine.url if engine is not None else store_url(url)
        backend = parsed.get_backend_name()
        deferred = check_ingest_apply(ingest_apply, backend) == "deferred"
        self.deferred = DeferredApply(self, apply_bounds) if deferred else None
        self._ready = False
        self._lock = threading.Lock()
        #: The connection :meth:`holding` keeps for its thread.
        self._held = threading.local()
        #: Where this store's write transactions queue (a SQLite file: :mod:`airflow_lineage_provider.sqlite_writers`).
        self._writers = writers_of(parsed.database) if backend == "sqlite" else None

    @property
    def engine(self) -> Engine:
        """The engine, created and migrated on first access."""
        if not self._ready:
            opened = False
            with self._lock:
                if self._engine is None:
                    self._engine = create_store_engine(self.url)
                if not self._ready:
                    migrate(self._engine, self._writers, SQLITE_SETTINGS.busy_timeout)  # queued with other writes
                    if self.namespace_aliases is not None:
                        self._apply_namespace_aliases(self._engine, self.namespace_aliases)
                    self._ready = True
                    opened = True
            if opened and self.deferred is not None:
                self.deferred.wake()  # what a process that stopped logged and did not apply
        assert self._engine is not None
        return self._engine

    def _apply_namespace_aliases(self, engine: Engine, aliases: dict[str, str]) -> None:
        with engine.connect() as conn:
            conn = conn.execution_options(**{WRITE: True})
            driver = conn.connection.dbapi_connection if self._writers is not None else None
            with writer_turn(self._writers, SQLITE_SETTINGS.busy_timeout, driver), conn.begin():
                changed = apply_namespace_aliases(conn, aliases)
        if changed:
            log.info("lineage store: namespace aliases %s applied; %d datasets changed group", aliases, len(changed))

    @contextmanager
    def read(
        self,
        stop: Callable[[], None] | None = None,
        behind: Callable[[int], None] | None = None,
        reader: str | None = None,
    ) -> Iterator[Connection]:
        """A connection in a read transaction; with deferred apply, once the events logged before the call are
        applied (:meth:`.DeferredApply.wait_applied`; ``stop``, called while waiting, may end the wait by
        raising).

        Given ``behind``, the read never fails for the applier being behind: past the read's wait (a bulk load,
        an applier stuck) it reads what is applied, and ``behind`` is called first with about how many events
        logged before the call are not applied yet. ``reader`` (:attr:`.Principal.log_name`) is whom the read is
        for: behind many events it waits only for those its principal logged (read-your-writes)."""
        with self.engine.connect() as conn:
            if self.deferred is not None:
                pending = self.deferred.wait_applied(conn, stop, stale_ok=behind is not None, reader=reader)
                if pending and behind is not None:
                    behind(pending)
            with conn.begin():
                yield conn

    @contextmanager
    def write(self, applied: bool = True) -> Iterator[Connection]:
        """A connection in a write transaction, committed on success (IMMEDIATE on SQLite); then the writes'
        :func:`.ingest.after_commit` callbacks run. Inside :meth:`holding`, the thread's held connection.

        With deferred apply the transaction begins, as a read does, once the events logged before the call are
        applied — what it changes or looks up (a tag, a reset, a prune) is then in the graph. ``applied=False``
        skips that wait: for the ingest's own log and the applier, which must never wait for themselves."""
        with self._write_connection() as conn:
            if applied and self.deferred is not None:
                self.deferred.wait_applied(conn)
            conn = conn.execution_options(**{WRITE: True})
            conn.info.pop(AFTER_COMMIT, None)
            try:
                driver = conn.connection.dbapi_connection if self._writers is not None else None
                with writer_turn(self._writers, SQLITE_SETTINGS.busy_timeout, driver), conn.begin():
                    yield conn
            except BaseException:
                conn.info.pop(AFTER_COMMIT, None)
                raise
            for callback in conn.info.pop(AFTER_COMMIT, ()):  # committed: what the writes asked to do now
                callback()

    def _write_connection(self) -> AbstractContextManager[Connection]:
        """A new pooled connection, closed after the transaction; inside :meth:`holding`, the held one (made
        now if there is none yet or it broke), left open."""
        if not getattr(self._held, "active", False):
            return self.engine.connect()
        held: Connection | None = self._held.conn
        if held is None or held.closed or held.invalidated:
            if held is not None:
                held.close()
            self._held.conn = held = self.engine.connect()
        return nullcontext(held)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """While the block runs, this thread's :meth:`write` transactions share one connection instead of taking
        one from the pool each (the grouped ingest's writer thread: a pool checkout, its events and the reset on
        return are a noticeable part of a small group's write). It is taken at the first write, replaced at the
        next write if it broke, and goes back to the pool when the block ends."""
        if getattr(self._held, "active", False):
            yield  # already held by this thread
            return
        self._held.active, self._held.conn = True, None
        try:
            yield
        finally:
            conn, self._held.conn, self._held.active = self._held.conn, None, False
            if conn is not None:
                conn.close()

    def pack_events(
        self, redraw: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> packing.PackResult:
        """Pack the raw events the store holds as text with its payload dictionary (drawn first when ``redraw`` or
        when it has none), a batch per transaction; ``progress(done, total)`` after each (see :mod:`.packing`)."""
        return packing.pack_events(lambda: self.write(applied=False), redraw=redraw, progress=progress)

    def dispose(self) -> None:
        """Stop the applier of the ingest log (deferred apply: it applies what is pending first, see
        :meth:`.DeferredApply.stop`) and close every pooled connection. The store can be used again: it then
        connects anew."""
        if self.deferred is not None:
            self.deferred.stop()
        if self._engine is not None:
            self._engine.dispose()
