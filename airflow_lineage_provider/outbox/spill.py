"""The spill folder: where events go when the outbox database cannot take them, until it can.

Each process appends to its own file ``spill-<time_ns>-<pid>.ndjson`` (one event JSON per line), under
an exclusive ``flock`` and re-opening the file if a drainer took it away meanwhile. A drainer takes a file
by renaming it to ``*.draining`` under the same lock, stores its events (idempotently: an event
already in the outbox is not stored twice), and deletes it only after the transaction committed. A
drainer that dies leaves its ``*.draining`` file, which the next drainer takes over. Files are drained in
name (so time) order, which keeps a run's START ahead of its COMPLETE.

With the outbox transport's ``durability="process"`` the folder is the journal of every event, not only of
those the database could not take: appends are not fsynced (see :mod:`~.writer`), and writers drain only the
files of processes that have ended (:meth:`SpillFolder.drain` with ``finished_only``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Generator
from pathlib import Path

from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

SUFFIX = ".ndjson"
DRAINING = ".draining"


def default_spill_dir(url: str) -> Path:
    """Beside an SQLite outbox (``<file>.spill/``); else ``$AIRFLOW_HOME/lineage_outbox_spill/<database>``."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        database = Path(parsed.database).expanduser().resolve()
        return database.with_name(database.name + ".spill")
    home = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow").expanduser()
    label = f"{parsed.get_backend_name()}-{parsed.host or 'local'}-{parsed.database or ''}"
    digest = hashlib.sha256(parsed.render_as_string(hide_password=True).encode()).hexdigest()[:10]
    return home / "lineage_outbox_spill" / f"{label}-{digest}"


class SpillFolder:
    """Append-only spill files of one outbox, shared by every process on this machine."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._own: Path | None = None

    def has_events(self) -> bool:
        """Whether any spill file (being drained or not) is waiting. Cheap: one directory listing.

        A folder that cannot be listed (missing, a file in its place, no permission) holds none this process
        could add to or drain, so events go on into the database."""
        try:
            with os.scandir(self.folder) as entries:
                return any(e.name.startswith("spill-") for e in entries)
        except OSError:
            return False

    def _open_own(self) -> tuple[int, Path]:
        """An fd on this process's spill file; a new file (never a re-used name) when it was taken away."""
        if self._own is not None and self._own.name.endswith(f"-{os.getpid()}{SUFFIX}"):
            try:
                return os.open(self._own, os.O_WRONLY | os.O_APPEND), self._own
            except FileNotFoundError:
                pass
        self.folder.mkdir(parents=True, exist_ok=True)
        self._own = self.folder / f"spill-{time.time_ns():020d}-{os.getpid()}{SUFFIX}"
        return os.open(self._own, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600), self._own

    def append(self, payload: str, sync: bool = True) -> None:
        """Append one event's JSON to this process's spill file. Raises ``OSError``.

        ``sync``: fsync the file before returning (the event then survives a crashed machine); without it the
        event is in the operating system's hands, which survives the process being killed, not a power cut.
        """
        line = (payload.replace("\n", " ") + "\n").encode("utf-8")
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            fd, path = self._open_own()
            try:
                while not _try_lock(fd):
                    if not _same_file(fd, path):
                        break  # a drainer renamed it while we waited: write to a new file
                    time.sleep(0.001)
                else:
                    if _same_file(fd, path):
                        os.write(fd, line)
                        if sync:
                            os.fsync(fd)
                        return
                self._own = None
            finally:
                os.close(fd)
        raise OSError(f"could not append to a spill file in {self.folder}")

    def _take(self, finished_only: bool = False, exiting: bool = False) -> Generator[tuple[Path, int], None, None]:
        """Yield ``(draining file, locked fd)`` for every spill file this process could take, oldest first.

        ``finished_only``: stop at the first file whose writing process is still running (this one's
        included, unless ``exiting``: this process writes no more), so what is taken is always a prefix in time
        order and a run's START is never left behind its COMPLETE.
        """
        try:
            names = sorted(
                (n for n in os.listdir(self.folder) if n.startswith("spill-")), key=lambda n: n.removesuffix(DRAINING)
            )
        except FileNotFoundError:
            return
        for name in names:
            if finished_only and not name.endswith(DRAINING) and _writer_running(name, exiting):
                return
            path = self.folder / name
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            current = _try_lock(fd) and _same_file(fd, path)
            if not current:
                os.close(fd)
                continue
            if not name.endswith(DRAINING):
                draining = path.with_name(name + DRAINING)
                os.rename(path, draining)  # writers waiting on the lock will notice and start a new file
                path = draining
            yield path, fd

    def drain(
        self,
        store: Callable[[list[str]], None],
        budget: float | None = None,
        finished_only: bool = False,
        exiting: bool = False,
    ) -> int:
        """Move spilled events into the outbox with ``store(payloads)``; return how many were moved.

        ``store`` must be idempotent and raise when the outbox cannot take them (the file then stays).
        Stops taking new files once ``budget`` seconds have passed. ``finished_only``: only the oldest
        files up to the first one a running process still writes (see :meth:`_take`); ``exiting``: this
        process's own files count as finished.
        """
        started = time.monotonic()
        moved = 0
        taken = self._take(finished_only, exiting)
        for path, fd in taken:
            try:
                with open(path, encoding="utf-8") as spilled:
                    lines = [line.rstrip("\n") for line in spilled if line.strip()]
                payloads, unreadable = _split_readable(lines)
                if unreadable:
                    rejected = path.with_name(path.name.replace("spill-", "unreadable-", 1))
                    rejected.write_text("\n".join(unreadable) + "\n")
                    log.error("Lineage outbox: %d unreadable spilled line(s) kept in %s", len(unreadable), rejected)
                store(payloads)
                os.unlink(path)
                moved += len(payloads)
            finally:
                os.close(fd)
            if budget is not None and time.monotonic() - started > budget:
                taken.close()
                break
        return moved

    def count_files(self) -> int:
        try:
            return sum(1 for n in os.listdir(self.folder) if n.startswith("spill-"))
        except FileNotFoundError:
            return 0


def _writer_running(name: str, exiting: bool = False) -> bool:
    """Whether the process that named the spill file ``spill-<time_ns>-<pid>.ndjson`` is still running (this
    process is, unless ``exiting``).

    A reused pid reads as running: the file then waits for a shipper, which takes every file."""
    try:
        pid = int(name.removesuffix(SUFFIX).rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return not exiting
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a drainer renames files it takes)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _split_readable(lines: list[str]) -> tuple[list[str], list[str]]:
    """Lines that are JSON objects, and the others (a line cut short by a crash while writing)."""
    readable: list[str] = []
    unreadable: list[str] = []
    for line in lines:
        try:
            (readable if isinstance(json.loads(line), dict) else unreadable).append(line)
        except ValueError:
            unreadable.append(line)
    return readable, unreadable


def report_spill_failure(folder: Path, error: BaseException, payload: str) -> None:
    """Last resort when even the spill file cannot be written: the event goes to the log, whole."""
    log.error(
        "Lineage outbox: could not write to the spill folder %s (%s); the event is only in this log: %s",
        folder,
        error,
        payload,
    )
