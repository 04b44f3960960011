"""Ephemeral workers lose nothing: with a PostgreSQL outbox, a task process moves its ``durability=process``
journal (and its listener forks' files) into the outbox before it exits, so a worker whose disk is deleted when
the task ends — KubernetesExecutor's pods — leaves no event behind.

Real Airflow: each task of ``example_lineage_run`` runs with ``airflow tasks test`` in a subprocess whose
AIRFLOW_HOME (where the journal lives) is a fresh folder, deleted as soon as the task ends; the metadata database
and the warehouse are shared, as a real deployment's are. Every event is also written by openlineage-python's
file transport (the ``composite`` transport) outside the worker's folder: what the outbox must hold.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.airflow_run import VENV_BIN, airflow_env
from support.capture import read_events
from support.environment import PRISTINE_DB
from support.olschema import STOCK_PROVIDER_FACETS, assert_valid_event
from support.outbox_helpers import pg_url, run_event

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.tables import events as events_table

TRANSPORT = "airflow_lineage_provider.outbox.OutboxTransport"
TASKS = ("load_raw", "build_customer_totals", "export_report")


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


@pytest.fixture
def airflow_logging() -> None:
    """Airflow configured logging (when first imported) before caplog attaches its handler."""
    import airflow  # noqa: F401


def identity(event: dict[str, Any]) -> tuple[str, str, str, str]:
    return (event["job"]["name"], event["run"]["runId"], event["eventType"], event["eventTime"])


def outbox_events(url: str) -> list[dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(events_table.name):
                return []
            payloads = conn.execute(sa.select(events_table.c.payload).order_by(events_table.c.id)).scalars()
            return [json.loads(payload) for payload in payloads]
    finally:
        engine.dispose()


@pytest.mark.airflow
@pytest.mark.postgres
def test_every_event_of_tasks_on_workers_deleted_after_each_task_is_in_the_outbox(
    tmp_path: Path, airflow_home: Path, pg_engine: Any
) -> None:
    repo = Path(__file__).resolve().parents[1]
    shared, dags = tmp_path / "shared", tmp_path / "dags"
    shared.mkdir()
    dags.mkdir()
    shutil.copy(airflow_home / PRISTINE_DB, shared / "airflow.db")
    (dags / "example_lineage_run.py").symlink_to(repo / "dags" / "example_lineage_run.py")
    url = pg_url(pg_engine)
    oracle = shared / "emitted.ndjson"
    transports = {
        "outbox": {"type": TRANSPORT, "url": url, "durability": "process"},
        "oracle": {"type": "file", "log_file_path": str(oracle), "append": True},
    }
    for task in TASKS:
        worker = tmp_path / f"worker-{task}"  # the pod's disk: AIRFLOW_HOME, and the journal under it
        worker.mkdir()
        env = airflow_env(
            worker,
            dags,
            {
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{shared / 'airflow.db'}",
                "AIRFLOW_CONN_LINEAGE_DEMO_WAREHOUSE": f"sqlite:///{shared / 'warehouse.db'}",
                "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "composite", "transports": transports}),
            },
        )
        command = [str(VENV_BIN / "airflow"), "tasks", "test", "example_lineage_run", task, "2026-02-01"]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
        assert (worker / "lineage_outbox_spill").is_dir(), "the journal is on the worker's disk"
        assert not list(worker.rglob("spill-*")), "a journal file was left on the worker's disk"
        shutil.rmtree(worker)  # the pod ends: its disk is gone

    emitted = read_events(oracle)
    stored = outbox_events(url)
    assert {identity(e) for e in stored} == {identity(e) for e in emitted}
    assert len(stored) == len(emitted)
    jobs = {e["job"]["name"] for e in emitted}
    for task in TASKS:  # the listener's events (its forks' files) and the tasks' lineage_run blocks
        assert f"example_lineage_run.{task}" in jobs
    assert {"example_lineage_run.load_raw.bulk_insert", "example_lineage_run.export_report.csv"} <= jobs
    for event in stored:
        assert_valid_event(event, ignore=STOCK_PROVIDER_FACETS)


@contextmanager
def closing_database() -> Iterator[tuple[str, list[str]]]:
    """A "PostgreSQL server" on 127.0.0.1 that closes every connection at once (an outbox that cannot be
    reached), and the connections it was sent (one a try)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    connections: list[str] = []

    def close_each() -> None:
        while True:
            try:
                connection, peer = listener.accept()
            except OSError:  # the listener was closed: done
                return
            connections.append(str(peer))
            connection.close()

    closer = threading.Thread(target=close_each, daemon=True)
    closer.start()
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{listener.getsockname()[1]}/test", connections
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        listener.close()
        closer.join(10)


