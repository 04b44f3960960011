"""The SQLite outbox file removed, replaced or made unwritable under producers that keep emitting.

No event may go into a file nobody can see any more (a connection keeps an unlinked file alive), and no
fault of the file may kill the emitting process: every event ends in the outbox at its path or in the
spill folder, and ``close()`` says whether something is still spilled.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.outbox_helpers import run_pairs, sqlite_url

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox.database import dispose_engines

REPO = Path(__file__).resolve().parents[1]

#: A producer process: emits ``count`` events (runs of START + COMPLETE), printing each as it goes, then
#: closes the transport and prints what ``close()`` said. With a ``gate`` it stops after that many events
#: until a line arrives on its standard input.
PRODUCER = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, "tests")
    from support.outbox_helpers import run_pairs
    from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport

    url, count, pause, gate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[5])
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url, "retry_after": 0.2}))
    for emitted, event in enumerate(run_pairs(count // 2, job_name=sys.argv[4])):
        if gate and emitted == gate:
            print("WAITING", flush=True)
            sys.stdin.readline()
        outbox.emit(event)
        print("EMITTED " + json.dumps([str(event.run.runId), event.eventType.value]), flush=True)
        time.sleep(pause)
    print("CLOSED " + json.dumps(outbox.close(5)), flush=True)
    """
)


@pytest.fixture(autouse=True)
def _fresh_engines() -> Iterator[None]:
    yield
    dispose_engines()


class Producer:
    """A separate process emitting through ``OutboxTransport``, read line by line."""

    def __init__(self, url: str, count: int, pause: float = 0.0005, job_name: str = "producer", gate: int = 0) -> None:
        command = [sys.executable, "-c", PRODUCER, url, str(count), str(pause), job_name, str(gate)]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ.copy(),
        )
        self.emitted: list[tuple[str, str]] = []
        self.closed: bool | None = None
        self.log: list[str] = []

    def read_until(self, emitted: int) -> None:
        """Read the producer's output until it emitted ``emitted`` events (or ended)."""
        assert self.process.stdout is not None
        while len(self.emitted) < emitted:
            line = self.process.stdout.readline()
            if not line:
                return
            if line.startswith("EMITTED "):
                run_id, event_type = json.loads(line.removeprefix("EMITTED "))
                self.emitted.append((run_id, event_type))
            elif line.startswith("CLOSED "):
                self.closed = json.loads(line.removeprefix("CLOSED "))
            elif line.startswith("WAITING"):
                return
            else:
                self.log.append(line)

    def go_on(self) -> None:
        """Let a producer waiting at its gate go on."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.close()

    def finish(self, timeout: float = 120) -> int:
        self.read_until(10**9)
        return self.process.wait(timeout)


def events_in(database: Path) -> set[tuple[str, str]]:
    """``(run id, event type)`` of every event in an outbox file, read with SQLite alone (read-write: a
    commit cut short by the file turning immutable leaves a journal that reading rolls back)."""
    if not database.is_file():
        return set()
    conn = sqlite3.connect(database)
    try:
        return {tuple(row) for row in conn.execute("SELECT run_id, event_type FROM lineage_outbox_events")}
    finally:
        conn.close()


def events_spilled(folder: Path) -> set[tuple[str, str]]:
    found = set()
    for path in folder.glob("spill-*") if folder.is_dir() else ():
        for line in path.read_text().splitlines():
            event = json.loads(line)
            found.add((event["run"]["runId"], event["eventType"]))
    return found


def test_removing_the_outbox_folder_under_a_producer_loses_no_event_emitted_after(tmp_path: Path) -> None:
    """``rm -rf`` of the outbox folder while a separate process emits 600 events: the events it had stored
    went with the folder (the test keeps a hard link to the removed file to read them); every later one is
    in the outbox recreated at the same path, none in the removed file, and ``close()`` reports it drained."""
    folder, kept = tmp_path / "outbox", tmp_path / "kept"
    database = folder / "outbox.db"
    kept.mkdir()
    producer = Producer(sqlite_url(folder), 600)
    producer.read_until(150)
    os.link(database, kept / "outbox.db")  # the removed file, readable afterwards
    # ``rm -rf``, made atomic: rmtree alone can race the producer's next write (it lists the folder, the
    # producer adds a journal file, rmdir fails "Directory not empty"). Renaming first takes the folder
    # away from the path in one step, as the removal does for the producer; then it is deleted.
    trash = tmp_path / "removed"
    folder.rename(trash)
    shutil.rmtree(trash)
    assert producer.finish() == 0
    assert producer.closed is True and len(producer.emitted) == 600

    removed, recreated = events_in(kept / "outbox.db"), events_in(database)
    spilled = events_spilled(folder / "outbox.db.spill")
    assert removed | recreated | spilled == set(producer.emitted)
    assert not spilled, "the outbox could be recreated: nothing had to be spilled"
    order = {event: position for position, event in enumerate(producer.emitted)}
    assert len(removed & recreated) <= 1, "only the event that found the file gone is in both"
    assert max(order[e] for e in removed - recreated) < min(order[e] for e in recreated - removed), (
        "an event went into the removed file after a later one had gone into the recreated outbox"
    )
    assert 150 <= len(removed) < 600
    warnings = [line for line in producer.log if "was removed or replaced" in line]
    assert len(warnings) == 1, producer.log


def test_a_replaced_outbox_file_is_followed(tmp_path: Path) -> None:
    """A file moved into the outbox's place (a restore from a backup): later events go into it."""
    url, database = sqlite_url(tmp_path), tmp_path / "outbox.db"
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    before = run_pairs(1)
    for event in before:
        outbox.emit(event)
    os.link(database, tmp_path / "old.db")
    restored = run_pairs(1, job_name="restored")
    other = OutboxTransport(OutboxConfig.from_dict({"url": sqlite_url(tmp_path / "backup")}))
    for event in restored:
        other.emit(event)
    os.replace(tmp_path / "backup" / "outbox.db", database)
    after = run_pairs(2, job_name="after")
    for event in after:
        outbox.emit(event)
    assert outbox.close(5)

    def keys(events: list[Any]) -> set[tuple[str, str]]:
        return {(str(e.run.runId), e.eventType.value) for e in events}

    assert events_in(database) == keys(restored) | keys(after)
    assert events_in(tmp_path / "old.db") == keys(before), "an event went into the replaced file"


