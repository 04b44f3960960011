"""The outbox transport's ``durability="process"``: one write per event, no fsync, nothing lost to a killed
process, and every event moved into the outbox (and shipped, START before COMPLETE) afterwards."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.airflow_run import dags_test
from support.consumer_server import ConsumerServer
from support.environment import PRISTINE_DB
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event
from support.outbox_helpers import assert_per_run_order, outbox_jobs, pg_url, run_event, run_pairs, sqlite_url

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox import spill as spill_module
from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper
from airflow_lineage_provider.outbox.store import event_key
from airflow_lineage_provider.outbox.tables import events as events_table
from airflow_lineage_provider.outbox.writer import OutboxWriter

TRANSPORT = "airflow_lineage_provider.outbox.OutboxTransport"


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


def journal_transport(url: str, **options: Any) -> OutboxTransport:
    return OutboxTransport(OutboxConfig.from_dict({"type": TRANSPORT, "url": url, "durability": "process", **options}))


def spilled_jobs(folder: Path) -> list[str]:
    """The job names of every event in the spill folder's files, oldest file first."""
    jobs: list[str] = []
    for path in sorted(p for p in folder.iterdir() if p.name.startswith("spill-")):
        jobs += [json.loads(line)["job"]["name"] for line in path.read_text().splitlines()]
    return jobs


def spilled_events(folder: Path) -> dict[str, str]:
    """The job name of every event in the spill folder's files, by the event's identity (its outbox key)."""
    return {
        event_key(line): json.loads(line)["job"]["name"]
        for path in folder.iterdir()
        if path.name.startswith("spill-")
        for line in path.read_text().splitlines()
    }


