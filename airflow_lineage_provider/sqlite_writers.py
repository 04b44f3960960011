"""A queue for the writers of one SQLite database, in this process and across processes.

SQLite lets one writer at a time hold a database's write lock, and a ``BEGIN IMMEDIATE`` that finds it taken
waits in SQLite's busy handler, which *sleeps* between attempts (up to 100 ms each) rather than waking when the
lock is free, so writers that take turns (tasks appending to one outbox; the ingest's writer and the deferred
applier, in one server process or several) can lose much of a wait asleep.

So a store's write transactions first queue here (:func:`writers_of`): a thread lock for the threads of this
process, which hands over as soon as it is released, and an advisory ``flock`` on a file beside the database
(``<database>-writers``) for other processes, tried without blocking and then again at growing intervals from
0.1 ms to 2 ms. The queue only saves waiting: SQLite's own lock still decides, so a writer that never queued
(a migration, another program) is as safe as before, and a writer that could not queue within the busy timeout
goes on to ``BEGIN IMMEDIATE`` and meets SQLite's busy timeout there (``database is locked``). It uses only
public interfaces (``fcntl.flock``, ``PRAGMA busy_timeout``); without ``flock``, or with
``LINEAGE_SQLITE_WRITER_QUEUE=off``, SQLite's lock alone decides. Why it is kept, and its contract:
``docs/producer-api.md`` ("Public APIs only") and ``tests/test_sqlite_writers.py``.

One deadline: :func:`writer_turn`, given the connection, sets its busy timeout to what is left of the timeout
for the block when the turn took more than :data:`LATE_FRACTION` of it, and back afterwards, so that the turn
and SQLite's busy timeout never add up to more than the timeout.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, Protocol

#: First and longest wait between two tries of another process's lock, in seconds.
RETRY_FIRST_SECONDS = 0.0001
RETRY_MOST_SECONDS = 0.002
#: Environment variable that turns the queue off (``off``): SQLite's own lock and busy handler alone, as before
#: it — for a file system whose ``flock`` misbehaves.
QUEUE_SWITCH = "LINEAGE_SQLITE_WRITER_QUEUE"
#: A turn that took more than this part of its timeout leaves the block only the rest for SQLite's busy timeout.
LATE_FRACTION = 0.1


class SqliteWriters:
    """The queue of the writers of the SQLite database in the file ``database``."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self._pid = os.getpid()
        self._threads = threading.Lock()
        self._file: int | None = None
        self._holder = threading.local()

    @contextmanager
    def turn(self, timeout: float) -> Iterator[float]:
        """Wait (at most ``timeout`` seconds) for this writer's turn and hold it while the block runs; the block
        gets the seconds left of ``timeout`` (0 when the wait ran out) and runs even when the wait ran out,
        SQLite's lock then being what it waits for. A thread that holds its turn already goes straight on (with
        all of ``timeout``: its outer block accounts for the wait)."""
        if self._pid != os.getpid():  # a forked child: its parent's turn, lock and file description are not its own
            self._pid, self._threads, self._file, self._holder = os.getpid(), threading.Lock(), None, threading.local()
        if getattr(self._holder, "held", False):
            yield timeout
            return
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=timeout):
            yield 0.0
            return
        self._holder.held = True
        try:
            locked = self._lock_file(deadline)
            try:
                yield max(0.0, deadline - time.monotonic())
            finally:
                if locked is not None:
                    fcntl.flock(locked, fcntl.LOCK_UN)
        finally:
            self._holder.held = False
            self._threads.release()

    def _lock_file(self, deadline: float) -> int | None:
        """Take the file lock other processes queue on (under the thread lock): the locked file descriptor, None
        when it was not taken."""
        if self._file is None:
            try:
                self._file = os.open(f"{self.database}-writers", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError:  # a folder this process cannot write to: SQLite's lock alone decides
                return None
        pause = RETRY_FIRST_SECONDS
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self._file
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    return None  # a file system without flock
            if time.monotonic() + pause > deadline:
                return None
            time.sleep(pause)
            pause = min(pause * 2, RETRY_MOST_SECONDS)


class DriverConnection(Protocol):
    """A DB-API connection to a SQLite database (pysqlite's, or SQLAlchemy's ``dbapi_connection`` of one)."""

    def cursor(self) -> Any: ...


_queues: dict[Path, SqliteWriters] = {}
_queues_lock = threading.Lock()


def writers_of(database: str | None) -> SqliteWriters | None:
    """The writers' queue of the SQLite database in the file ``database``, one per database and process,
    whichever engine or store opened it; None for a database in memory (``None``, ``""``, ``:memory:``, a
    ``file:`` URI), which has no file to queue on and one connection at a time, and with
    ``LINEAGE_SQLITE_WRITER_QUEUE=off`` in the environment."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    if os.environ.get(QUEUE_SWITCH, "on").strip().lower() == "off":
        return None
    key = Path(database).expanduser().resolve()
    with _queues_lock:
        queue = _queues.get(key)
        if queue is None:
            queue = _queues[key] = SqliteWriters(key)
        return queue


def writer_turn(
    queue: SqliteWriters | None, timeout: float, connection: DriverConnection | None = None
) -> AbstractContextManager[None]:
    """A write's turn in ``queue`` (from :func:`writers_of`), waited for at most ``timeout`` seconds; nothing to
    wait for without a queue (PostgreSQL, a database in memory, the queue turned off).

    ``connection``: the SQLite connection the block writes with, whose busy timeout is ``timeout``; after a wait
    of more than :data:`LATE_FRACTION` of it, the block runs with only what is left (one deadline for both)."""
    if queue is None:
        return nullcontext()
    return _turn_within(queue, timeout, connection)


@contextmanager
def _turn_within(queue: SqliteWriters, timeout: float, connection: DriverConnection | None) -> Iterator[None]:
    with queue.turn(timeout) as left:
        if connection is None or left >= timeout * (1 - LATE_FRACTION):
            yield
            return
        _set_busy_timeout(connection, left)
        try:
            yield
        finally:
            _set_busy_timeout(connection, timeout)


def _set_busy_timeout(connection: DriverConnection, seconds: float) -> None:
    with suppress(sqlite3.Error):  # a connection that broke: the block's own statement reports it
        cursor = connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
        finally:
            cursor.close()
