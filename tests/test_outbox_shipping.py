"""Shipping the outbox to a real HTTP consumer on 127.0.0.1, through every fault it can show."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.consumer_server import ConsumerServer
from support.olschema import assert_valid_event
from support.outbox_helpers import assert_per_run_order, pg_url, run_event, run_pairs, sqlite_url
from support.waiting import wait_until

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport, store
from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper, default_destination_name
from airflow_lineage_provider.outbox.writer import OutboxWriter

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_engines() -> Any:
    yield
    dispose_engines()


@pytest.fixture
def consumer() -> Any:
    with ConsumerServer() as server:
        yield server


def fill(url: str, events: list[Any]) -> list[str]:
    """Emit ``events`` through the transport; return their run ids in emission order."""
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    for event in events:
        outbox.emit(event)
    return [str(e.run.runId) for e in events]


def shipper(url: str, consumer: ConsumerServer, **options: Any) -> Shipper:
    policy = DeliveryPolicy(
        batch_size=options.pop("batch_size", 50),
        lease_seconds=options.pop("lease_seconds", 60),
        backoff_base=options.pop("backoff_base", 0.2),
    )
    name = options.pop("name", default_destination_name(consumer.url))
    return Shipper(OutboxWriter(url), name, ConsumerConfig.from_dict({"url": consumer.url, **options}), policy)


def status(url: str) -> dict[str, Any]:
    with OutboxWriter(url).engine().begin() as conn:
        return store.status(conn)


def test_ships_every_event_once_in_outbox_order(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    events = run_pairs(60)
    fill(url, events)
    report = shipper(url, consumer).ship()
    assert (report.delivered, report.dead, report.pending, report.failed) == (120, 0, 0, False)
    assert_per_run_order(consumer.events)
    # Outbox order, except that a run's COMPLETE waits until its START was delivered.
    assert [e["run"]["runId"] for e in consumer.events if e["eventType"] == "START"] == [
        str(e.run.runId) for e in events if e.eventType.value == "START"
    ]
    assert Counter(e["run"]["runId"] + e["eventType"] for e in consumer.events) == Counter(
        str(e.run.runId) + e.eventType.value for e in events
    )
    assert all(r.path.endswith("/batch") for r in consumer.requests)
    for event in consumer.events:
        assert_valid_event(event)
    again = shipper(url, consumer).ship()
    assert again.delivered == 0 and len(consumer.events) == 120
    name = default_destination_name(consumer.url)
    assert status(url) == {"events": 120, "destinations": {name: {"pending": 0, "delivered": 120, "dead": 0}}}


def test_unavailable_consumer_keeps_events_pending_with_backoff(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(10))
    consumer.down_status = 503
    # A backoff of 1 s: with 0.2 s a loaded machine could take longer than that to start the second shipper.
    report = shipper(url, consumer, backoff_base=1.0).ship()
    assert (report.delivered, report.dead, report.pending, report.failed) == (0, 0, 20, True)
    assert "HTTP 503" in report.last_error
    assert shipper(url, consumer, backoff_base=1.0).ship().requests == 0, "events in backoff were retried at once"
    consumer.down_status = None
    time.sleep(1.3)  # a real gap: past the backoff and its +20 % jitter
    recovered = shipper(url, consumer).ship()
    assert (recovered.delivered, recovered.pending) == (20, 0)
    assert len(consumer.events) == 20


def test_waits_out_the_backoff_within_a_budget(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(5))
    consumer.fail_next = 2
    report = shipper(url, consumer).ship(budget=20, wait_for_backoff=True)
    assert (report.delivered, report.pending, report.failed) == (10, 0, False)
    assert Counter(e["run"]["runId"] + e["eventType"] for e in consumer.events).most_common(1)[0][1] == 1


def test_timeouts_are_transient(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(3))
    consumer.delay = 1.0
    report = shipper(url, consumer, timeout=0.3).ship()
    assert (report.delivered, report.dead, report.pending) == (0, 0, 6)
    assert "Timeout" in report.last_error


def test_unreachable_consumer_is_transient(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(3))
    server = ConsumerServer()  # bound, never started, then closed: the port refuses connections
    server.stop()
    report = shipper(url, server).ship()
    assert (report.delivered, report.pending, report.failed) == (0, 6, True)
    assert "ConnectionError" in report.last_error


def test_rejected_events_are_dead_lettered_alone(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    events = run_pairs(20)
    bad = {str(events[5].run.runId), str(events[30].run.runId)}
    fill(url, events)
    consumer.reject = lambda e: e["run"]["runId"] in bad and e["eventType"] == "START"
    report = shipper(url, consumer).ship()
    assert (report.delivered, report.dead, report.pending) == (38, 2, 0)
    assert Counter(e["run"]["runId"] + e["eventType"] for e in consumer.events).most_common(1)[0][1] == 1
    name = default_destination_name(consumer.url)
    with OutboxWriter(url).engine().begin() as conn:
        dead = store.dead_letters(conn, store.destination_id(conn, name))
    assert {d["run_id"] for d in dead} == bad
    assert all(d["status_code"] == 400 and "invalid run facet" in d["last_error"] for d in dead)
    assert status(url)["destinations"][name] == {"pending": 0, "delivered": 38, "dead": 2}

    consumer.reject = None
    with OutboxWriter(url).engine().begin() as conn:
        assert store.replay_dead(conn, store.destination_id(conn, name)) == 2
    assert shipper(url, consumer).ship().delivered == 2
    assert status(url)["destinations"][name] == {"pending": 0, "delivered": 40, "dead": 0}


def test_partial_results_dead_letter_only_the_failed_events(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    events = run_pairs(10)
    fill(url, events)
    consumer.partial_results = True
    consumer.reject = lambda e: e["run"]["runId"] == str(events[0].run.runId) and e["eventType"] == "START"
    report = shipper(url, consumer).ship()
    assert (report.delivered, report.dead) == (19, 1)
    assert 207 in {r.status for r in consumer.requests}
    assert len(consumer.events) == 19


def test_a_207_in_an_undocumented_shape_is_logged_and_its_events_sent_one_by_one(
    tmp_path: Path, consumer: ConsumerServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = sqlite_url(tmp_path)
    events = run_pairs(10)
    fill(url, events)
    consumer.partial_results, consumer.partial_key = True, "items"  # not the documented "results"
    consumer.reject = lambda e: e["run"]["runId"] == str(events[0].run.runId) and e["eventType"] == "START"
    with caplog.at_level(logging.WARNING, logger="airflow_lineage_provider"):
        report = shipper(url, consumer).ship()
    assert (report.delivered, report.dead) == (19, 1)
    assert consumer.requests[0].status == 207
    assert sum(not r.path.endswith("/batch") for r in consumer.requests) == 10  # the 207 batch, one by one
    assert any("without a 'results' list" in r.getMessage() for r in caplog.records)


def test_consumer_without_batch_endpoint_gets_one_post_per_event(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    events = run_pairs(8)
    fill(url, events)
    consumer.batch_endpoint = False
    report = shipper(url, consumer).ship()
    assert (report.delivered, report.pending) == (16, 0)
    assert [r.path.endswith("/batch") for r in consumer.requests] == [True] + [False] * 16
    assert_per_run_order(consumer.events)
    assert len(consumer.events) == 16


def test_api_key_is_sent_as_bearer_and_a_refusal_keeps_events_pending(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(4))
    consumer.api_key = "s3cret"
    refused = shipper(url, consumer, api_key="wrong").ship()
    assert refused.refused and "401" in refused.refused and refused.failed
    assert (refused.delivered, refused.dead, refused.pending) == (0, 0, 8)
    accepted = shipper(url, consumer, api_key="s3cret").ship()
    assert (accepted.delivered, accepted.pending) == (8, 0)
    assert consumer.requests[-1].headers["authorization"] == "Bearer s3cret"


def test_gzip_bodies_and_fallback_when_refused(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(4))
    assert shipper(url, consumer, compress=True, batch_size=4, name="gzip").ship().delivered == 8
    assert [r.headers.get("content-encoding") for r in consumer.requests] == ["gzip", "gzip"]
    consumer.accept_gzip = False
    report = shipper(url, consumer, compress=True, batch_size=4, name="plain").ship()
    assert (report.delivered, report.dead) == (8, 0)
    assert [r.status for r in consumer.requests[2:]] == [415, 200, 200]
    assert consumer.requests[-1].headers.get("content-encoding") is None


def test_start_is_never_delivered_after_its_run_end(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    run_id = "0190f0f0-0000-7000-8000-00000000abcd"
    # The COMPLETE reached the outbox first (e.g. the START waited in a spill file).
    fill(url, [run_event("COMPLETE", run_id, index=1), run_event("START", run_id), *run_pairs(3)])
    consumer.fail_next = 1  # and the first attempt at the START fails transiently
    report = shipper(url, consumer).ship(budget=20, wait_for_backoff=True)
    assert (report.delivered, report.pending) == (8, 0)
    mine = [e["eventType"] for e in consumer.events if e["run"]["runId"] == run_id]
    assert mine == ["START", "COMPLETE"]


def test_a_new_destination_starts_with_every_retained_event(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, run_pairs(5))
    with ConsumerServer() as first, ConsumerServer() as second:
        assert shipper(url, first).ship().delivered == 10
        fill(url, run_pairs(2))
        assert shipper(url, second).ship().delivered == 14
        assert shipper(url, first).ship().delivered == 4
        counts = status(url)["destinations"]
        assert counts[default_destination_name(first.url)]["delivered"] == 14
        assert counts[default_destination_name(second.url)]["delivered"] == 14


def test_shipper_killed_mid_batch_delivers_at_least_once(tmp_path: Path, consumer: ConsumerServer) -> None:
    url = sqlite_url(tmp_path)
    run_ids = fill(url, run_pairs(30))
    consumer.delay = 0.3
    script = textwrap.dedent(
        f"""
        from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
        from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper
        from airflow_lineage_provider.outbox.writer import OutboxWriter
        Shipper(OutboxWriter({url!r}), "consumer", ConsumerConfig.from_dict({{"url": {consumer.url!r}}}),
                DeliveryPolicy(batch_size=10, lease_seconds=2)).ship()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=os.environ.copy())
    wait_until(lambda: consumer.arrived >= 3, "the shipper never sent a third batch", timeout=60)
    os.kill(child.pid, signal.SIGKILL)  # while the third batch is in flight (the consumer takes 0.3 s to answer)
    child.wait(10)
    assert 0 < len(consumer.events) < 60
    consumer.delay = 0
    time.sleep(2.1)  # a real gap: the dead shipper's lease of 2 s runs out
    policy = DeliveryPolicy(batch_size=10, lease_seconds=2)
    Shipper(OutboxWriter(url), "consumer", ConsumerConfig.from_dict({"url": consumer.url}), policy).ship()
    received = Counter(e["run"]["runId"] + e["eventType"] for e in consumer.events)
    assert set(received) == {r + t for r in run_ids for t in ("START", "COMPLETE")}
    assert sum(received.values()) - len(received) <= 10, "more than the in-flight batch was delivered twice"
    assert status(url)["destinations"]["consumer"] == {"pending": 0, "delivered": 60, "dead": 0}


