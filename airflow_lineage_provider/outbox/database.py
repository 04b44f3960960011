"""Engines for the outbox database: one per URL and process, tuned for many short writers.

SQLite is set up so that no failure of the disk or the file can kill the process writing to it: every
read and write is a system call whose failure comes back as an error (and the event is spilled), never a
memory-mapped access, whose failure is a SIGBUS no Python code can catch. Hence ``mmap_size = 0`` (the
database file is never mapped), and a rollback journal (``journal_mode = PERSIST``) instead of WAL: in WAL
mode every connection maps the ``-shm`` wal-index file and writes to it on each commit, and when that file
becomes unwritable under it (``chattr +i``, a filesystem remounted read-only after an error) the next
write to the mapping kills the process with SIGBUS; no pragma avoids the mapping except exclusive
locking, which would let one process at a time use the outbox. PERSIST keeps the journal file between
transactions (no create and delete per event) and ``journal_size_limit`` keeps it small. The price of a
rollback journal is an fsync per append: with ``synchronous = NORMAL`` (the default) or ``FULL`` a commit
survives a crashed machine (what that costs per append on the CI machine kind is measured in
``docs/benchmarks.md``, "Fast path"); ``OFF`` (opt in) costs what WAL mode did and survives a crashed
process, but a crashed machine can lose the last events and damage the file. Readers block a
writer's commit for as long as they read (the busy timeout covers it; past it, the event is spilled).

Every SQLite connection remembers which file it opened (device and inode): a connection whose file was
removed or replaced is never handed out again, and :func:`outbox_engine` recreates the database (with its
tables) at the configured path instead of writing into a file nobody can see. Every transaction starts
with ``BEGIN IMMEDIATE`` so a writer waits for the lock (up to the busy timeout) instead of failing on a
stale read snapshot (the set-up the lineage store shares: :mod:`airflow_lineage_provider.sqlite_engine`).
PostgreSQL gets a connect timeout. Engines are cached per URL and settings; a forked process (LocalExecutor forks
every task, the OpenLineage listener each event by default) never reuses its parent's connections: it gives the
engine it inherited a pool of its own and keeps the rest, the schema its parent checked among it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError

from airflow_lineage_provider.outbox import migrations
from airflow_lineage_provider.reporting import warn_once
from airflow_lineage_provider.sqlite_engine import SYNCHRONOUS, SqliteSettings, listen_for_begin, prepare_connection
from airflow_lineage_provider.sqlite_writers import writers_of

SQLITE_SYNCHRONOUS = SYNCHRONOUS
#: Default SQLite ``PRAGMA synchronous`` (see the module docstring).
DEFAULT_SQLITE_SYNCHRONOUS = "NORMAL"
#: Bytes the persisted rollback journal is cut back to after a transaction that made it larger.
JOURNAL_SIZE_LIMIT = 1 << 20
#: Key of a connection record's ``info`` holding the path and ``(st_dev, st_ino)`` of the SQLite file it opened.
OPENED_FILE = "lineage_outbox_file"

FileIdentity = tuple[int, int]


@dataclass
class _CachedEngine:
    engine: Engine
    sqlite_file: str | None
    identity: FileIdentity | None
    #: The process whose pool the engine has: a process forked from it gives the engine a pool of its own.
    pid: int = field(default_factory=os.getpid)


_lock = threading.Lock()
_engines: dict[tuple[str, float, str], _CachedEngine] = {}
#: Pools of engines inherited from the process this one was forked from: kept, never closed here. A connection
#: is its creator's: closing a parent's SQLite connection in a child would drop locks the child does not hold.
_inherited_pools: list[Any] = []


class OutboxUrlError(ValueError):
    """The outbox URL cannot be used; the message names it and says what to use instead."""


def parse_outbox_url(url: str) -> URL:
    """``url`` as a SQLAlchemy URL, or :class:`OutboxUrlError` naming it."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError) as error:
        raise OutboxUrlError(
            f"outbox URL {url!r} is not a SQLAlchemy URL ({error}); use e.g. sqlite:////path/outbox.db "
            "or postgresql+psycopg2://user@host:5432/db"
        ) from None
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise OutboxUrlError(
            f"outbox URL {url!r} is an in-memory SQLite database, which task processes cannot share; "
            "use a file, e.g. sqlite:////path/outbox.db"
        )
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise OutboxUrlError(
            f"outbox URL {url!r} uses {parsed.get_backend_name()!r}; the outbox supports sqlite and postgresql"
        )
    return parsed


def redacted(url: str) -> str:
    """``url`` with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def sqlite_file(url: str) -> str | None:
    """The absolute path of an SQLite outbox's file; ``None`` for PostgreSQL."""
    parsed = parse_outbox_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    return str(Path(parsed.database or "").expanduser().resolve())


