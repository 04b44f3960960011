"""File export: NDJSON(.gz) partitioned by event date and hour, atomic files, each event exactly once."""

from __future__ import annotations

import gzip
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.olschema import assert_valid_event
from support.outbox_helpers import fill, pg_url, run_event, run_pairs, sqlite_url

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.export import Exporter, partition_of
from airflow_lineage_provider.outbox.shipper import prepare_destination
from airflow_lineage_provider.outbox.writer import OutboxWriter


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


def exported(root: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for path in sorted(root.rglob("events-*")):
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        lines += [json.loads(line) for line in raw.decode().splitlines()]
    return lines


def keys(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(e["run"]["runId"] + e["eventType"] for e in events)


def test_exports_partitioned_by_date_and_hour(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, [run_event(event_time="2026-03-04T05:06:07+00:00"), run_event(event_time="2026-03-04T23:59:00-01:00")])
    report = Exporter(OutboxWriter(url), str(tmp_path / "export")).export()
    assert (report.exported, report.files, report.pending) == (2, 2, 0)
    folders = sorted(str(p.parent.relative_to(tmp_path / "export")) for p in (tmp_path / "export").rglob("*.ndjson"))
    assert folders == ["date=2026-03-04/hour=05", "date=2026-03-05/hour=00"]
    for event in exported(tmp_path / "export"):
        assert_valid_event(event)
    assert not [p for p in (tmp_path / "export").rglob("*") if p.name.startswith(".")], "temporary files left"


def test_each_event_is_exported_exactly_once_across_runs(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    first = run_pairs(30)
    fill(url, first)
    exporter = Exporter(OutboxWriter(url), str(tmp_path / "export"), compress=True, batch_size=25)
    assert exporter.export().exported == 60
    assert exporter.export().exported == 0
    fill(url, first + run_pairs(5))  # old events again (idempotent) and new ones
    assert exporter.export().exported == 10
    assert all(p.name.endswith(".ndjson.gz") for p in (tmp_path / "export").rglob("events-*"))
    assert max(keys(exported(tmp_path / "export")).values()) == 1
    assert sum(keys(exported(tmp_path / "export")).values()) == 70


def test_overlapping_runs_export_each_event_once(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(200))
    reports: list[Any] = []

    def run() -> None:
        reports.append(Exporter(OutboxWriter(url), str(tmp_path / "export"), batch_size=20).export())

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sum(r.exported for r in reports) == 400
    assert len(reports) == 3
    received = keys(exported(tmp_path / "export"))
    assert len(received) == 400 and max(received.values()) == 1


def test_a_run_that_died_after_writing_its_file_is_not_exported_twice(tmp_path: Path) -> None:
    """The crash window: the file was renamed into place, the database commit never happened."""
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(3))
    root = tmp_path / "export"
    writer = OutboxWriter(url)
    engine = writer.engine()
    destination = prepare_destination(engine, root.as_uri(), "files", root.as_uri())
    with engine.begin() as conn:  # what the dying run did before it was killed:
        claim = store.claim_batch(conn, destination, 100, lease_seconds=0, start_before_terminal=False)
        relative = f"{partition_of(claim.events[0].event_time)}/events-crashed.ndjson"
        store.plan_export_files(conn, claim.token, {e.delivery_id: relative for e in claim.events})
    (root / relative).parent.mkdir(parents=True)
    (root / relative).write_text("".join(e.payload + "\n" for e in claim.events))

    report = Exporter(writer, str(root)).export()
    assert (report.recovered, report.exported, report.pending) == (6, 0, 0)
    assert max(keys(exported(root)).values()) == 1 and len(exported(root)) == 6


def test_a_run_that_died_before_its_file_appeared_is_exported_again(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(2))
    root = tmp_path / "export"
    writer = OutboxWriter(url)
    engine = writer.engine()
    destination = prepare_destination(engine, root.as_uri(), "files", root.as_uri())
    with engine.begin() as conn:
        claim = store.claim_batch(conn, destination, 100, lease_seconds=0, start_before_terminal=False)
        store.plan_export_files(conn, claim.token, {e.delivery_id: "date=x/events-never.ndjson" for e in claim.events})
    report = Exporter(writer, str(root)).export()
    assert (report.recovered, report.exported) == (0, 4)
    assert len(exported(root)) == 4


@pytest.mark.postgres
def test_export_from_postgres_outbox(pg_engine: Any, tmp_path: Path) -> None:
    url = pg_url(pg_engine)
    fill(url, run_pairs(10))
    assert Exporter(OutboxWriter(url), str(tmp_path / "export")).export().exported == 20
    assert len(exported(tmp_path / "export")) == 20