@pytest.mark.postgres
def test_two_shippers_on_postgres_deliver_each_event_once(pg_engine: Any, consumer: ConsumerServer) -> None:
    url = pg_url(pg_engine)
    events = run_pairs(150)
    fill(url, events)
    consumer.delay = 0.01
    reports: list[Any] = []

    def ship() -> None:
        reports.append(shipper(url, consumer, batch_size=20, name="shared").ship())

    threads = [threading.Thread(target=ship) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(r.delivered > 0 for r in reports) == [True, True], "both shippers took part"
    received = Counter(e["run"]["runId"] + e["eventType"] for e in consumer.events)
    assert len(received) == 300 and max(received.values()) == 1
    assert_per_run_order(consumer.events)
    assert status(url)["destinations"]["shared"] == {"pending": 0, "delivered": 300, "dead": 0}


@pytest.mark.postgres
def test_shipping_from_postgres_outbox(pg_engine: Any, consumer: ConsumerServer) -> None:
    url = pg_url(pg_engine)
    fill(url, run_pairs(20))
    consumer.reject = lambda e: e["job"]["name"] == "never" or e["inputs"][0]["name"].endswith("_7")
    report = shipper(url, consumer).ship()
    assert (report.delivered, report.dead, report.pending) == (38, 2, 0)


def test_a_consumer_answering_a_partial_batch_200_with_feasts_codes_is_read_per_event(tmp_path: Path) -> None:
    """This package's consumer with Feast's batch codes answers a partial ``/batch`` 200, not 207: the shipper reads
    the answer's per-event ``results`` all the same, so the refused event is dead-lettered, not counted delivered."""
    from support.consumer_helpers import LiveServer

    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access

    url = sqlite_url(tmp_path)
    events = run_pairs(3)
    fill(url, [*events, run_event("START", job_name="x" * 3000)])  # a name over the consumer's limit
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", anonymous=Access.ADMIN, batch_answers="feast")
    try:
        with LiveServer(app) as server:
            policy = DeliveryPolicy(batch_size=50, lease_seconds=60, backoff_base=0.2)
            config = ConsumerConfig.from_dict({"url": server.url})
            report = Shipper(OutboxWriter(url), default_destination_name(server.url), config, policy).ship()
    finally:
        app.state.store.dispose()
    assert (report.delivered, report.dead) == (6, 1)
