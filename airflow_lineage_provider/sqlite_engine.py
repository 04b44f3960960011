"""SQLite engines of the lineage store and the outbox: one set-up for transactions, locking and pragmas.

pysqlite's own transaction handling begins a transaction lazily, just before the first write, so every
transaction is deferred: one that reads and then writes fails at once with "database is locked" when another
connection wrote meanwhile (in WAL mode its snapshot is stale), whatever the busy timeout. So the driver's
transaction control is switched off and SQLAlchemy's ``begin`` issues the ``BEGIN`` itself: ``BEGIN IMMEDIATE``
for a writer, which takes the write lock up front and waits for it up to the busy timeout, and a plain
``BEGIN`` for a reader. Which transactions write is a choice of the store: every one (the outbox: all its
transactions are short writes), or those of a connection with the :data:`WRITE` execution option (the
lineage store: many readers, one writer at a time).

The journal is the other choice: the lineage store runs in WAL mode (readers never block the writer), the
outbox in a rollback journal (see :mod:`airflow_lineage_provider.outbox.database` for why).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, event

#: Execution option marking a connection whose transactions write (``BEGIN IMMEDIATE`` under ``"writers"``).
WRITE = "lineage_write"
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


@dataclass(frozen=True)
class SqliteSettings:
    """How connections to one SQLite database are set up."""

    #: ``PRAGMA journal_mode``: ``"WAL"``, or a rollback journal mode (``"PERSIST"``, ``"DELETE"``...).
    journal_mode: str
    #: ``PRAGMA synchronous``, one of :data:`SYNCHRONOUS`.
    synchronous: str = "NORMAL"
    #: Seconds a statement waits for a lock before failing with "database is locked".
    busy_timeout: float = 30.0
    #: ``"always"``: every transaction begins with ``BEGIN IMMEDIATE``; ``"writers"``: only those of a
    #: connection with the :data:`WRITE` execution option, the others with a plain ``BEGIN``.
    immediate: Literal["always", "writers"] = "writers"
    #: ``PRAGMA mmap_size`` (0: the file is never memory-mapped); ``None`` keeps SQLite's default.
    mmap_size: int | None = None
    #: ``PRAGMA journal_size_limit`` in bytes; ``None`` keeps SQLite's default.
    journal_size_limit: int | None = None


def prepare_connection(dbapi_connection: sqlite3.Connection, settings: SqliteSettings) -> str:
    """Set up a new pysqlite connection as ``settings`` say; answer the journal mode in effect.

    A database left in WAL mode by another process is switched to a rollback journal only when nothing else
    holds it (leaving WAL needs the database to itself): while something does, the connection carries on in
    WAL rather than wait, answers ``"wal"``, and a later connection switches it.
    """
    dbapi_connection.isolation_level = None  # SQLAlchemy's begin event issues BEGIN, not the driver
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(settings.busy_timeout * 1000)}")
        if settings.mmap_size is not None:
            cursor.execute(f"PRAGMA mmap_size = {int(settings.mmap_size)}")
        mode = _set_journal_mode(cursor, settings)
        if settings.journal_size_limit is not None:
            cursor.execute(f"PRAGMA journal_size_limit = {int(settings.journal_size_limit)}")
        cursor.execute(f"PRAGMA synchronous = {_checked_synchronous(settings.synchronous)}")
    finally:
        cursor.close()
    return mode


def _checked_synchronous(value: str) -> str:
    if value.upper() not in SYNCHRONOUS:
        raise ValueError(f"SQLite synchronous {value!r} is not one of {', '.join(SYNCHRONOUS)}")
    return value.upper()


def _set_journal_mode(cursor: sqlite3.Cursor, settings: SqliteSettings) -> str:
    wanted = settings.journal_mode.upper()
    if wanted == "WAL":
        return str(cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0])
    if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        # A rollback journal mode is per connection: set on every one.
        return str(cursor.execute(f"PRAGMA journal_mode = {wanted}").fetchone()[0])
    cursor.execute("PRAGMA busy_timeout = 0")
    try:
        mode = str(cursor.execute(f"PRAGMA journal_mode = {wanted}").fetchone()[0])
    except sqlite3.OperationalError:
        mode = "wal"
    cursor.execute(f"PRAGMA busy_timeout = {int(settings.busy_timeout * 1000)}")
    return mode


def begin_transaction(conn: Connection, settings: SqliteSettings) -> None:
    """Issue the ``BEGIN`` of a transaction on ``conn`` (the engine's ``begin`` event): see the module docstring."""
    options = conn.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":
        return
    immediate = settings.immediate == "always" or options.get(WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def listen_for_begin(engine: Engine, settings: SqliteSettings) -> None:
    """Have ``engine`` begin its transactions as ``settings`` say (for an engine that prepares its connections
    itself, with :func:`prepare_connection`)."""

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        begin_transaction(conn, settings)


def configure_sqlite_engine(engine: Engine, settings: SqliteSettings) -> None:
    """Set up every connection of ``engine`` and begin its transactions as ``settings`` say."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        prepare_connection(dbapi_connection, settings)

    listen_for_begin(engine, settings)
