"""Operations of the consumer, on SQLite and PostgreSQL: ``GET /api/v1/retention`` (configuration, what the
store holds, the last prune, kept in the store across processes and restarts), retention on a real timer, and
the paged whole-graph listing ``GET /api/v1/graph``."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from fastapi.testclient import TestClient
from support.consumer_helpers import PRODUCER, dataset, dataset_event, free_port, job_event, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.ingest.service import store_events
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.operations.retention import (
    KEPT_PRUNES,
    PruneRecord,
    recent_prunes,
    record_prune,
)
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)

ADMIN, READ, LIMITED, COVERING = "admin-secret-1", "read-secret-2", "limited-secret-3", "covering-secret-4"
KEYS = (
    ApiKey("ops", Access.ADMIN, ADMIN),
    ApiKey("viewer", Access.READ, READ),
    ApiKey("finance", Access.READ, LIMITED, NamespaceScope(("finance", "pipelines"))),
    ApiKey("everything", Access.READ, COVERING, NamespaceScope(("*",))),
)


def _key(secret: str) -> dict[str, str]:
    return {"X-API-Key": secret}


def _dated(event: dict[str, Any], when: str) -> dict[str, Any]:
    return {**event, "eventTime": when}


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def keyed(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


# -- GET /api/v1/retention ------------------------------------------------------------------------------------


def test_an_empty_store_reports_its_configuration_and_nothing_held(keyed: TestClient) -> None:
    answer = keyed.get("/api/v1/retention", headers=_key(READ))
    assert answer.status_code == 200
    assert answer.json() == {
        "configuration": {
            "retentionDays": None,
            "enabled": False,
            "checkIntervalHours": 24.0,
            "timerRunning": False,
            "nextCheckAt": None,
        },
        "statistics": {
            "events": 0,
            "runs": 0,
            "jobs": 0,
            "datasets": 0,
            "oldestEventTime": None,
            "newestEventTime": None,
            "oldestReceivedAt": None,
            "newestReceivedAt": None,
            "pendingEvents": 0,
            "unappliedEvents": 0,
        },
        "lastPrune": None,
    }


def test_statistics_and_the_last_prune_are_reported_and_survive_a_restart(store_url: str) -> None:
    old_run, io = str(uuid.uuid4()), {"inputs": [dataset("a")], "outputs": [dataset("b")]}
    events = [
        _dated(run_event("START", "load", old_run, inputs=[dataset("a")]), "2020-01-01T00:00:00Z"),
        _dated(run_event("COMPLETE", "load", old_run, **io), "2020-01-02T00:00:00Z"),
        _dated(run_event("COMPLETE", "load", **io), "2020-02-01T00:00:00Z"),
        _dated(job_event("publish", [dataset("b")], [dataset("c", namespace="finance")]), "2020-03-01T00:00:00Z"),
        _dated(run_event("START", "fresh"), datetime.now(timezone.utc).isoformat()),
    ]
    app = create_app(store_url=store_url, keys=KEYS)
    before = datetime.now(timezone.utc)
    with TestClient(app) as client:
        assert client.post("/api/v1/lineage/batch", json=events, headers=_key(ADMIN)).status_code == 200
        held = client.get("/api/v1/retention", headers=_key(READ)).json()["statistics"]
        assert {k: held[k] for k in ("events", "runs", "jobs", "datasets")} == {
            "events": 5,
            "runs": 3,
            "jobs": 3,
            "datasets": 3,
        }
        assert held["oldestEventTime"] == "2020-01-01T00:00:00.000000Z"
        assert _parse_time(held["newestEventTime"]) > before - timedelta(minutes=1)
        assert before <= _parse_time(held["oldestReceivedAt"]) <= _parse_time(held["newestReceivedAt"])
        assert client.post("/api/v1/retention", params={"days": 30}, headers=_key(ADMIN)).json() == {
            "events": 4,
            "runs": 1,
        }
        after = datetime.now(timezone.utc)
    app.state.store.dispose()

    # Another app on the same store (a restart, or another process) reports the same last prune.
    again = create_app(store_url=store_url, keys=KEYS)
    with TestClient(again) as client:
        status = client.get("/api/v1/retention", headers=_key(READ)).json()
    again.state.store.dispose()
    last = status["lastPrune"]
    assert (last["trigger"], last["events"], last["runs"]) == ("api", 4, 1)
    assert before <= _parse_time(last["prunedAt"]) <= after
    assert _parse_time(last["prunedAt"]) - _parse_time(last["cutoff"]) == timedelta(days=30)
    assert 0 <= last["durationSeconds"] < 30
    assert status["statistics"]["events"] == 1 and status["statistics"]["runs"] == 2  # each job's latest run stays
    assert status["statistics"]["jobs"] == 3 and status["statistics"]["datasets"] == 3  # the graph stays


def test_a_key_that_sees_only_some_namespaces_may_not_read_the_whole_stores_statistics(keyed: TestClient) -> None:
    event = run_event("COMPLETE", "load", inputs=[dataset("a")], outputs=[dataset("b", namespace="finance")])
    assert keyed.post("/api/v1/lineage", json=event, headers=_key(ADMIN)).status_code == 201
    refused = keyed.get("/api/v1/retention", headers=_key(LIMITED))
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "key 'finance' sees only some namespaces; the retention statistics count the whole store: ask with a key "
        "that sees every namespace"
    )
    assert keyed.get("/api/v1/retention", headers=_key(COVERING)).status_code == 200  # its patterns match all
    assert keyed.get("/api/v1/retention", headers=_key(READ)).status_code == 200
    assert keyed.get("/api/v1/retention").status_code == 401


def test_the_store_keeps_the_latest_prunes_only(store_url: str) -> None:
    store = LineageStore(store_url)
    try:
        start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        for number in range(KEPT_PRUNES + 5):
            at = start + timedelta(hours=number)
            with store.write() as conn:
                record_prune(conn, PruneRecord(at, at - timedelta(days=1), "timer", number, 0, 0.001))
        with store.read() as conn:
            kept = recent_prunes(conn, 1000)
        assert len(kept) == KEPT_PRUNES
        assert [record.events for record in kept] == list(range(KEPT_PRUNES + 4, 4, -1))  # newest first
        with store.write() as conn, pytest.raises(ValueError, match="one of timer, api, ingest, not 'cron'"):
            record_prune(conn, PruneRecord(start, start, "cron", 0, 0, 0.0))
    finally:
        store.dispose()


# -- the timer ------------------------------------------------------------------------------------------------


def _old_events(count: int) -> list[Any]:
    """``count`` events of 2020 (older than any retention), each of its own job, parsed for the store."""
    return [
        parse_event(_dated(run_event("COMPLETE", f"old_{n}", outputs=[dataset(f"t{n}")]), "2020-01-01T00:00:00Z"))
        for n in range(count)
    ]


def test_the_timer_prunes_every_interval_without_an_ingest_and_stops_with_the_app(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.ingest.service")
    app = create_app(store_url, anonymous=Access.ADMIN, retention_days=30, retention_check_interval_hours=0.001)
    try:
        with TestClient(app) as client:
            # The first check prunes at once (the store had no scheduled prune): nothing to remove yet.
            first = wait_until(lambda: client.get("/api/v1/retention").json()["lastPrune"], "the first prune")
            assert first["trigger"] == "timer" and first["events"] == 0
            config = client.get("/api/v1/retention").json()["configuration"]
            assert config["timerRunning"] and config["enabled"] and config["checkIntervalHours"] == 0.001
            # Old events written straight into the store: no ingest request, so only the timer can prune them.
            assert store_events(app.state.store, _old_events(3))[0].stored == 3
            assert client.get("/api/v1/retention").json()["statistics"]["events"] == 3

            def pruned_by_timer() -> dict[str, Any] | None:
                last = client.get("/api/v1/retention").json()["lastPrune"]
                return last if last["trigger"] == "timer" and last["events"] == 3 else None

            second = wait_until(pruned_by_timer, "the timer's prune of the 3 old events")
            gap = _parse_time(second["prunedAt"]) - _parse_time(first["prunedAt"])
            assert gap >= timedelta(seconds=3.5)  # 0.001 h = 3.6 s, counted from the store's last prune
            assert client.get("/api/v1/retention").json()["statistics"]["events"] == 0
            next_check = _parse_time(client.get("/api/v1/retention").json()["configuration"]["nextCheckAt"])
            assert next_check > _parse_time(second["prunedAt"])
            assert app.state.retention.running
        assert not app.state.retention.running  # stopped on shutdown
        assert "lineage retention (timer) pruned 3 events and 0 runs" in caplog.text  # each job's latest run stays
    finally:
        app.state.store.dispose()


def test_a_second_process_counts_the_interval_from_the_stores_last_prune(store_url: str) -> None:
    settings = {"anonymous": Access.ADMIN, "retention_days": 30, "retention_check_interval_hours": 1}
    first, second = create_app(store_url, **settings), create_app(store_url, **settings)
    try:
        with TestClient(first) as one:
            pruned = wait_until(lambda: one.get("/api/v1/retention").json()["lastPrune"], "the first prune")
            assert pruned["trigger"] == "timer"
            with TestClient(second) as two:
                answer = wait_until(
                    lambda: two.get("/api/v1/retention").json()["configuration"]["nextCheckAt"], "the next check"
                )
                due = _parse_time(pruned["prunedAt"]) + timedelta(hours=1)
                assert abs(_parse_time(answer) - due) < timedelta(seconds=5)
                with second.state.store.read() as conn:
                    assert len(recent_prunes(conn, 10)) == 1  # the second process did not prune again
    finally:
        first.state.store.dispose()
        second.state.store.dispose()


def test_without_the_apps_lifespan_an_ingest_still_prunes(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'lineage.db'}", anonymous=Access.ADMIN, retention_days=30)
    client = TestClient(app)  # not entered: no lifespan, no timer
    try:
        old = _dated(run_event("START", "copy"), "2020-01-01T00:00:00Z")
        assert client.post("/api/v1/lineage", json=old).status_code == 201
        last = wait_until(lambda: client.get("/api/v1/retention").json()["lastPrune"], "the ingest's prune")
        assert (last["trigger"], last["events"]) == ("ingest", 1)
        assert not client.get("/api/v1/retention").json()["configuration"]["timerRunning"]
    finally:
        app.state.store.dispose()


def test_a_prune_without_days_keeps_the_configured_retention(store_url: str) -> None:
    twenty_days_old = (datetime.now(timezone.utc) - timedelta(days=20)).isoformat()
    app = create_app(store_url=store_url, keys=KEYS, retention_days=30, retention_check_interval_hours=1000)
    with TestClient(app) as client:
        sent = client.post(
            "/api/v1/lineage", json=_dated(run_event("START", "fresh"), twenty_days_old), headers=_key(ADMIN)
        )
        assert sent.status_code == 201
        # Without days: the configured 30 (the 20-day-old event stays); with days=10 it goes.
        assert client.post("/api/v1/retention", headers=_key(ADMIN)).json() == {"events": 0, "runs": 0}
        with app.state.store.read() as conn:  # the scheduled prunes (timer, ingest) may be recorded after it
            [api] = [record for record in recent_prunes(conn, KEPT_PRUNES) if record.trigger == "api"]
        assert api.pruned_at - api.cutoff == timedelta(days=30)
        assert client.post("/api/v1/retention", params={"days": 10}, headers=_key(ADMIN)).json() == {
            "events": 1,
            "runs": 0,  # each job's latest run stays
        }
    app.state.store.dispose()


def test_a_prune_without_days_and_without_retention_is_a_400_saying_so(keyed: TestClient) -> None:
    refused = keyed.post("/api/v1/retention", headers=_key(ADMIN))
    assert refused.status_code == 400
    assert "no retention is configured" in refused.text and "days=N" in refused.text
    assert keyed.post("/api/v1/retention", params={"days": 0}, headers=_key(ADMIN)).status_code == 400  # not "all"


def test_zero_retention_days_means_off() -> None:
    assert ConsumerSettings("sqlite://", retention_days=0).retention_days is None
    assert ConsumerSettings("sqlite://").retention_days is None  # off by default (docs/consumer.md says why)
    with pytest.raises(ValueError, match="retention_days must be 0 or more"):
        ConsumerSettings("sqlite://", retention_days=-1)
    app = create_app("sqlite://", anonymous=Access.ADMIN, retention_days=0)
    with TestClient(app) as client:
        config = client.get("/api/v1/retention").json()["configuration"]
    app.state.store.dispose()
    assert config["retentionDays"] is None and not config["enabled"] and not config["timerRunning"]


def test_zero_consumer_retention_days_in_airflow_means_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_lineage_provider import conf
    from airflow_lineage_provider.plugins.consumer import consumer_apps

    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", f"sqlite:///{tmp_path / 'lineage.db'}")
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_API_KEY", "k3y-plugged")
    assert conf.consumer_retention_days() is None
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_RETENTION_DAYS", "0")
    assert conf.consumer_retention_days() is None
    [mounted] = consumer_apps()
    assert mounted["app"].state.settings.retention_days is None
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_RETENTION_DAYS", "45")
    assert conf.consumer_retention_days() == 45.0


@contextmanager
def _served(tmp_path: Path, *options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``airflow-lineage serve`` on a SQLite store in ``tmp_path`` with an admin key and ``options``, and the URL
    of its ``/api/v1/retention``; stopped after the block, its output left unread for the caller."""
    command = [
        str(Path(sys.executable).parent / "airflow-lineage"),
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'served.db'}",
        "--port",
        str(port := free_port()),
        "--key",
        f"ops:admin:{ADMIN}",
        *options,
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield process, f"http://127.0.0.1:{port}/api/v1/retention"
    finally:
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def _retention_status(
    process: subprocess.Popen[str], url: str, ready: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The served consumer's ``GET /api/v1/retention`` answer, once it answers and ``ready`` holds of it."""

    def status() -> dict[str, Any] | None:
        try:
            answer = requests.get(url, headers=_key(ADMIN), timeout=2)
        except requests.ConnectionError:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            return None
        found: dict[str, Any] = answer.json()
        return found if ready(found) else None

    return wait_until(status, "the served consumer's retention status", timeout=60)


def test_serve_takes_zero_retention_days_as_off(tmp_path: Path) -> None:
    with _served(tmp_path, "--retention-days", "0") as (process, url):
        found = _retention_status(process, url, lambda _: True)
        assert found["configuration"]["retentionDays"] is None and not found["configuration"]["timerRunning"]
        assert requests.post(url, headers=_key(ADMIN), timeout=5).status_code == 400  # nothing configured


def test_retention_interval_hours_still_works_as_a_deprecated_name() -> None:
    with pytest.warns(DeprecationWarning, match="use retention_check_interval_hours"):
        settings = ConsumerSettings("sqlite://", retention_interval_hours=6)
    assert settings.retention_check_interval_hours == 6.0 and settings.retention_interval_hours is None
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="disagree"):
        ConsumerSettings("sqlite://", retention_interval_hours=6, retention_check_interval_hours=2)
    with pytest.raises(ValueError, match="retention_check_interval_hours must be more than 0"):
        ConsumerSettings("sqlite://", retention_check_interval_hours=0)