def journal_transport(url: str, spill_dir: Path) -> OutboxTransport:
    config = {"type": TRANSPORT, "url": url, "durability": "process", "spill_dir": str(spill_dir)}
    return OutboxTransport(OutboxConfig.from_dict(config))


@pytest.mark.postgres
def test_the_exit_move_leaves_running_processes_files_and_an_unreachable_outbox_is_an_error(
    tmp_path: Path, pg_engine: Any, airflow_logging: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The move at exit takes this process's journal and ended processes' files, oldest first up to the file of
    a process still running (it moves its own at its exit); with the outbox unreachable it retries within its
    budget, then the log names what stays on the disk."""
    url = pg_url(pg_engine)
    spill = tmp_path / "spill"
    outbox = journal_transport(url, spill)
    outbox.emit(run_event(job_name="exiting"))
    # A file of a process still running, older than this one's: it and everything after it stay for later.
    running = subprocess.Popen([str(VENV_BIN / "python"), "-c", "import time; time.sleep(60)"])
    try:
        mine = next(spill.glob("spill-*"))
        theirs = spill / f"spill-{0:020d}-{running.pid}.ndjson"
        theirs.write_text(json.dumps({"eventType": "START", "job": {"name": "running"}, "run": {"runId": "r"}}) + "\n")
        assert outbox.writer.drain_before_exit(10) is True
        assert outbox_events(url) == [] and {p.name for p in spill.glob("spill-*")} == {theirs.name, mine.name}
    finally:
        running.kill()
        running.wait()
    assert outbox.writer.drain_before_exit(10) is True  # that process ended: both files, oldest first
    assert [e["job"]["name"] for e in outbox_events(url)] == ["running", "exiting"]
    assert not list(spill.glob("spill-*"))

    with closing_database() as (down_url, connections):
        down = journal_transport(down_url, tmp_path / "spill-down")
        down.emit(run_event(job_name="stays"))
        with caplog.at_level(logging.ERROR):
            assert down.writer.drain_before_exit(2.5) is False
    assert len(connections) >= 2  # tried the outbox again within its budget after the first try failed
    assert "1 spill file(s) in" in caplog.text and "could not be moved into the outbox" in caplog.text
    assert "lost if this machine's disk goes away" in caplog.text


_EXIT_NORMALLY = """
import sys
sys.path.insert(0, sys.argv[3])
from support.outbox_helpers import run_event
from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
config = {"type": "airflow_lineage_provider.outbox.OutboxTransport", "url": sys.argv[1], "durability": "process",
          "spill_dir": sys.argv[2]}
transport = OutboxTransport(OutboxConfig.from_dict(config))
for index in range(3):
    transport.emit(run_event(job_name="plain-process"))
"""  # no close(): the process just ends


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_process_that_ends_moves_its_journal_only_into_a_database_server(
    tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    """An SQLite outbox's journal stays for later (the spill folder shares the outbox's disk, and the move costs
    the task nothing); a PostgreSQL outbox gets it before the process is gone."""
    url = (
        f"sqlite:///{tmp_path / 'outbox.db'}" if database == "sqlite" else pg_url(request.getfixturevalue("pg_engine"))
    )
    spill = tmp_path / "spill"
    tests = Path(__file__).resolve().parent
    result = subprocess.run(
        [str(VENV_BIN / "python"), "-c", _EXIT_NORMALLY, url, str(spill), str(tests)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    journal = list(spill.glob("spill-*"))
    if database == "sqlite":
        assert len(journal) == 1 and len(journal[0].read_text().splitlines()) == 3
        assert not (tmp_path / "outbox.db").exists()
    else:
        assert journal == []
        assert [e["job"]["name"] for e in outbox_events(url)] == ["plain-process"] * 3
