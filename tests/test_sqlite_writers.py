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
from support.waiting import wait_until

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.sqlite_writers import RETRY_MOST_SECONDS, writers_of

#: A process that takes its turn on the database given as argv[1], says so in argv[2], holds it for argv[3]
#: seconds, and writes when it let go into argv[2] too, with what it saw: whether the database had any table
#: when it let go. With argv[4] "locked" it holds SQLite's write lock (BEGIN IMMEDIATE) with its turn.
HOLDER = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    from pathlib import Path
    from airflow_lineage_provider.sqlite_writers import writers_of
    with writers_of(sys.argv[1]).turn(5):
        if sys.argv[4] == "locked":
            locked = sqlite3.connect(sys.argv[1], isolation_level=None)
            locked.execute("BEGIN IMMEDIATE")
        Path(sys.argv[2]).write_text("held")
        time.sleep(float(sys.argv[3]))
        tables = 0
        if os.path.exists(sys.argv[1]):
            seen = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=0)
            try:
                tables = seen.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            except sqlite3.OperationalError:  # the write lock of a commit in progress: tables were being made
                tables = -1
        if sys.argv[4] == "locked":
            locked.rollback()
        released = time.time()
    Path(sys.argv[2]).write_text(f"released {released} {tables}")
    """
)


def _hold_in_another_process(
    database: Path, seconds: float, tmp_path: Path, locked: bool = False
) -> tuple[subprocess.Popen[bytes], Path]:
    said = tmp_path / "holder.txt"
    command = [sys.executable, "-c", HOLDER, str(database), str(said), str(seconds), "locked" if locked else "-"]
    process = subprocess.Popen(command)

    def held() -> bool:
        assert process.poll() is None, "the holder process ended before it held its turn"
        return said.exists() and said.read_text() == "held"

    wait_until(held, "the holder process never held its turn", timeout=60, interval=0.01)
    return process, said


def _released_at(process: subprocess.Popen[bytes], said: Path) -> float:
    return _released(process, said)[0]


def _released(process: subprocess.Popen[bytes], said: Path) -> tuple[float, int]:
    """When the holder let go, and how many tables the database had then (-1: it was being written)."""
    assert process.wait(timeout=60) == 0
    state, at, tables = said.read_text().split()
    assert state == "released"
    return float(at), int(tables)


def test_a_writer_waits_for_another_process_s_turn_and_goes_on_as_soon_as_it_ends(tmp_path: Path) -> None:
    database = tmp_path / "lineage.db"
    process, said = _hold_in_another_process(database, 0.5, tmp_path)
    with writers_of(str(database)).turn(10):
        began = time.time()
    released = _released_at(process, said)
    assert began >= released  # how soon after: bench/outbox_concurrent_appends.py, the queue against SQLite's sleeps


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
    with writers_of(str(database)).turn(0.2) as left:
        assert left < RETRY_MOST_SECONDS  # it waited out its timeout: the block gets none of it
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
                    time.sleep(0.0005)  # a while inside the turn: a second thread inside at once would be counted
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
            with queue.turn(0.3) as left:  # all of 0.3 s left: it took its parent's turn as its own
                os._exit(0 if left < RETRY_MOST_SECONDS else 1)
        _pid, status = os.waitpid(child, 0)  # the parent holds its turn until the child is done
    assert os.waitstatus_to_exitcode(status) == 0, "the child took the turn its parent held"


def test_a_database_in_memory_has_no_queue_and_one_whose_lock_file_cannot_be_made_queues_threads_only(
    tmp_path: Path,
) -> None:
    assert writers_of(None) is None
    assert writers_of(":memory:") is None
    assert writers_of("file:lineage?mode=memory&cache=shared") is None
    queue = writers_of(str(tmp_path / "gone" / "lineage.db"))  # no such folder: the lock file cannot be made
    assert queue is not None
    with queue.turn(60) as left:
        assert left > RETRY_MOST_SECONDS  # the turn came at once: no lock file was waited for until the deadline
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


def _event(event_type: str, run_id: str) -> str:
    import json

    event = {"eventType": event_type, "eventTime": "2026-12-03T00:00:00Z", "run": {"runId": run_id}}
    return json.dumps(event | {"job": {"namespace": "n", "name": "j"}, "producer": "p", "schemaURL": "s"})


def test_a_new_outbox_s_schema_is_made_in_the_writers_queue(tmp_path: Path) -> None:
    """A task's first append checks (here: creates) the outbox schema in a write transaction; outside the queue,
    that transaction kept losing SQLite's lock to the queued appenders of other tasks and failed after the busy
    timeout (a task starting among 7 appending ones: its first event spilled in 3 of 5 runs). Here another
    process holds the turn: the schema is not made until it lets go."""
    import uuid

    from airflow_lineage_provider.outbox import store
    from airflow_lineage_provider.outbox.database import dispose_engines
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    database = tmp_path / "outbox.db"
    process, said = _hold_in_another_process(database, 0.8, tmp_path)
    try:
        writer = OutboxWriter(f"sqlite:///{database}", timeout=10)
        assert writer.append(store.record_from_payload(_event("START", str(uuid.uuid4()))))
        appended = time.time()
        released, tables = _released(process, said)
        assert tables == 0, "the outbox schema was made while another process held the writers' turn"
        assert appended >= released
    finally:
        dispose_engines()


def test_a_write_that_waited_out_its_turn_gets_only_what_is_left_of_its_timeout(tmp_path: Path) -> None:
    """An append whose turn did not come within the outbox's timeout gives up by that deadline, while the other
    writer still holds its turn and SQLite's lock, and spills its event; nothing is lost. That the turn and the
    busy timeout share one deadline is ``test_a_late_turn_gives_the_connection_its_busy_timeout_back``; the time
    the append takes is ``bench/outbox_locked_db.py`` (an outbox locked by a queued writer)."""
    import uuid

    from sqlalchemy import func, select

    from airflow_lineage_provider.outbox import store, tables
    from airflow_lineage_provider.outbox.database import dispose_engines, sqlite_file
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    url = f"sqlite:///{tmp_path / 'outbox.db'}"
    writer = OutboxWriter(url, timeout=1.0)
    run_id = str(uuid.uuid4())
    try:
        assert writer.append(store.record_from_payload(_event("START", run_id)))  # the outbox exists, connected
        database = sqlite_file(url)
        assert database is not None
        process, said = _hold_in_another_process(Path(database), 600.0, tmp_path, locked=True)
        try:
            assert not writer.append(store.record_from_payload(_event("COMPLETE", run_id)))  # spilled, not lost
            assert said.read_text() == "held"  # it gave up by its own deadline, not when the other let go
        finally:
            process.kill()  # its turn and SQLite's lock go with it
            process.wait(timeout=60)
        writer._down_until = 0.0  # the outbox answers again: what was spilled moves in now
        assert writer.drain_spill() == 1
        with writer.engine().connect() as conn:
            assert conn.execute(select(func.count()).select_from(tables.events)).scalar() == 2
    finally:
        dispose_engines()


def test_a_late_turn_gives_the_connection_its_busy_timeout_back(tmp_path: Path) -> None:
    import sqlite3

    from airflow_lineage_provider.sqlite_writers import writer_turn

    database = tmp_path / "lineage.db"
    connection = sqlite3.connect(database, isolation_level=None, timeout=0.6)
    process, said = _hold_in_another_process(database, 0.4, tmp_path)
    with writer_turn(writers_of(str(database)), 0.6, connection):  # waited ~0.4 s of 0.6
        shortened = connection.execute("PRAGMA busy_timeout").fetchone()[0]
    assert 0 <= shortened < 400
    assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 600
    with writer_turn(writers_of(str(database)), 0.6, connection):  # no wait: untouched
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 600
    _released_at(process, said)
    connection.close()


#: Another program writing the database outside the queue: BEGIN IMMEDIATE, say so in argv[2], hold SQLite's write
#: lock argv[3] seconds, write a row of its own, commit, and write when it committed into argv[2].
OUTSIDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    from pathlib import Path
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE IF NOT EXISTS outsider (x INTEGER)")
    Path(sys.argv[2]).write_text("held")
    time.sleep(float(sys.argv[3]))
    conn.execute("INSERT INTO outsider VALUES (1)")
    conn.execute("COMMIT")
    Path(sys.argv[2]).write_text(f"released {time.time()} 0")
    """
)


