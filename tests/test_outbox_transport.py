"""OutboxTransport: selected by class path, sub-millisecond, idempotent, concurrent, and never failing or waiting."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from openlineage.client import OpenLineageClient
from support.olschema import assert_valid_event
from support.outbox_helpers import TcpProxy, pg_url, run_event, run_pairs, sqlite_url

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox import store as outbox_store
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.tables import events as events_table

TRANSPORT = "airflow_lineage_provider.outbox.OutboxTransport"


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


def stored(url: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(events_table).order_by(events_table.c.id)).mappings().all()
            return [dict(row) for row in rows]
    finally:
        engine.dispose()


def transport(url: str, **options: Any) -> OutboxTransport:
    return OutboxTransport(OutboxConfig.from_dict({"type": TRANSPORT, "url": url, **options}))


def test_selected_by_class_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = sqlite_url(tmp_path)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", TRANSPORT)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", url)
    client = OpenLineageClient()
    assert isinstance(client.transport, OutboxTransport)
    assert client.transport.url == url
    sent = run_pairs(2)
    for event in sent:
        client.emit(event)
    rows = stored(url)
    assert [(r["run_id"], r["event_type"]) for r in rows] == [(str(e.run.runId), e.eventType.value) for e in sent]
    for row in rows:
        assert_valid_event(json.loads(row["payload"]))


def test_lineage_run_blocks_land_in_the_outbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lineage_provider import lineage_run
    from airflow_lineage_provider.producer import client

    url = sqlite_url(tmp_path)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", TRANSPORT)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", url)
    client.reset()
    try:
        with lineage_run("nightly_copy", inputs=["raw/orders"], outputs=["main/orders"]) as run:
            pass
    finally:
        client.reset()
    rows = stored(url)
    assert [(r["run_id"], r["event_type"], r["job_name"]) for r in rows] == [
        (run.run_id, "START", "nightly_copy"),
        (run.run_id, "COMPLETE", "nightly_copy"),
    ]
    for row in rows:
        assert_valid_event(json.loads(row["payload"]))


def test_default_url_is_the_configured_outbox_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = sqlite_url(tmp_path, "configured.db")
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL", url)
    outbox = OutboxTransport(OutboxConfig.from_dict({"type": TRANSPORT}))
    outbox.emit(run_event())
    assert len(stored(url)) == 1


def test_default_url_without_configuration_is_sqlite_under_airflow_home(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.configuration import AIRFLOW_HOME

    monkeypatch.delenv("AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL", raising=False)
    outbox = OutboxTransport(OutboxConfig.from_dict({"type": TRANSPORT}))
    assert outbox.url == f"sqlite:///{AIRFLOW_HOME}/lineage_outbox.db"


def test_same_event_twice_is_stored_once(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    outbox = transport(url)
    event = run_event()
    outbox.emit(event)
    outbox.emit(event)
    transport(url).emit(event)  # another transport (process) too
    assert len(stored(url)) == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": "not a url"}, "'not a url' is not a SQLAlchemy URL"),
        ({"url": "sqlite://"}, "in-memory SQLite database"),
        ({"url": "mysql://h/db"}, "supports sqlite and postgresql"),
        ({"url": "sqlite:////tmp/x.db", "timeout": "soon"}, "timeout='soon' is not a number"),
        ({"url": "sqlite:////tmp/x.db", "sqlite_synchronous": "sometimes"}, "is not one of OFF, NORMAL"),
    ],
)
def test_bad_configuration_is_reported_with_the_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        OutboxConfig.from_dict({"type": TRANSPORT, **options})


def _emit_many(url: str, worker: int, count: int) -> None:
    outbox = transport(url, timeout=10)
    for event in run_pairs(count // 2, job_name=f"worker_{worker}"):
        outbox.emit(event)
    outbox.close(30)


def _concurrent_writers(url: str, processes: int, per_process: int) -> list[dict[str, Any]]:
    context = multiprocessing.get_context("fork")  # as Airflow's task runners do
    workers = [context.Process(target=_emit_many, args=(url, i, per_process)) for i in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    return stored(url)


def test_many_writer_processes_on_sqlite(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    rows = _concurrent_writers(url, processes=6, per_process=200)
    assert len(rows) == 1200
    assert len({r["event_key"] for r in rows}) == 1200
    for worker in range(6):  # each process's events keep their order
        mine = [r["event_type"] for r in rows if r["job_name"] == f"worker_{worker}"]
        assert mine == ["START", "COMPLETE"] * 100
    # A rollback journal kept between transactions, and no WAL: its mapped -shm file can kill a writer (SIGBUS).
    assert (tmp_path / "outbox.db-journal").exists()
    assert not (tmp_path / "outbox.db-wal").exists() and not (tmp_path / "outbox.db-shm").exists()


@pytest.mark.postgres
def test_many_writer_processes_on_postgres(pg_engine: Any) -> None:
    url = pg_url(pg_engine)
    rows = _concurrent_writers(url, processes=4, per_process=100)
    assert len(rows) == 400
    assert len({r["event_key"] for r in rows}) == 400


def _emit_after_fork(url: str) -> None:
    transport(url).emit(run_event(job_name="child"))


def test_a_forked_process_gets_its_own_connections(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    outbox = transport(url)
    outbox.emit(run_event(job_name="parent"))
    child = multiprocessing.get_context("fork").Process(target=_emit_after_fork, args=(url,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    outbox.emit(run_event(job_name="parent", index=1))
    assert [r["job_name"] for r in stored(url)] == ["parent", "child", "parent"]


def _emit_and_die(url: str, synchronous: str) -> None:
    outbox = transport(url, sqlite_synchronous=synchronous)
    for index in range(20):
        outbox.emit(run_event(job_name="killed", index=index))
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit, no flush: as an OOM kill or kill -9


@pytest.mark.parametrize("synchronous", ["NORMAL", "OFF"])
def test_events_handed_to_the_transport_survive_the_process_being_killed(tmp_path: Path, synchronous: str) -> None:
    """Each append is in the operating system's hands when ``emit`` returns (with ``NORMAL``, the default, on
    the disk), so a killed task process loses none, whichever ``sqlite_synchronous``."""
    url = sqlite_url(tmp_path)
    assert transport(url).writer.sqlite_synchronous == "NORMAL"  # the default survives a crashed machine too
    outbox = transport(url, sqlite_synchronous=synchronous.lower())
    assert outbox.writer.sqlite_synchronous == synchronous
    with outbox.writer.engine().connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == {"OFF": 0, "NORMAL": 1}[synchronous]
    child = multiprocessing.get_context("fork").Process(target=_emit_and_die, args=(url, synchronous))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    rows = stored(url)
    assert [r["job_name"] for r in rows] == ["killed"] * 20
    assert sqlite3.connect(tmp_path / "outbox.db").execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _database_appends(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every append the writer tries against the outbox database (each event's ``job_name``)."""
    tried: list[str] = []
    append = outbox_store.append_event

    def counted(conn: Any, record: dict[str, Any]) -> None:
        tried.append(record["job_name"])
        append(conn, record)

    monkeypatch.setattr(outbox_store, "append_event", counted)
    return tried


