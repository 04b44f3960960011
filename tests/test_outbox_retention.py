"""Retention: only events every destination has, and only once old enough."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.consumer_server import ConsumerServer
from support.outbox_helpers import fill, pg_url, run_pairs, sqlite_url

from airflow_lineage_provider.outbox import store
from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.export import Exporter
from airflow_lineage_provider.outbox.retention import prune
from airflow_lineage_provider.outbox.shipper import Shipper
from airflow_lineage_provider.outbox.writer import OutboxWriter

LATER = store.utcnow() + timedelta(days=10)


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


def total(url: str) -> dict[str, Any]:
    with OutboxWriter(url).engine().begin() as conn:
        return store.status(conn)


def test_prunes_only_what_every_destination_has(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    writer = OutboxWriter(url)
    fill(url, run_pairs(10))
    assert prune(writer.engine(), 7, now=LATER) == 0, "no destination yet: nobody has these events"
    with ConsumerServer() as consumer:
        consumer.reject = lambda e: e["inputs"][0]["name"].endswith("_3") and e["eventType"] == "START"
        report = Shipper(writer, "consumer", ConsumerConfig.from_dict({"url": consumer.url})).ship()
    assert (report.delivered, report.dead) == (19, 1)
    assert prune(writer.engine(), 7) == 0, "delivered today: younger than the retention period"
    Exporter(writer, str(tmp_path / "export"), batch_size=5).export()
    fill(url, run_pairs(2))  # pending for both destinations
    assert prune(writer.engine(), 7, now=LATER) == 19, "the dead event and the pending ones stay"
    counts = total(url)
    assert counts["events"] == 5
    assert counts["destinations"]["consumer"] == {"pending": 4, "delivered": 0, "dead": 1}


def test_a_destination_that_never_shipped_blocks_pruning(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    writer = OutboxWriter(url)
    fill(url, run_pairs(3))
    Exporter(writer, str(tmp_path / "a")).export()
    with writer.engine().begin() as conn:
        store.ensure_destination(conn, "later", "files", "file:///later")
    assert prune(writer.engine(), 0, now=LATER) == 0
    Exporter(writer, str(tmp_path / "b"), name="later").export()
    assert prune(writer.engine(), 0, now=LATER) == 6
    assert total(url)["events"] == 0


def test_negative_age_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="older_than_days=-1 must not be negative"):
        prune(OutboxWriter(sqlite_url(tmp_path)).engine(), -1)


@pytest.mark.postgres
def test_retention_on_postgres(pg_engine: Any, tmp_path: Path) -> None:
    url = pg_url(pg_engine)
    writer = OutboxWriter(url)
    fill(url, run_pairs(5))
    Exporter(writer, str(tmp_path / "export")).export()
    fill(url, run_pairs(1))
    assert prune(writer.engine(), 1, now=LATER) == 10
    assert total(url)["events"] == 2