def test_an_outbox_that_cannot_be_recreated_spills_and_close_says_so(tmp_path: Path) -> None:
    """The outbox file removed and a directory put at its path: SQLite cannot recreate it there, so events
    are spilled, ``close()`` reports them still spilled, and they move in once the path is usable again."""
    url, database = sqlite_url(tmp_path), tmp_path / "outbox.db"
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url, "retry_after": 0.1}))
    outbox.emit(run_pairs(1)[0])
    for leftover in tmp_path.glob("outbox.db*"):
        if leftover.is_file():
            leftover.unlink()
    database.mkdir()
    during = run_pairs(2, job_name="during")
    for event in during:
        outbox.emit(event)
    assert not outbox.close(1), "close() claimed a drained outbox while events were spilled"
    assert events_spilled(outbox.writer.spill.folder) == {(str(e.run.runId), e.eventType.value) for e in during}
    database.rmdir()
    outbox.writer.drain_spill()  # or the background drain, whichever comes first
    assert outbox.close(10)
    assert events_in(database) == {(str(e.run.runId), e.eventType.value) for e in during}


@contextmanager
def immutable(paths: list[Path]) -> Iterator[None]:
    """``chattr +i`` on ``paths`` (even root cannot write them), undone afterwards."""
    try:
        subprocess.run(["chattr", "+i", *map(str, paths)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)


def require_chattr(folder: Path) -> None:
    probe = folder / "chattr-probe"
    probe.write_text("")
    try:
        if shutil.which("chattr") is None:
            pytest.skip("chattr is not installed: an immutable file cannot be produced here")
        made = subprocess.run(["chattr", "+i", str(probe)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is refused here ({made.stderr.strip()!r}): not root, or not ext4/xfs/btrfs")
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
        probe.unlink()


def test_an_outbox_made_immutable_under_running_producers_never_kills_them(tmp_path: Path) -> None:
    """Three producers emit while the outbox files are made immutable (``chattr +i``): the kernel then refuses
    every write to them, including writes through a memory mapping, which fault. With SQLite in WAL mode
    each producer had the ``-shm`` wal-index mapped and died of SIGBUS at its next commit (2 of 3 in the
    reproduction); with a rollback journal and ``mmap_size = 0`` the refusal is an error, and the events
    are spilled. A filesystem remounted read-only takes the same path (an error from write(2) instead of a
    fault); a full disk never faulted (SQLite writes every page of the -shm file before mapping it).

    Each producer stops after 60 events until the files are immutable: started together, one could
    otherwise emit all 400 before a slower-starting one reached 60 (a loaded machine), and rightly report
    its outbox drained."""
    require_chattr(tmp_path)
    url = sqlite_url(tmp_path)
    OutboxTransport(OutboxConfig.from_dict({"url": url})).emit(run_pairs(1)[0])
    dispose_engines()
    producers = [Producer(url, 400, pause=0.002, job_name=f"producer_{i}", gate=60) for i in range(3)]
    for producer in producers:
        producer.read_until(61)
        assert len(producer.emitted) == 60, producer.log
    with immutable([p for p in tmp_path.glob("outbox.db*") if p.is_file()]):
        for producer in producers:
            producer.go_on()
        codes = [producer.finish() for producer in producers]
    assert codes == [0, 0, 0], f"a producer died (-7 is SIGBUS): {codes}"
    stored = events_in(tmp_path / "outbox.db")
    spilled = events_spilled(tmp_path / "outbox.db.spill")
    for producer in producers:
        assert len(producer.emitted) == 400
        assert set(producer.emitted) <= stored | spilled, "an event is neither in the outbox nor spilled"
        assert set(producer.emitted[60:]) <= spilled, "an event went into an immutable outbox"
        assert producer.closed is False, "close() claimed a drained outbox while events were spilled"
    assert len(spilled) == 3 * 340, "only the events emitted after the files turned immutable are spilled"


def test_an_outbox_left_in_wal_mode_switches_to_the_rollback_journal(tmp_path: Path) -> None:
    """An outbox an older version left in WAL mode: while such a process holds it open, a producer's events
    still go in (in WAL mode, with one warning); the first connection after it closed switches the file to
    the rollback journal."""
    url, database = sqlite_url(tmp_path), tmp_path / "outbox.db"
    OutboxTransport(OutboxConfig.from_dict({"url": url})).emit(run_pairs(1)[0])
    dispose_engines()
    older = sqlite3.connect(database, isolation_level=None)
    assert older.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    older.execute("SELECT count(*) FROM lineage_outbox_events").fetchone()  # now it has the WAL open
    beside = Producer(url, 4)
    assert beside.finish() == 0 and beside.closed is True
    assert [line for line in beside.log if "still in WAL mode" in line], beside.log
    older.close()
    assert database.read_bytes()[18:20] == b"\x02\x02", "the file is in WAL mode"
    OutboxTransport(OutboxConfig.from_dict({"url": url})).emit(run_pairs(1, job_name="after")[0])
    assert database.read_bytes()[18:20] == b"\x01\x01", "the file is not back to a rollback journal"
    assert not (tmp_path / "outbox.db-shm").exists()
    assert len(events_in(database)) == 6