def test_locked_database_spills_without_waiting_and_drains_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first event tries the locked database once, for at most ``timeout`` (SQLite's busy timeout); the
    next ones go straight to the spill folder. The time this takes is measured by bench/outbox_locked_db.py."""
    url = sqlite_url(tmp_path)
    outbox = transport(url, timeout=0.2, retry_after=0.3)
    outbox.emit(run_event(job_name="before"))
    with outbox.writer.engine().connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 200  # the one wait is bounded
    tried = _database_appends(monkeypatch)
    blocker = sqlite3.connect(tmp_path / "outbox.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    spilled = run_pairs(5, job_name="during")
    for event in spilled:
        outbox.emit(event)  # returns, and raises nothing, while the lock is still held
    assert tried == ["during"]  # one try; the other nine events did not wait for the lock
    assert outbox.writer.spill.has_events()
    blocker.execute("ROLLBACK")
    blocker.close()
    time.sleep(0.35)  # a real gap: retry_after (0.3 s) goes by, so the next event tries the database again
    outbox.emit(run_event(job_name="after"))
    assert outbox.close(10), "spilled events were not moved into the outbox"
    rows = stored(url)
    assert [r["job_name"] for r in rows] == ["before"] + ["during"] * 10 + ["after"]
    assert [r["run_id"] for r in rows[1:11]] == [str(e.run.runId) for e in spilled]


def test_unusable_database_path_spills_and_never_raises(tmp_path: Path) -> None:
    (tmp_path / "not-a-folder").write_text("a file where the database folder should be")
    url = f"sqlite:///{tmp_path / 'not-a-folder' / 'outbox.db'}"
    outbox = transport(url, spill_dir=str(tmp_path / "spill"))
    outbox.emit(run_event())
    outbox.emit(run_event(index=1))
    lines = [line for f in (tmp_path / "spill").iterdir() for line in f.read_text().splitlines()]
    assert len(lines) == 2
    assert_valid_event(json.loads(lines[0]))


@pytest.mark.postgres
def test_postgres_down_spills_then_recovers_automatically(
    pg_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Down, the database is tried by the first event only; the others spill without trying it (the time this
    takes is measured by bench/outbox_locked_db.py); back up, everything drains in order."""
    proxy = TcpProxy(pg_engine.url.port or 5432).start()
    url = pg_url(pg_engine).replace(f":{pg_engine.url.port or 5432}/", f":{proxy.port}/")
    outbox = transport(url, timeout=1, retry_after=0.5, spill_dir=str(tmp_path / "spill"))
    try:
        outbox.emit(run_event(job_name="before"))
        tried = _database_appends(monkeypatch)
        proxy.stop()
        during = run_pairs(3, job_name="during")
        for event in during:
            outbox.emit(event)
        assert tried == ["during"]  # one try; the other five events did not wait for the database
        assert outbox.writer.spill.has_events()
        proxy.start()
        time.sleep(0.6)  # a real gap: retry_after (0.5 s) goes by, so the next event tries the database again
        outbox.emit(run_event(job_name="after"))
        assert outbox.close(15)
    finally:
        proxy.stop()
    rows = stored(pg_url(pg_engine))
    assert [r["job_name"] for r in rows] == ["before"] + ["during"] * 6 + ["after"]


def test_spill_files_cut_short_by_a_crash_keep_their_readable_events(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    outbox = transport(url)
    good = json.dumps(json.loads(outbox_payload(run_event())))
    folder = outbox.writer.spill.folder
    folder.mkdir(parents=True)
    (folder / f"spill-{time.time_ns():020d}-{os.getpid() + 1}.ndjson").write_text(good + "\n" + '{"eventType": "ST')
    assert outbox.writer.drain_spill() == 1
    assert len(stored(url)) == 1
    assert [p.name.startswith("unreadable-") for p in folder.iterdir()] == [True]


def outbox_payload(event: Any) -> str:
    from openlineage.client.serde import Serde

    return Serde.to_json(event)


def test_a_spill_path_that_is_not_a_folder_does_not_cost_an_event(tmp_path: Path) -> None:
    """The database takes events as usual when the spill folder cannot even be listed (a file in its place)."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the spill folder should be")
    url = sqlite_url(tmp_path)
    outbox = transport(url, spill_dir=str(blocked))
    sent = run_pairs(2)
    for event in sent:
        outbox.emit(event)
    assert [r["run_id"] for r in stored(url)] == [str(e.run.runId) for e in sent]
