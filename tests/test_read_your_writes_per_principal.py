"""Read-your-writes per principal with deferred apply, on real PostgreSQL through the app's routes.

The ingest log records who logged each event (``lineage_pending_events.logged_by``). A read behind more than a
few pending events (another sender's bulk load) waits only for those its own principal logged: a sender still
reads its writes, and a reader with none pending answers at once from what is applied, saying how far behind it
is (``Lineage-Pending-Events``). Behind only a few, a read waits for everyone's, as before.

The other sender's bulk load is five logged events whose log rows a second connection holds locked (the
applier skips locked rows, so they stay pending while the test reads), with the bound of "a few" lowered to two.
The applier's delay is made a minute: it applies only for a waiting read, so a read that did not wait sees
nothing new.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write import deferred_apply
from airflow_lineage_provider.consumer.store.write.ingest import log_events
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)
pytestmark = pytest.mark.postgres

LOADER = {"X-API-Key": "bulk-loader-secret"}
SENDER = {"X-API-Key": "task-sender-secret"}
READER = {"X-API-Key": "ui-reader-secret"}
KEYS = (
    ApiKey("loader", Access.WRITE, LOADER["X-API-Key"]),
    ApiKey("sender", Access.WRITE, SENDER["X-API-Key"]),
    ApiKey("reader", Access.READ, READER["X-API-Key"]),
)
BULK = ["bulk1", "bulk2", "bulk3", "bulk4", "bulk5"]


def _event(job: str) -> dict[str, Any]:
    return run_event("COMPLETE", job, inputs=[dataset(f"{job}_in")], outputs=[dataset(f"{job}_out")])


def _jobs(answer: Any) -> set[str]:
    assert answer.status_code == 200, answer.text
    return {job["name"] for job in answer.json()["jobs"]}


@pytest.fixture
def behind_a_bulk_load(pg_store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Any]]:
    """An app whose ingest log holds the loader's five events, locked; yields its client and applier."""
    monkeypatch.setattr(deferred_apply, "READ_WAIT_OTHERS_EVENTS", 2)
    monkeypatch.setattr(deferred_apply, "APPLY_DELAY_SECONDS", 60.0)
    app = create_app(store_url=pg_store_url, keys=KEYS, ingest_apply="deferred")
    store: LineageStore = app.state.store
    holder: sa.Connection | None = None
    try:
        events = [parse_event(_event(job)) for job in BULK]
        with store.write() as conn:
            log_events(conn, events, {event.key: "key:loader" for event in events})
        holder = store.engine.connect()
        logged = holder.execute(sa.select(tables.pending_events.c.logged_by).with_for_update()).scalars().all()
        assert logged == ["key:loader"] * 5  # who logged each event is recorded with it
        with TestClient(app) as client:
            yield client, store.deferred
    finally:
        if holder is not None:
            holder.close()  # never leave rows locked for dispose() to wait on
        store.dispose()


def test_a_reader_behind_another_senders_bulk_load_answers_at_once_saying_how_far_behind(
    behind_a_bulk_load: tuple[TestClient, Any],
) -> None:
    client, applier = behind_a_bulk_load
    waited, stale = applier.statistics.waited_reads, applier.statistics.stale_reads
    listing = client.get("/api/v1/namespaces", headers=READER)
    assert listing.status_code == 200 and listing.json()["namespaces"] == []  # nothing applied
    assert listing.headers["Lineage-Pending-Events"] == "5"
    walk = client.get("/api/v1/lineage", params={"nodeId": "job:pipelines:bulk1"}, headers=READER)
    assert walk.status_code == 404 and walk.headers["Lineage-Pending-Events"] == "5"  # not applied yet, and said so
    assert applier.statistics.waited_reads == waited  # neither read waited for the applier
    assert applier.statistics.stale_reads == stale + 2


def test_a_sender_reads_its_own_writes_behind_another_senders_bulk_load(
    behind_a_bulk_load: tuple[TestClient, Any],
) -> None:
    """The sender's read waits for its own event only: the applier (woken by the waiting read) takes it past the
    loader's locked rows, and the answer says the loader's are still pending."""
    client, applier = behind_a_bulk_load
    posted = client.post("/api/v1/lineage", json=_event("mine"), headers=SENDER)
    assert posted.status_code == 201, posted.text
    stale = applier.statistics.stale_reads
    walk = client.get("/api/v1/lineage", params={"nodeId": "job:pipelines:mine", "depth": 1}, headers=SENDER)
    assert walk.status_code == 200, walk.text
    assert {node["id"] for node in walk.json()["graph"]} >= {"job:pipelines:mine", "dataset:warehouse:mine_out"}
    assert int(walk.headers["Lineage-Pending-Events"]) >= 5  # the loader's events it did not wait for
    assert applier.statistics.stale_reads == stale  # it waited, and not past the read's wait
    assert _jobs(client.get("/api/v1/namespaces/pipelines/jobs", headers=SENDER)) == {"mine"}
    # The reader posted nothing: it does not wait for the sender's events either, but sees what is applied.
    assert _jobs(client.get("/api/v1/namespaces/pipelines/jobs", headers=READER)) == {"mine"}


def test_a_read_behind_a_few_events_of_another_sender_waits_for_them(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few pending (no bulk load): a reader waits for another sender's events, so that what was posted a moment
    ago is there for everyone, as with inline apply."""
    monkeypatch.setattr(deferred_apply, "APPLY_DELAY_SECONDS", 60.0)  # applied only because the read waits
    app = create_app(store_url=pg_store_url, keys=KEYS, ingest_apply="deferred")
    try:
        with TestClient(app) as client:
            for job in ("posted1", "posted2"):
                assert client.post("/api/v1/lineage", json=_event(job), headers=SENDER).status_code == 201
            listing = client.get("/api/v1/namespaces/pipelines/jobs", headers=READER)
            assert _jobs(listing) == {"posted1", "posted2"}
            assert "Lineage-Pending-Events" not in listing.headers
    finally:
        app.state.store.dispose()
