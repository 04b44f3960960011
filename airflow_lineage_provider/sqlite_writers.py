"""A queue for the writers of one SQLite database, in this process and across processes.

SQLite lets one writer at a time hold a database's write lock, and a ``BEGIN IMMEDIATE`` that finds it taken
waits in SQLite's busy handler, which *sleeps* between attempts — 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then
100 ms — rather than waking when the lock is free. Two writers that take turns (the ingest's writer and the
deferred applier, or the same in two server processes) can lose much of a wait asleep (with
``uvicorn --workers 2`` and deferred apply: 95th-percentile answers of 64-84 ms on a store otherwise written in a
few; the queue gained that layout 1.0-1.2x events/s and a lower p95, ``docs/benchmarks.md``, issue 18).

So a store's write transactions first queue here (:func:`writers_of`): a thread lock for the threads of this
process, which hands over as soon as it is released, and an advisory ``flock`` on a file beside the database
(``<database>-writers``) for other processes, tried without blocking and then again at growing intervals from
0.1 ms to 2 ms. The queue only saves waiting: SQLite's own lock still decides, so a writer that never queued
(a migration, another program) is as safe as before, and a writer that could not queue within the busy timeout
goes on to ``BEGIN IMMEDIATE`` and meets SQLite's busy timeout there (``database is locked``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

#: First and longest wait between two tries of another process's lock, in seconds.
RETRY_FIRST_SECONDS = 0.0001
RETRY_MOST_SECONDS = 0.002
#: Environment variable that turns the queue off (``off``): SQLite's own lock and busy handler alone, as before
#: it — for a file system whose ``flock`` misbehaves.
QUEUE_SWITCH = "LINEAGE_SQLITE_WRITER_QUEUE"


class SqliteWriters:
    """The queue of the writers of the SQLite database in the file ``database``."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self._pid = os.getpid()
        self._threads = threading.Lock()
        self._file: int | None = None
        self._holder = threading.local()

    @contextmanager
    def turn(self, timeout: float) -> Iterator[None]:
        """Wait (at most ``timeout`` seconds) for this writer's turn and hold it while the block runs; the block
        runs even when the wait ran out, SQLite's lock then being what it waits for. A thread that holds its turn
        already goes straight on."""
        if self._pid != os.getpid():  # a forked child: its parent's turn, lock and file description are not its own
            self._pid, self._threads, self._file, self._holder = os.getpid(), threading.Lock(), None, threading.local()
        if getattr(self._holder, "held", False):
            yield
            return
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=timeout):
            yield
            return
        self._holder.held = True
        try:
            locked = self._lock_file(deadline)
            try:
                yield
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


def writer_turn(queue: SqliteWriters | None, timeout: float) -> AbstractContextManager[None]:
    """A write's turn in ``queue`` (from :func:`writers_of`), waited for at most ``timeout`` seconds; nothing to
    wait for without a queue (PostgreSQL, a database in memory, the queue turned off)."""
    return queue.turn(timeout) if queue is not None else nullcontext()
