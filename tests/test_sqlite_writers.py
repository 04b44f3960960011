"""The queue of a SQLite database's writers: threads and processes take turns, and a turn never waits past its
timeout (SQLite's own lock and busy timeout still decide)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.sqlite_writers import writers_of

#: A process that takes its turn on the database given as argv[1], says so in argv[2], holds it for argv[3]
#: seconds, and writes when it let go into argv[2] too.
HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from airflow_lineage_provider.sqlite_writers import writers_of
    with writers_of(sys.argv[1]).turn(5):
        Path(sys.argv[2]).write_text("held")
        time.sleep(float(sys.argv[3]))
        released = time.time()
    Path(sys.argv[2]).write_text(f"released {released}")
    """
)


def _hold_in_another_process(database: Path, seconds: float, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    said = tmp_path / "holder.txt"
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(database), str(said), str(seconds)])
    deadline = time.monotonic() + 60
    while not said.exists() or said.read_text() != "held":
        assert process.poll() is None, "the holder process ended before it held its turn"
        assert time.monotonic() < deadline, "the holder process never held its turn"
        time.sleep(0.01)
    return process, said


def _released_at(process: subprocess.Popen[bytes], said: Path) -> float:
    assert process.wait(timeout=60) == 0
    state, at = said.read_text().split()
    assert state == "released"
    return float(at)


def test_a_writer_waits_for_another_process_s_turn_and_goes_on_as_soon_as_it_ends(tmp_path: Path) -> None:
    database = tmp_path / "lineage.db"
    process, said = _hold_in_another_process(database, 0.5, tmp_path)
    with writers_of(str(database)).turn(10):
        began = time.time()
    released = _released_at(process, said)
    assert began >= released
    assert began - released < 0.1  # woken within a few retries of 0.1-2 ms, not SQLite's sleeps of up to 100 ms


def test_a_store_write_on_sqlite_waits_for_its_turn(tmp_path: Path) -> None:
    database = tmp_path / "lineage.db"
    store = LineageStore(f"sqlite:///{database}")
    store.engine  # noqa: B018 - migrated before the other process holds the turn
    process, said = _hold_in_another_process(database, 0.5, tmp_path)
    with store.write() as conn:
        began = time.time()
        conn.exec_driver_sql("SELECT 1")
    assert began >= _released_at(process, said)
    store.dispose()


def test_a_turn_that_cannot_come_within_its_timeout_goes_on_without_it(tmp_path: Path) -> None:
    database = tmp_path / "lineage.db"
    process, said = _hold_in_another_process(database, 2.0, tmp_path)
    started = time.monotonic()
    with writers_of(str(database)).turn(0.2):
        waited = time.monotonic() - started
    assert 0.15 < waited < 1.5
    assert said.read_text() == "held"  # the other process still held it: this block ran without its turn
    _released_at(process, said)


def test_threads_of_one_process_take_turns_and_a_thread_holding_its_turn_goes_straight_on(tmp_path: Path) -> None:
    queue = writers_of(str(tmp_path / "lineage.db"))
    assert queue is writers_of(str(tmp_path / "." / "lineage.db"))  # one queue per file, however it is named
    inside = 0
    most = 0
    lock = threading.Lock()

    def write() -> None:
        nonlocal inside, most
        for _ in range(50):
            with queue.turn(10):
                with queue.turn(10):  # nested: would wait for itself if it queued again
                    with lock:
                        inside += 1
                        most = max(most, inside)
                    time.sleep(0.0005)
                    with lock:
                        inside -= 1

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert most == 1


def test_a_forked_child_queues_behind_its_parent_rather_than_sharing_its_lock(tmp_path: Path) -> None:
    database = tmp_path / "lineage.db"
    queue = writers_of(str(database))
    with queue.turn(10):
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's outcome is its exit code
            started = time.monotonic()
            with queue.turn(0.3):
                waited = time.monotonic() - started
            os._exit(0 if waited >= 0.25 else 1)
        time.sleep(0.6)
    _pid, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child took the turn its parent held"


def test_a_database_in_memory_has_no_queue_and_one_whose_lock_file_cannot_be_made_queues_threads_only(
    tmp_path: Path,
) -> None:
    assert writers_of(None) is None
    assert writers_of(":memory:") is None
    assert writers_of("file:lineage?mode=memory&cache=shared") is None
    queue = writers_of(str(tmp_path / "gone" / "lineage.db"))  # no such folder: the lock file cannot be made
    assert queue is not None
    started = time.monotonic()
    with queue.turn(5):
        pass
    assert time.monotonic() - started < 1
    assert not (tmp_path / "gone").exists()


def test_the_queue_can_be_turned_off_for_a_file_system_whose_flock_misbehaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINEAGE_SQLITE_WRITER_QUEUE", "off")
    assert writers_of(str(tmp_path / "lineage.db")) is None
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}")
    with store.write() as conn:  # SQLite's own lock alone: no lock file is made
        conn.exec_driver_sql("SELECT 1")
    assert not (tmp_path / "lineage.db-writers").exists()
    store.dispose()
    monkeypatch.setenv("LINEAGE_SQLITE_WRITER_QUEUE", "on")
    assert writers_of(str(tmp_path / "lineage.db")) is not None


def test_an_outbox_append_waits_for_its_turn_and_is_stored_not_spilled(tmp_path: Path) -> None:
    """A task's append to a SQLite outbox queues behind another process's turn (as another task's append would
    hold it) and goes into the database once the turn ends, within its timeout: nothing spilled."""
    import json
    import uuid

    from airflow_lineage_provider.outbox import store
    from airflow_lineage_provider.outbox.database import dispose_engines, sqlite_file
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    url = f"sqlite:///{tmp_path / 'outbox.db'}"
    writer = OutboxWriter(url, timeout=5)
    event = {"eventType": "START", "eventTime": "2026-12-03T00:00:00Z", "run": {"runId": str(uuid.uuid4())}}
    event |= {"job": {"namespace": "n", "name": "j"}, "producer": "p", "schemaURL": "s"}
    try:
        assert writer.append(store.record_from_payload(json.dumps(event)))  # the outbox exists, connected
        database = sqlite_file(url)
        assert database is not None
        process, said = _hold_in_another_process(Path(database), 0.5, tmp_path)
        event["eventType"] = "COMPLETE"
        assert writer.append(store.record_from_payload(json.dumps(event)))  # stored, not spilled
        appended = time.time()
        assert appended >= _released_at(process, said)
        assert not writer.spill.has_events()
    finally:
        dispose_engines()