def file_identity(path: str) -> FileIdentity | None:
    """``(st_dev, st_ino)`` of the file at ``path``, ``None`` when there is none (one ``stat``)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def opened_file(conn: Connection) -> tuple[str, FileIdentity] | None:
    """The path and identity of the SQLite file ``conn`` opened (``None`` for PostgreSQL)."""
    return conn.connection.info.get(OPENED_FILE)


def file_in_place(conn: Connection) -> bool:
    """Whether the file ``conn`` writes to is still the one at the outbox's path (always true for PostgreSQL).

    Asked after a commit: if the file was removed or replaced meanwhile, what was written is not in the outbox.
    """
    opened = opened_file(conn)
    return opened is None or file_identity(opened[0]) == opened[1]


def _configure_sqlite(engine: Engine, path: str, timeout: float, synchronous: str) -> None:
    settings = SqliteSettings(
        journal_mode="PERSIST",
        synchronous=synchronous,
        busy_timeout=timeout,
        immediate="always",
        mmap_size=0,  # see the module docstring: no SIGBUS
        journal_size_limit=JOURNAL_SIZE_LIMIT,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        before = file_identity(path)
        if prepare_connection(dbapi_connection, settings) == "wal":
            warn_once(
                "Lineage outbox: the SQLite outbox is still in WAL mode because another process has it open (an "
                "older airflow-lineage-provider?); it switches to a rollback journal once that process closes it"
            )
        opened = file_identity(path)
        if opened is None or before not in (None, opened):
            raise DisconnectionError(f"the outbox file {path} was removed or replaced while it was being opened")
        record.info[OPENED_FILE] = (path, opened)

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if (path, file_identity(path)) != record.info.get(OPENED_FILE):
            raise DisconnectionError(f"the outbox file {path} was removed or replaced")  # the pool reconnects

    listen_for_begin(engine, settings)


def create_outbox_engine(
    url: str, timeout: float = 2.0, sqlite_synchronous: str = DEFAULT_SQLITE_SYNCHRONOUS
) -> Engine:
    """A new engine for ``url`` (not cached, schema not checked): see :func:`outbox_engine`."""
    parsed = parse_outbox_url(url)
    path = sqlite_file(url)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": timeout}, pool_size=2, max_overflow=8)
        _configure_sqlite(engine, path, timeout, sqlite_synchronous.upper())
        return engine
    return create_engine(
        parsed,
        connect_args={"connect_timeout": max(1, round(timeout))},
        pool_size=2,
        max_overflow=8,
        pool_recycle=1800,
    )


def outbox_engine(url: str, timeout: float = 2.0, sqlite_synchronous: str = DEFAULT_SQLITE_SYNCHRONOUS) -> Engine:
    """The engine for ``url`` in this process, created on first use with the outbox schema up to date.

    For SQLite, when the file the engine was made for was removed or replaced since, the engine is thrown
    away and the database recreated (with its tables) at the path, with one warning. Raises
    :class:`OutboxUrlError` for a URL that cannot be an outbox and SQLAlchemy errors when the database
    cannot be reached or created (nothing is cached then, so the next call tries again).
    """
    key = (url, float(timeout), sqlite_synchronous.upper())
    cached = _engines.get(key)
    if cached is not None and cached.pid == os.getpid() and _still_in_place(cached):
        return cached.engine
    with _lock:
        cached = _engines.get(key)
        if cached is not None and cached.pid != os.getpid():
            _adopt(cached)
        if cached is not None and not _still_in_place(cached):
            _forget_moved(key, cached)
            cached = None
        if cached is None:
            cached = _engines[key] = _create_migrated(url, timeout, sqlite_synchronous)
    return cached.engine


def _adopt(cached: _CachedEngine) -> None:
    """Make an engine this process inherited (it was forked from the process that created it) its own: a pool of
    its own (SQLAlchemy's ``dispose(close=False)`` for a forked child), the schema as the creator found it and the
    statements it compiled kept, so that a task process forked from a prepared scheduler neither checks the schema
    nor compiles the append again (:func:`prepare_outbox`)."""
    _inherited_pools.append(cached.engine.pool)
    cached.engine.dispose(close=False)
    cached.pid = os.getpid()


def _still_in_place(cached: _CachedEngine) -> bool:
    return cached.sqlite_file is None or file_identity(cached.sqlite_file) == cached.identity


def _forget_moved(key: tuple[str, float, str], cached: _CachedEngine) -> None:
    del _engines[key]
    cached.engine.dispose()  # closing a connection to a removed SQLite file touches nothing at the path
    warn_once(
        f"Lineage outbox: the SQLite file {cached.sqlite_file} was removed or replaced while this process used "
        "it; recreating the outbox there (events the removed file held went with it)"
    )


def _create_migrated(url: str, timeout: float, sqlite_synchronous: str) -> _CachedEngine:
    engine = create_outbox_engine(url, timeout, sqlite_synchronous)
    path = sqlite_file(url)
    try:
        # In the writers' queue with the appends: outside it, the check (a write transaction) of a task that starts
        # while others append kept losing SQLite's lock to them and failed after the busy timeout.
        migrations.migrate(engine, writers_of(path), timeout)
    except Exception:
        engine.dispose()
        raise
    return _CachedEngine(engine, path, None if path is None else file_identity(path))


def dispose_engines() -> None:
    """Close every cached engine of this process (tests, and long-lived shells changing URLs)."""
    with _lock:
        for cached in _engines.values():
            if cached.pid == os.getpid():
                cached.engine.dispose()
        _engines.clear()
