"""Appending events to the outbox from task processes: fast, idempotent, and never failing or waiting.

An event goes straight into the outbox database, unless the database failed recently (then, for
``retry_after`` seconds, events go straight to the spill folder without trying it) or spilled events
are still waiting (then it joins them, so the order of a run's events is kept). Spilled events are moved
into the outbox by a background thread as soon as the database answers again, and by every shipper.

An SQLite outbox is checked after every append (one ``stat``): when its file was removed or
replaced since the connection opened it (``rm -rf`` of its folder, a restore from a backup), the event
did not land in the outbox, so it is written again to a database recreated at the path (see
:func:`~.database.outbox_engine`), or spilled when that cannot be done.

Durability. By default (``durability="machine"``) an event is on the disk when ``append`` returns: it survives
the task process being killed and the machine crashing (an fsync per event).
With ``durability="process"`` (opt in) every event goes to this process's spill file with a single
``write`` and no fsync (:meth:`OutboxWriter.journal`): it survives the process being killed (``kill -9``, an
OOM kill), but a crashed machine (power loss, kernel panic) can lose what the operating system had not yet
written out — the events of its last seconds — though never an earlier event and never the outbox itself.
Those files are moved into the outbox database by every shipper and export, by :meth:`OutboxWriter.close`,
and, every few seconds, by a background thread of any writer (a second after its event, so a process that ends
sooner starts nothing), which takes only the files of processes that have ended.

Ephemeral workers. A spill folder lives on the worker's own disk, which a KubernetesExecutor-style worker loses
when the task's pod ends. So when the outbox is a database server (PostgreSQL: shared by every worker, unlike an
SQLite file, whose folder the spill folder shares), a process that journaled or spilled an event moves the spill
folder into the outbox when it exits (:func:`atexit`, which Airflow's task runner runs at the end of every task
process, after the listener's last event): its own journal, and the files of the stock listener's forks, which
end before it. Only a killed process (``kill -9``, an OOM kill) or an outbox unreachable for
:data:`EXIT_DRAIN_BUDGET` seconds leaves events behind, and the log says how many files stayed, and where.

Concurrent appenders take turns on an SQLite outbox's write lock through
:mod:`airflow_lineage_provider.sqlite_writers`, so an append waits for the appenders ahead of it rather than
losing the lock in SQLite's busy handler until its timeout runs out (``docs/outbox.md``).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError, SQLAlchemyError

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.database import (
    DEFAULT_SQLITE_SYNCHRONOUS,
    FileIdentity,
    file_identity,
    file_in_place,
    opened_file,
    outbox_engine,
    redacted,
    sqlite_file,
)
from airflow_lineage_provider.outbox.spill import SpillFolder, default_spill_dir, report_spill_failure
from airflow_lineage_provider.reporting import warn_once
from airflow_lineage_provider.sqlite_writers import writer_turn, writers_of

log = logging.getLogger(__name__)

#: What ``durability`` may be (see the module docstring); the first is the default.
DURABILITY = ("machine", "process")

#: With ``durability="process"``, seconds between a writer's background moves of ended processes' files.
JOURNAL_DRAIN_INTERVAL = 5.0
#: ... and how long after the event that starts one the move begins: a process that ends sooner (the stock
#: listener's forks live for an event or two) never starts a transaction it would leave unfinished.
JOURNAL_DRAIN_DELAY = 1.0
#: Seconds a process exiting may spend moving the spill folder into an outbox on a database server (see the
#: module docstring, "Ephemeral workers"): a background move under way is waited for, then the rest is moved.
#: Well within Airflow's ``[core] task_success_overtime`` (20 s), after which the supervisor terminates a task
#: process that has reported its state — a clock that starts before the listener's last event is sent.
EXIT_DRAIN_BUDGET = 10.0


class OutboxWriter:
    """Appends events to one outbox; one instance per transport, safe across threads and forks."""

    def __init__(
        self,
        url: str,
        spill_dir: str | Path | None = None,
        timeout: float = 2.0,
        retry_after: float = 10.0,
        sqlite_synchronous: str = DEFAULT_SQLITE_SYNCHRONOUS,
        durability: str = DURABILITY[0],
    ) -> None:
        if durability not in DURABILITY:
            raise ValueError(f"outbox durability {durability!r} is not one of {', '.join(DURABILITY)}")
        self.url = url
        self.durability = durability
        self.timeout = timeout
        self.retry_after = retry_after
        self.sqlite_synchronous = sqlite_synchronous
        self.sqlite_file = sqlite_file(url)
        self.spill = SpillFolder(Path(spill_dir) if spill_dir else default_spill_dir(url))
        self._down_until = 0.0
        self._next_journal_drain = 0.0
        self._drainer: threading.Thread | None = None
        #: Set while this process moves the spill folder before exiting: background passes waiting to start, or
        #: waiting between tries, end instead (the exit move does their work, at once).
        self._exiting = threading.Event()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._writers = writers_of(self.sqlite_file)
        #: The process whose exit moves the spill folder into the outbox (:meth:`drain_before_exit`), once registered.
        self._exit_drain_pid = 0
        #: Events that reached neither the outbox nor the spill folder, only the log (see :meth:`wait_drained`).
        self.only_logged = 0

    def engine(self) -> Engine:
        """The outbox engine of this process (created, and the schema checked, on first use)."""
        return outbox_engine(self.url, self.timeout, self.sqlite_synchronous)

    def append(self, record: dict[str, Any]) -> bool:
        """Store one event row; ``True`` if it went into the database, ``False`` if it was spilled."""
        if time.monotonic() >= self._down_until and not self.spill.has_events() and self._insert(record):
            return True
        self._spill(record["payload"])
        self._start_draining()
        return False

    def _insert(self, record: dict[str, Any]) -> bool:
        """Insert ``record`` into the outbox database; ``False`` (the failure noted) when that cannot be done."""
        try:
            # A second time when the SQLite file was removed or replaced under the first.
            if self._append_in_place(record) or self._append_in_place(record):
                return True
        except Exception as error:
            self._drop_connection()
            self._database_failed(error)
        return False

    def journal(self, payload: str) -> None:
        """Write one event's JSON to this process's spill file without an fsync (``durability="process"``).

        Never raises: when the folder cannot be written the event goes into the database as with
        ``durability="machine"``, and when that cannot be done either, to the log, whole. Every
        :data:`JOURNAL_DRAIN_INTERVAL` seconds it starts moving ended processes' files into the database."""
        if self._exit_drain_pid != os.getpid():
            self._drain_at_exit_of_this_process()
        try:
            self.spill.append(payload, sync=False)
        except Exception as error:
            inserted = time.monotonic() >= self._down_until and self._insert(store.record_from_payload(payload))
            if not inserted:
                self.only_logged += 1
                report_spill_failure(self.spill.folder, error, payload)
        now = time.monotonic()
        if now >= self._next_journal_drain:
            self._next_journal_drain = now + JOURNAL_DRAIN_INTERVAL
            self._start_draining(finished_only=True)

    def _append_in_place(self, record: dict[str, Any]) -> bool:
        """Append ``record``; ``False`` when the SQLite file is no longer the outbox's (removed or replaced):
        the event went into the old file, or SQLite refused it (a rollback journal does, as the file moved)."""
        conn, opened = self._connection()
        try:
            with writer_turn(self._writers, self.timeout, _sqlite_connection(conn, opened)):
                store.append_event(conn, record)  # one statement in autocommit mode: its own transaction
        except Exception:
            if _in_place(opened):
                raise
        else:
            if _in_place(opened):
                return True
        self._drop_connection()
        return False

    def _connection(self) -> tuple[Connection, tuple[str, FileIdentity] | None]:
        """This thread's connection, kept open between events (a checkout per event costs more than the insert),
        in autocommit mode: the append is a single statement, so it is its own transaction, and the driver's
        BEGIN and COMMIT round trips are saved. With it, the SQLite file it opened."""
        held = getattr(self._local, "held", None)
        if held is None or held[0] != os.getpid():
            conn = self.engine().connect().execution_options(isolation_level="AUTOCOMMIT")
            held = self._local.held = (os.getpid(), conn, opened_file(conn))
        return held[1], held[2]

    def _drop_connection(self) -> None:
        held = getattr(self._local, "held", None)
        self._local.held = None
        if held is None or held[0] != os.getpid():
            return
        conn = held[1]
        try:
            conn.rollback()
            conn.close()
        except Exception:
            conn.invalidate()

    def _database_failed(self, error: BaseException) -> None:
        self._down_until = time.monotonic() + self.retry_after
        warn_once(
            f"Lineage outbox {redacted(self.url)} cannot take events ({type(error).__name__}: {_reason(error)}); "
            f"events go to the spill folder {self.spill.folder} and are moved into the outbox once it can"
        )

    def _spill(self, payload: str) -> None:
        if self._exit_drain_pid != os.getpid():
            self._drain_at_exit_of_this_process()
        try:
            self.spill.append(payload)
        except Exception as error:
            self.only_logged += 1
            report_spill_failure(self.spill.folder, error, payload)

    def drain_spill(self, budget: float | None = None, finished_only: bool = False, exiting: bool = False) -> int:
        """Move spilled events into the outbox now; return how many. Raises when the database is down.

        ``finished_only``: only files of processes that have ended, oldest first (:meth:`SpillFolder.drain`);
        ``exiting``: this process's own count as ended."""

        def store_payloads(payloads: list[str]) -> None:
            records = [store.record_from_payload(p) for p in payloads]
            with self.engine().connect() as conn:
                with (
                    writer_turn(self._writers, self.timeout, _sqlite_connection(conn, opened_file(conn))),
                    conn.begin(),
                ):
                    for start in range(0, len(records), 1000):
                        store.append_events(conn, records[start : start + 1000])
                if not file_in_place(conn):  # the file went away under the commit: keep the spill file
                    raise OSError(f"the outbox file {self.sqlite_file} was removed or replaced while storing")

        return self.spill.drain(store_payloads, budget, finished_only, exiting)

    def _drain_at_exit_of_this_process(self) -> None:
        """With an outbox on a database server, move the spill folder into it when this process exits (once per
        process and writer; a fork registers its own when it writes)."""
        self._exit_drain_pid = os.getpid()
        if self.sqlite_file is None:
            _drain_at_exit(self)

    def drain_before_exit(self, budget: float) -> bool:
        """Move the spill files of ended processes — this one's journal included, its forks' files — into the
        outbox, oldest first up to the first file of a process still running (which moves its own at its exit),
        retrying within ``budget`` seconds while the database cannot be reached; first waits for a background
        move under way. ``False``, with an error in the log naming what stays on this machine's disk, when the
        outbox could not take them. What a process does at its exit with an outbox on a database server."""
        deadline = time.monotonic() + budget
        self._exiting.set()
        try:
            return self._drain_before_exit(deadline)
        finally:
            self._exiting.clear()

    def _drain_before_exit(self, deadline: float) -> bool:
        drainer = self._drainer
        if drainer is not None and drainer.is_alive():
            drainer.join(max(0.0, deadline - time.monotonic()))  # only a pass under way: waiting ones end now
        while self.spill.has_events():  # (a folder that cannot be listed holds none: see has_events)
            try:
                self.drain_spill(budget=max(0.0, deadline - time.monotonic()), finished_only=True, exiting=True)
                return True
            except Exception as error:
                unreachable = isinstance(error, OperationalError | InterfaceError | DisconnectionError)
                if not unreachable or time.monotonic() + 1.0 >= deadline:
                    log.error(
                        "Lineage outbox: %d spill file(s) in %s could not be moved into the outbox %s before this "
                        "process exited (%s: %s); they are lost if this machine's disk goes away with it",
                        self.spill.count_files(),
                        self.spill.folder,
                        redacted(self.url),
                        type(error).__name__,
                        _reason(error),
                    )
                    return False
                time.sleep(1.0)
        return True

    def _start_draining(self, finished_only: bool = False) -> None:
        with self._lock:
            if self._drainer is not None and self._drainer.is_alive():
                return
            target = self._drain_finished if finished_only else self._drain_in_background
            self._drainer = threading.Thread(target=target, name="lineage-outbox-drain", daemon=True)
            self._drainer.start()

    def _drain_finished(self) -> None:
        """One pass over the files of ended processes (``durability="process"``), :data:`JOURNAL_DRAIN_DELAY`
        seconds from now; the next pass is the next interval's, or a shipper's."""
        if self._exiting.wait(JOURNAL_DRAIN_DELAY):
            return
        if time.monotonic() < self._down_until:
            return
        try:
            self.drain_spill(finished_only=True)
        except Exception as error:
            self._drain_failed(error)

    def _drain_in_background(self, attempts: int = 30) -> None:
        failures = 0
        while failures < attempts and not self._exiting.is_set():  # then the next event (or a shipper) tries again
            wait = self._down_until - time.monotonic()
            if wait > 0:
                self._exiting.wait(min(wait, 1.0))
                continue
            try:
                self.drain_spill()
            except Exception as error:
                failures += 1
                if not self._drain_failed(error):
                    self._exiting.wait(1.0)
                continue
            if not self.spill.has_events():
                return
            time.sleep(0.05)  # files held by other drainers or writers: look again shortly

    def _drain_failed(self, error: BaseException) -> bool:
        """Note why a background drain failed; ``True`` when it was the database (then events skip it for
        ``retry_after``), ``False`` when the spill folder itself could not be read: the database is not to
        blame, and events go on into it."""
        if isinstance(error, SQLAlchemyError):
            self._database_failed(error)
            return True
        warn_once(f"Lineage outbox: could not move the spill folder {self.spill.folder} into the outbox ({error})")
        return False

    def wait_drained(self, timeout: float) -> bool:
        """Wait for the background drain (tests, and a clean process exit); ``True`` if nothing is spilled and
        every event this writer took is in the outbox (``False`` once one went only to the log).

        With ``durability="process"``, move the spill folder — this process's own file included — into the
        database now instead (files are taken under a lock, so a background pass meanwhile takes others)."""
        if self.durability == "process":
            try:
                self.drain_spill(budget=timeout)
            except Exception as error:
                self._drain_failed(error)
        else:
            drainer = self._drainer
            if drainer is not None:
                drainer.join(timeout)
        if self.only_logged:
            log.error(
                "Lineage outbox: %d event(s) reached neither the outbox %s nor the spill folder %s; each is only in "
                "this process's log (an ERROR line with its JSON)",
                self.only_logged,
                redacted(self.url),
                self.spill.folder,
            )
            return False
        return not self.spill.has_events()