def test_sqlite_s_own_lock_still_decides_for_a_writer_outside_the_queue(tmp_path: Path) -> None:
    """The queue's contract (kept as a documented exception, docs/producer-api.md): it only orders the writers
    that use it; SQLite's lock, taken by ``BEGIN IMMEDIATE`` and waited for up to the busy timeout, still keeps
    out a writer that never queued (another program, a migration tool). A queued append finds its turn free,
    waits in SQLite's busy handler until the outsider commits, and both writes are kept."""
    import json
    import uuid

    import sqlalchemy as sa

    from airflow_lineage_provider.outbox import store
    from airflow_lineage_provider.outbox.database import dispose_engines, sqlite_file
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    url = f"sqlite:///{tmp_path / 'outbox.db'}"
    writer = OutboxWriter(url, timeout=10)
    run_id = str(uuid.uuid4())
    try:
        assert writer.append(store.record_from_payload(_event("START", run_id)))
        database = sqlite_file(url)
        assert database is not None
        said = tmp_path / "outsider.txt"
        process = subprocess.Popen([sys.executable, "-c", OUTSIDER, database, str(said), "0.5"])

        def held() -> bool:
            assert process.poll() is None, "the outsider ended before it took the lock"
            return said.exists() and said.read_text() == "held"

        wait_until(held, "the outsider never took the lock", timeout=60, interval=0.01)
        assert writer.append(store.record_from_payload(_event("COMPLETE", run_id)))  # stored, not spilled
        appended = time.time()
        assert appended >= _released_at(process, said)
        assert not writer.spill.has_events()
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            payloads = [json.loads(row[0]) for row in conn.exec_driver_sql("SELECT payload FROM lineage_outbox_events")]
            outsider = conn.exec_driver_sql("SELECT count(*) FROM outsider").scalar()
        engine.dispose()
        assert [p["eventType"] for p in payloads] == ["START", "COMPLETE"] and outsider == 1
    finally:
        dispose_engines()