def test_serve_runs_the_timer_at_the_interval_it_is_given(tmp_path: Path) -> None:
    options = ("--retention-days", "30", "--retention-check-interval-hours", "0.5")
    with _served(tmp_path, *options, "--namespace-alias", "pg://db=postgres://db:5432") as (process, url):
        found = _retention_status(process, url, lambda found: bool(found["lastPrune"]))
        assert found["configuration"]["checkIntervalHours"] == 0.5 and found["configuration"]["timerRunning"]
        assert found["lastPrune"]["trigger"] == "timer"
        due = _parse_time(found["lastPrune"]["prunedAt"]) + timedelta(minutes=30)
        assert abs(_parse_time(found["configuration"]["nextCheckAt"]) - due) < timedelta(seconds=5)
    output = process.stdout.read() if process.stdout else ""
    assert "lineage retention (timer) pruned 0 events and 0 runs" in output


# -- GET /api/v1/graph ----------------------------------------------------------------------------------------

PG = "postgres://db:5432"


def _graph_events() -> list[dict[str, Any]]:
    """A graph across namespaces, with a namespace holding ``:`` and ``/`` and a symlink::

    warehouse.raw -> pipelines.load -> postgres://db:5432 public.orders -> pipelines.report -> finance.summary
    finance.ledger -> finance.close -> finance.summary ;  a DatasetEvent of warehouse.lonely
    """
    orders = dataset("public.orders", namespace=PG, fields=["id"], columns={"id": [("warehouse", "raw", "id")]})
    events = [
        run_event("COMPLETE", "load", inputs=[dataset("raw", fields=["id"])], outputs=[orders]),
        run_event("COMPLETE", "report", inputs=[dataset("public.orders", namespace=PG)],
                  outputs=[dataset("summary", namespace="finance")]),
        run_event("COMPLETE", "close", namespace="finance", inputs=[dataset("ledger", namespace="finance")],
                  outputs=[dataset("summary", namespace="finance")]),
        dataset_event(dataset("lonely")),
    ]  # fmt: skip
    events[0]["outputs"][0]["facets"]["symlinks"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        "identifiers": [
            {"namespace": "hive://metastore:9083", "name": "public.orders", "type": "TABLE"},
            {"namespace": "finance", "name": "orders_view", "type": "VIEW"},
        ],
    }
    return events