#: The writers whose spill folders this process moves into their outboxes when it exits (see "Ephemeral
#: workers" above), held weakly: a writer nothing uses any more (a test's) is not drained at exit; the
#: OpenLineage client holds its transport's for the life of the process.
_exit_writers: weakref.WeakSet[OutboxWriter] = weakref.WeakSet()
_exit_registered_pid = 0
_exit_lock = threading.Lock()


def _new_exit_lock_in_child() -> None:
    """A fork starts with a lock of its own: one another thread of the parent held while forking stays held."""
    global _exit_lock
    _exit_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_exit_lock_in_child)


def _drain_at_exit(writer: OutboxWriter) -> None:
    """Have ``writer``'s spill folder moved into its outbox when this process exits."""
    global _exit_registered_pid
    with _exit_lock:
        if _exit_registered_pid != os.getpid():  # the first in this process (a fork starts its own list)
            _exit_writers.clear()
            _exit_registered_pid = os.getpid()
            atexit.register(_drain_writers_at_exit, os.getpid())
        _exit_writers.add(writer)


def _drain_writers_at_exit(pid: int) -> None:
    """At the exit of process ``pid``: every registered writer's :meth:`OutboxWriter.drain_before_exit`, within
    :data:`EXIT_DRAIN_BUDGET` seconds for them all. A fork that exits normally leaves it to its parent."""
    if os.getpid() != pid:
        return
    deadline = time.monotonic() + EXIT_DRAIN_BUDGET
    for writer in list(_exit_writers):
        writer.drain_before_exit(max(0.0, deadline - time.monotonic()))


def _sqlite_connection(conn: Connection, opened: tuple[str, FileIdentity] | None) -> Any | None:
    """The driver's connection of ``conn`` on a SQLite outbox (whose busy timeout a late turn shortens)."""
    return conn.connection.dbapi_connection if opened is not None else None


def _in_place(opened: tuple[str, FileIdentity] | None) -> bool:
    """Whether the SQLite file a connection opened is still at its path (``None``: PostgreSQL, always)."""
    return opened is None or file_identity(opened[0]) == opened[1]


def _reason(error: BaseException) -> str:
    """The first line of the database's own message: no SQL, and no parameters (an event's payload)."""
    lines = str(getattr(error, "orig", None) or error).strip().splitlines()
    return lines[0] if lines else "no message"
