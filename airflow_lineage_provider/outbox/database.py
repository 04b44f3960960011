"""Engines for the outbox database: one per URL and process, tuned for many short writers.

SQLite runs in WAL mode (readers never block the writer), ``synchronous=NORMAL`` by default (a commit
survives a crash of the process, not necessarily of the machine; ``FULL`` for that), and every
transaction starts with ``BEGIN IMMEDIATE`` so a writer waits for the lock (up to the busy timeout)
instead of failing on a stale read snapshot. PostgreSQL gets a connect timeout. Engines are cached per
process id: a forked process (the OpenLineage listener forks per event) never reuses its parent's
connections.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from airflow_lineage_provider.outbox import migrations

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

_lock = threading.Lock()
_engines: dict[tuple[int, str, float, str], Engine] = {}


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


def _configure_sqlite(engine: Engine, timeout: float, synchronous: str) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN below, not the driver's implicit one
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute(f"PRAGMA synchronous = {synchronous}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        if connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            connection.exec_driver_sql("BEGIN IMMEDIATE")


def create_outbox_engine(url: str, timeout: float = 2.0, sqlite_synchronous: str = "NORMAL") -> Engine:
    """A new engine for ``url`` (not cached, schema not checked): see :func:`outbox_engine`."""
    parsed = parse_outbox_url(url)
    if parsed.get_backend_name() == "sqlite":
        Path(parsed.database or "").expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": timeout}, pool_size=2, max_overflow=8)
        _configure_sqlite(engine, timeout, sqlite_synchronous.upper())
        return engine
    return create_engine(
        parsed,
        connect_args={"connect_timeout": max(1, round(timeout))},
        pool_size=2,
        max_overflow=8,
        pool_recycle=1800,
    )


def outbox_engine(url: str, timeout: float = 2.0, sqlite_synchronous: str = "NORMAL") -> Engine:
    """The engine for ``url`` in this process, created on first use with the outbox schema up to date.

    Raises :class:`OutboxUrlError` for a URL that cannot be an outbox and SQLAlchemy errors when the
    database cannot be reached (nothing is cached then, so the next call tries again).
    """
    key = (os.getpid(), url, float(timeout), sqlite_synchronous.upper())
    engine = _engines.get(key)
    if engine is not None:
        return engine
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = create_outbox_engine(url, timeout, sqlite_synchronous)
            try:
                migrations.migrate(engine)
            except Exception:
                engine.dispose()
                raise
            _engines[key] = engine
    return engine


def dispose_engines() -> None:
    """Close every cached engine of this process (tests, and long-lived shells changing URLs)."""
    with _lock:
        for (pid, *_), engine in list(_engines.items()):
            if pid == os.getpid():
                engine.dispose()
        _engines.clear()