ALL_NODES = [
    "dataset:finance:ledger",
    "dataset:finance:summary",
    f"dataset:{PG}:public.orders",
    "dataset:warehouse:lonely",
    "dataset:warehouse:raw",
    "job:finance:close",
    "job:pipelines:load",
    "job:pipelines:report",
]
ALL_EDGES = sorted(
    [
        (f"dataset:{PG}:public.orders", "job:pipelines:report"),
        ("dataset:finance:ledger", "job:finance:close"),
        ("dataset:warehouse:raw", "job:pipelines:load"),
        ("job:finance:close", "dataset:finance:summary"),
        ("job:pipelines:load", f"dataset:{PG}:public.orders"),
        ("job:pipelines:report", "dataset:finance:summary"),
    ]
)


def _pages(client: TestClient, limit: int, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    pages, offset = [], 0
    while True:
        answer = client.get("/api/v1/graph", params={"limit": limit, "offset": offset, **params}, headers=headers)
        assert answer.status_code == 200, answer.text
        pages.append(answer.json())
        offset += limit
        if offset >= pages[-1]["totalCount"]:
            return pages


@pytest.fixture
def graph_client(keyed: TestClient) -> TestClient:
    answer = keyed.post("/api/v1/lineage/batch", json=_graph_events(), headers=_key(ADMIN))
    assert answer.status_code == 200, answer.text
    return keyed


@pytest.mark.parametrize("limit", [1, 3, 100])
def test_paging_through_the_graph_yields_every_node_and_every_edge_once(graph_client: TestClient, limit: int) -> None:
    pages = _pages(graph_client, limit, _key(READ))
    assert {page["totalCount"] for page in pages} == {len(ALL_NODES)}
    nodes = [node["id"] for page in pages for node in page["nodes"]]
    assert nodes == ALL_NODES  # kind, namespace, name order; each once
    edges = [(edge["origin"], edge["destination"]) for page in pages for edge in page["edges"]]
    assert sorted(edges) == ALL_EDGES and len(edges) == len(set(edges))
    for page in pages:  # an edge is on the page of its origin
        assert {edge["origin"] for edge in page["edges"]} <= {node["id"] for node in page["nodes"]}
    edge = next(e for page in pages for e in page["edges"] if e["origin"] == "dataset:warehouse:raw")
    assert edge["firstSeen"] == edge["lastSeen"] == "2026-03-01T12:00:00.000000Z"


def test_a_listed_node_is_the_node_the_walks_show(graph_client: TestClient) -> None:
    [page] = _pages(graph_client, 100, _key(READ))
    walk = graph_client.get(
        "/api/v1/lineage", params={"nodeId": f"dataset:{PG}:public.orders", "depth": 5}, headers=_key(READ)
    ).json()
    walked = {node["id"]: (node["type"], node["data"]) for node in walk["graph"]}
    listed = {node["id"]: (node["type"], node["data"]) for node in page["nodes"]}
    assert walked and all(listed[node_id] == shown for node_id, shown in walked.items())
    assert listed["job:pipelines:load"][1]["latestRun"]["state"] == "COMPLETED"
    assert listed[f"dataset:{PG}:public.orders"][1]["fields"] == [{"name": "id", "type": "VARCHAR", "tags": []}]
    assert page["symlinks"] == [
        {"dataset": f"dataset:{PG}:public.orders", "namespace": "finance", "name": "orders_view", "type": "VIEW"},
        {
            "dataset": f"dataset:{PG}:public.orders",
            "namespace": "hive://metastore:9083",
            "name": "public.orders",
            "type": "TABLE",
        },
    ]


def test_one_namespaces_page_keeps_the_edges_leaving_it(graph_client: TestClient) -> None:
    [page] = _pages(graph_client, 100, _key(READ), namespace="pipelines")
    assert [node["id"] for node in page["nodes"]] == ["job:pipelines:load", "job:pipelines:report"]
    assert page["totalCount"] == 2
    assert [(e["origin"], e["destination"]) for e in page["edges"]] == [
        ("job:pipelines:load", f"dataset:{PG}:public.orders"),
        ("job:pipelines:report", "dataset:finance:summary"),
    ]
    [nothing] = _pages(graph_client, 100, _key(READ), namespace="nowhere")
    assert nothing == {"nodes": [], "edges": [], "symlinks": [], "totalCount": 0}
    beyond = graph_client.get("/api/v1/graph", params={"offset": 50}, headers=_key(READ)).json()
    assert beyond == {"nodes": [], "edges": [], "symlinks": [], "totalCount": len(ALL_NODES)}


def test_a_namespace_limited_key_lists_only_its_namespaces(graph_client: TestClient) -> None:
    pages = _pages(graph_client, 2, _key(LIMITED))
    nodes = [node["id"] for page in pages for node in page["nodes"]]
    assert nodes == [
        "dataset:finance:ledger",
        "dataset:finance:summary",
        "job:finance:close",
        "job:pipelines:load",
        "job:pipelines:report",
    ]
    assert {page["totalCount"] for page in pages} == {5}
    edges = sorted((e["origin"], e["destination"]) for page in pages for e in page["edges"])
    assert edges == [
        ("dataset:finance:ledger", "job:finance:close"),
        ("job:finance:close", "dataset:finance:summary"),
        ("job:pipelines:report", "dataset:finance:summary"),
    ]  # never an edge into a hidden namespace
    assert all(not page["symlinks"] for page in pages)  # the symlinks are of a hidden dataset
    [hidden] = _pages(graph_client, 10, _key(LIMITED), namespace=PG)
    assert hidden["nodes"] == [] and hidden["totalCount"] == 0


def test_a_page_is_at_most_ten_thousand_nodes(graph_client: TestClient) -> None:
    for limit in (0, 10_001):
        refused = graph_client.get("/api/v1/graph", params={"limit": limit}, headers=_key(READ))
        assert refused.status_code == 400 and "limit" in refused.json()["detail"]
    assert graph_client.get("/api/v1/graph", params={"limit": 10_000}, headers=_key(READ)).status_code == 200
    assert graph_client.get("/api/v1/graph").status_code == 401
