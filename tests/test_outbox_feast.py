"""Interop with a real third-party consumer: Feast's OpenLineage consumer (``feast serve_lineage``).

Feast keeps the state of the last event it processed per run, so a START delivered after its COMPLETE
would show the run as started; it also stores every event it receives, so duplicates would show too.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.environment import unavailable
from support.feast_consumer import FeastLineageServer, FeastUnavailable
from support.outbox_helpers import run_event, run_pairs, sqlite_url

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport
from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper
from airflow_lineage_provider.outbox.writer import OutboxWriter


@pytest.fixture
def feast(tmp_path: Path) -> Any:
    try:
        with FeastLineageServer(tmp_path / "feast", api_key="feast-key") as server:
            yield server
    except FeastUnavailable as error:
        unavailable(f"Feast's consumer is not available here: {error}")
    finally:
        dispose_engines()


def test_feast_consumer_shows_every_run_in_its_final_state(tmp_path: Path, feast: FeastLineageServer) -> None:
    url = sqlite_url(tmp_path)
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    late_start, failed = str(uuid.uuid4()), str(uuid.uuid4())
    events = [
        *run_pairs(20, job_name="feast_interop.load"),
        run_event("COMPLETE", late_start, "feast_interop.late", "2026-03-04T05:07:07+00:00"),
        run_event("START", late_start, "feast_interop.late"),
        run_event("START", failed, "feast_interop.broken"),
        run_event("FAIL", failed, "feast_interop.broken", "2026-03-04T05:06:30+00:00"),
    ]
    for event in events:
        outbox.emit(event)

    def shipper(api_key: str) -> Shipper:
        consumer = ConsumerConfig.from_dict({"url": feast.url, "endpoint": feast.endpoint, "api_key": api_key})
        return Shipper(OutboxWriter(url), "feast", consumer, DeliveryPolicy(batch_size=16))

    refused = shipper("wrong-key").ship()
    assert "401" in refused.refused and refused.pending == len(events)

    report = shipper("feast-key").ship(budget=60, wait_for_backoff=True)  # as the export DAG ships
    assert (report.delivered, report.dead, report.pending) == (len(events), 0, 0), report.last_error

    stored = Counter((e["run_id"], e["event_type"]) for e in feast.events())
    assert stored == Counter((str(e.run.runId), e.eventType.value) for e in events), "lost or duplicated events"
    states = {run["run_id"]: run["state"] for run in feast.runs()}
    assert states[late_start] == "COMPLETE", "the START was delivered after its COMPLETE"
    assert states[failed] == "FAIL"
    assert {states[str(e.run.runId)] for e in events[:40]} == {"COMPLETE"}
    assert {"feast_interop.load", "feast_interop.late", "feast_interop.broken"} <= {
        job["job_name"] for job in feast.jobs()
    }