def outbox_events(url: str) -> dict[str, str]:
    """The job name of every event in the outbox, by the event's identity (its key)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(events_table.name):
                return {}
            return dict(conn.execute(sa.select(events_table.c.event_key, events_table.c.job_name)).all())
    finally:
        engine.dispose()


def test_durability_is_machine_unless_asked_and_a_wrong_value_is_named() -> None:
    assert OutboxConfig.from_dict({}).durability == "machine"
    assert OutboxConfig.from_dict({"durability": " Process "}).durability == "process"
    with pytest.raises(ValueError, match=r"durability='disk' is not one of machine, process"):
        OutboxConfig.from_dict({"durability": "disk"})
    with pytest.raises(ValueError, match=r"durability 'fast' is not one of machine, process"):
        OutboxWriter("sqlite:////tmp/never.db", durability="fast")


def test_selected_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openlineage.client import OpenLineageClient

    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", TRANSPORT)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", sqlite_url(tmp_path))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__DURABILITY", "process")
    client = OpenLineageClient()
    assert isinstance(client.transport, OutboxTransport)
    assert client.transport.writer.durability == "process"


def test_an_event_is_one_unsynced_write_and_the_database_is_not_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(spill_module.os, "fsync", lambda fd: synced.append(fd))
    url = sqlite_url(tmp_path)
    outbox = journal_transport(url)
    sent = run_pairs(3)
    for event in sent:
        outbox.emit(event)
    assert synced == []
    assert not (tmp_path / "outbox.db").exists()  # no connection, no commit, no fsync of SQLite's
    folder = outbox.writer.spill.folder
    lines = [json.loads(line) for p in folder.glob("spill-*") for line in p.read_text().splitlines()]
    assert [(e["run"]["runId"], e["eventType"]) for e in lines] == [(str(e.run.runId), e.eventType.value) for e in sent]
    for event in lines:
        assert_valid_event(event)
    assert outbox.close(10)  # a clean close moves this process's events into the outbox
    assert len(outbox_jobs(url)) == 6
    assert not any(p.name.startswith("spill-") for p in folder.iterdir())


def _journal_and_die(url: str) -> None:
    outbox = journal_transport(url)
    for index in range(20):
        outbox.emit(run_event(job_name="killed", event_time=f"2026-01-01T00:00:{index:02d}+00:00"))
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no atexit, no flush: as an OOM kill or kill -9


def test_events_survive_the_process_being_killed_and_are_shipped(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    child = multiprocessing.get_context("fork").Process(target=_journal_and_die, args=(url,))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    with ConsumerServer() as consumer:
        policy = DeliveryPolicy(batch_size=50, lease_seconds=60, backoff_base=0.2)
        report = Shipper(OutboxWriter(url), "consumer", ConsumerConfig.from_dict({"url": consumer.url}), policy).ship()
        assert report.spilled_moved == 20
        assert (report.delivered, report.dead, report.pending) == (20, 0, 0)
        assert [e["job"]["name"] for e in consumer.events] == ["killed"] * 20
    assert outbox_jobs(url) == ["killed"] * 20


def test_shipping_keeps_each_runs_start_ahead_of_its_complete(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    outbox = journal_transport(url)
    events = run_pairs(25)
    for event in events:
        outbox.emit(event)
    with ConsumerServer() as consumer:
        policy = DeliveryPolicy(batch_size=7, lease_seconds=60, backoff_base=0.2)
        report = Shipper(OutboxWriter(url), "consumer", ConsumerConfig.from_dict({"url": consumer.url}), policy).ship()
        assert (report.delivered, report.pending) == (50, 0)
        received = consumer.events
    assert_per_run_order(received)
    # Emission order, except that a run's COMPLETE waits until its START was delivered.
    assert [e["run"]["runId"] for e in received if e["eventType"] == "START"] == [
        str(e.run.runId) for e in events if e.eventType.value == "START"
    ]
    assert sorted(e["run"]["runId"] + e["eventType"] for e in received) == sorted(
        str(e.run.runId) + e.eventType.value for e in events
    )


def _journal_many(url: str, spill_dir: str, worker: int, count: int) -> None:
    outbox = journal_transport(url, spill_dir=spill_dir)
    for event in run_pairs(count // 2, job_name=f"worker_{worker}"):
        outbox.emit(event)
    os._exit(0)  # no close: what it wrote waits in its file


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_concurrent_writers_and_drainers_lose_and_duplicate_nothing(
    tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    """Six processes write while another keeps taking their files away (renamed under their writers' feet) into
    the outbox; then a shipper's drain takes the rest: every event once, each process's in its order."""
    import threading

    url = sqlite_url(tmp_path) if database == "sqlite" else pg_url(request.getfixturevalue("pg_engine"))
    spill_dir = str(tmp_path / "spill")
    drainer = OutboxWriter(url, spill_dir=spill_dir)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_journal_many, args=(url, spill_dir, i, 200)) for i in range(6)]
    stop = threading.Event()
    moved: list[int] = []

    def keep_draining() -> None:
        while not stop.is_set():
            moved.append(drainer.drain_spill())

    thread = threading.Thread(target=keep_draining)
    thread.start()
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
            assert worker.exitcode == 0
    finally:
        stop.set()
        thread.join(60)
    moved.append(drainer.drain_spill())
    assert sum(moved) == 1200
    assert sum(1 for count in moved if count) > 1  # files were taken while their writers wrote
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            columns = (events_table.c.job_name, events_table.c.event_type, events_table.c.event_key)
            rows = conn.execute(sa.select(*columns).order_by(events_table.c.id)).all()
    finally:
        engine.dispose()
    assert len(rows) == 1200 and len({r.event_key for r in rows}) == 1200
    for worker in range(6):
        assert [r.event_type for r in rows if r.job_name == f"worker_{worker}"] == ["START", "COMPLETE"] * 100


def _drain_and_die_after_the_commit(url: str) -> None:
    # The one fault not produced for real: the drainer's process ends exactly between the commit that stored a
    # file's events and the removal of the file — as a listener fork's background pass does when the fork
    # outlives JOURNAL_DRAIN_DELAY under load and then ends (os._exit) with the pass half done.
    spill_module.os.unlink = lambda path: os._exit(0)  # type: ignore[assignment]  # this forked child only
    OutboxWriter(url).drain_spill(finished_only=True)
    os._exit(1)  # not reached: the drain removes the file it stored


def test_a_drainer_ending_between_its_commit_and_the_files_removal_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    """The root of the once-flaky DAG test below: such a drainer leaves a ``*.draining`` file whose events are
    already in the outbox, so they are both "moved" and "journaled" — counted twice by a test adding the two up,
    never lost, and stored and shipped once."""
    url = sqlite_url(tmp_path)
    writer_process = multiprocessing.get_context("fork").Process(target=_journal_many, args=(url, "", 0, 4))
    writer_process.start()
    writer_process.join(60)
    folder = OutboxWriter(url).spill.folder
    assert spilled_jobs(folder) == ["worker_0"] * 4
    drainer = multiprocessing.get_context("fork").Process(target=_drain_and_die_after_the_commit, args=(url,))
    drainer.start()
    drainer.join(60)
    assert drainer.exitcode == 0
    journaled, moved = spilled_events(folder), outbox_events(url)
    assert [p.name.endswith(".draining") for p in folder.iterdir()] == [True]
    assert journaled == moved and len(moved) == 4  # the same four events on both sides
    with ConsumerServer() as consumer:
        policy = DeliveryPolicy(batch_size=50, lease_seconds=60, backoff_base=0.2)
        report = Shipper(OutboxWriter(url), "consumer", ConsumerConfig.from_dict({"url": consumer.url}), policy).ship()
        assert (report.delivered, report.pending) == (4, 0)
        assert [e["job"]["name"] for e in consumer.events] == ["worker_0"] * 4
    assert outbox_jobs(url) == ["worker_0"] * 4
    assert not any(p.name.startswith("spill-") for p in folder.iterdir())


def _journal_then_wait(url: str, job: str, release: Any, written: Any) -> None:
    outbox = journal_transport(url)
    outbox.emit(run_event(job_name=job))
    written.set()
    release.wait(60)
    os._exit(0)  # as the listener's forks end: no close


def test_a_writer_moves_only_ended_processes_files_oldest_first(tmp_path: Path) -> None:
    """A later writer's background pass takes the files of processes that have ended, up to the first file of
    one still running: what it moves is a prefix in time order, so no COMPLETE overtakes its START."""
    url = sqlite_url(tmp_path)
    context = multiprocessing.get_context("fork")

    def writer_process(job: str) -> tuple[Any, Any]:
        release, written = context.Event(), context.Event()
        process = context.Process(target=_journal_then_wait, args=(url, job, release, written))
        process.start()
        assert written.wait(30)
        return process, release

    ended, ended_release = writer_process("ended")
    running, running_release = writer_process("running")
    later, later_release = writer_process("after-running")
    for process, release in ((ended, ended_release), (later, later_release)):
        release.set()
        process.join(30)
    folder = journal_transport(url).writer.spill.folder
    assert spilled_jobs(folder) == ["ended", "running", "after-running"]

    here = journal_transport(url)
    here.emit(run_event(job_name="here"))  # the first event of a process starts a pass in the background
    assert here.writer._drainer is not None
    assert not (tmp_path / "outbox.db").exists()  # the pass waits JOURNAL_DRAIN_DELAY: a fork ending first starts none
    here.writer._drainer.join(30)
    assert outbox_jobs(url) == ["ended"]  # "after-running" waits behind the running process's file
    assert spilled_jobs(folder) == ["running", "after-running", "here"]

    running_release.set()
    running.join(30)
    assert here.writer.drain_spill(finished_only=True) == 2  # this process's own file stays
    assert outbox_jobs(url) == ["ended", "running", "after-running"]
    assert spilled_jobs(folder) == ["here"]


def test_the_background_pass_runs_once_an_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lineage_provider.outbox import writer as writer_module

    monkeypatch.setattr(writer_module, "JOURNAL_DRAIN_INTERVAL", 0.3)
    passes: list[bool] = []
    monkeypatch.setattr(OutboxWriter, "_drain_finished", lambda self: passes.append(True))
    outbox = journal_transport(sqlite_url(tmp_path))
    for _ in range(50):
        outbox.emit(run_event())
    assert len(passes) == 1
    time.sleep(0.35)  # a real gap: the interval between two passes goes by
    outbox.emit(run_event())
    assert len(passes) == 2


def test_a_tail_lost_to_a_crashed_machine_leaves_every_earlier_event(tmp_path: Path) -> None:
    """What a power cut can leave of an unsynced file: its last line cut, or the end of the file as zeros."""
    url = sqlite_url(tmp_path)
    outbox = journal_transport(url)
    for index in range(3):
        outbox.emit(run_event(job_name=f"kept-{index}"))
    own = next(outbox.writer.spill.folder.glob("spill-*"))
    with open(own, "ab") as file:
        file.write(b'{"eventType": "COMPL' + b"\0" * 4096)
    assert OutboxWriter(url).drain_spill() == 3
    assert outbox_jobs(url) == ["kept-0", "kept-1", "kept-2"]
    assert [p.name.startswith("unreadable-") for p in outbox.writer.spill.folder.iterdir()] == [True]


@pytest.fixture
def airflow_logging() -> None:
    """Airflow configures logging when it is first imported, replacing the root logger's handlers — caplog's
    among them when that happens while a test runs (the outbox imports Airflow's configuration on first use).
    Import it before the test, as the earlier tests of a whole-file run happen to do."""
    import airflow  # noqa: F401


def test_an_unwritable_folder_sends_the_event_to_the_database_else_to_the_log(
    tmp_path: Path, airflow_logging: None, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the spill folder should be")
    url = sqlite_url(tmp_path)
    outbox = journal_transport(url, spill_dir=str(blocked))
    outbox.emit(run_event(job_name="stored"))
    assert outbox_jobs(url) == ["stored"]  # as durability=machine would have stored it
    assert outbox.writer._drainer is not None
    outbox.writer._drainer.join(30)  # its background pass cannot list the folder: the database is not to blame
    assert "could not move the spill folder" in caplog.text and "cannot take events" not in caplog.text
    outbox.emit(run_event(job_name="stored after the pass"))
    assert outbox_jobs(url) == ["stored", "stored after the pass"]
    assert "only in this log" not in caplog.text

    nowhere = journal_transport(f"sqlite:///{blocked}/outbox.db", spill_dir=str(blocked))  # no database either
    nowhere.emit(run_event(job_name="logged"))
    assert "the event is only in this log" in caplog.text
    assert '"name":"logged"' in caplog.text.replace(" ", "")
    assert outbox.close(5) is True  # every event of the first transport is in the outbox
    assert nowhere.close(5) is False  # one event exists only in the log: not a clean close
    assert "1 event(s) reached neither the outbox" in caplog.text


@pytest.mark.airflow
def test_a_dag_run_with_process_durability_is_shipped_whole_by_the_export_dag(
    tmp_path: Path, airflow_home: Path
) -> None:
    """Real Airflow: the stock listener's forks and the tasks' ``lineage_run`` blocks write their events with
    ``durability=process``; the export DAG moves them into the outbox and ships every one, in order."""
    repo = Path(__file__).resolve().parents[1]
    home, dags = tmp_path / "home", tmp_path / "dags"
    home.mkdir()
    dags.mkdir()
    shutil.copy(airflow_home / PRISTINE_DB, home / "airflow.db")
    for name in ("example_lineage_run.py", "openlineage_export.py"):
        (dags / name).symlink_to(repo / "dags" / name)
    url = sqlite_url(tmp_path)
    env = {
        "AIRFLOW_CONN_LINEAGE_DEMO_WAREHOUSE": f"sqlite:///{tmp_path / 'warehouse.db'}",
        "AIRFLOW__LINEAGE_PROVIDER__OUTBOX_URL": url,
        "AIRFLOW__LINEAGE_PROVIDER__EXPORT_PATH": str(tmp_path / "files"),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": TRANSPORT, "durability": "process"}),
    }
    run = dags_test(home, dags, "example_lineage_run", "2026-02-01", env=env)
    assert run.returncode == 0, run.output[-4000:]
    folder = tmp_path / "outbox.db.spill"
    # Each later task's first event moved the files of the processes that had ended (the listener's forks,
    # earlier tasks) into the outbox in the background; the last ones wait in the journal.
    journaled = spilled_events(folder)
    moved = outbox_events(url) if (tmp_path / "outbox.db").exists() else {}
    assert journaled
    # By identity: an event can be in both, when a drainer ended between its commit and its removal of the file
    # (a listener fork outliving JOURNAL_DRAIN_DELAY under load): the outbox stores and ships it once.
    expected = {**moved, **journaled}
    with ConsumerServer() as consumer:
        connection = {"conn_type": "openlineage", "host": "127.0.0.1", "port": consumer.port, "schema": "http"}
        env["AIRFLOW_CONN_OPENLINEAGE_DEFAULT"] = json.dumps(connection)
        shipped = dags_test(home, dags, "openlineage_export", "2026-02-01", env=env)
        assert shipped.returncode == 0, shipped.output[-4000:]
        received = consumer.events
    # The export DAG also publishes the DAGs' declared lineage (job events, no eventType) through the outbox.
    runs = [e for e in received if "eventType" in e]
    assert sorted(e["job"]["name"] for e in runs) == sorted(expected.values())
    assert len({(e["run"]["runId"], e["eventType"], e["eventTime"]) for e in runs}) == len(runs), "shipped twice"
    # The last task's block is still journaled.
    assert "example_lineage_run.export_report.csv" in journaled.values()
    for event in received:
        assert_valid_event(event, ignore=STOCK_PROVIDER_FACETS)  # the listener's airflow facets have no schema
    # Every run's START ahead of its COMPLETE (`airflow dags test` sends no START for the DAG run itself).
    started = {e["run"]["runId"] for e in runs if e["eventType"] == "START"}
    shipped_starts: set[str] = set()
    for event in runs:
        if event["eventType"] == "START":
            shipped_starts.add(event["run"]["runId"])
        elif event["run"]["runId"] in started:
            assert event["run"]["runId"] in shipped_starts, "a COMPLETE was shipped before its START"
    assert {e["eventType"] for e in runs} >= {"START", "COMPLETE"}
    assert not any(p.name.startswith("spill-") for p in folder.iterdir())
