"""Listings, search, paging, runs and raw events, and retention (which never prunes the graph)."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, graph_ids, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer.security.access import Access

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def catalog(client: TestClient) -> TestClient:
    events = []
    for i in range(12):
        ns = "warehouse" if i % 2 else "s3://lake"
        events.append(
            run_event(
                "COMPLETE",
                f"load_orders_{i}",
                inputs=[dataset(f"raw_{i}", namespace=ns)],
                outputs=[dataset(f"Orders_{i}", fields=["id"])],
            )
        )
    assert client.post("/api/v1/lineage/batch", json=events).status_code == 200
    return client


def test_namespaces_list_every_namespace_once(catalog: TestClient) -> None:
    body = catalog.get("/api/v1/namespaces").json()
    assert [n["name"] for n in body["namespaces"]] == ["pipelines", "s3://lake", "warehouse"]
    assert body["totalCount"] == 3


def test_jobs_page_through_with_a_total(catalog: TestClient) -> None:
    first = catalog.get("/api/v1/jobs", params={"limit": 5}).json()
    second = catalog.get("/api/v1/jobs", params={"limit": 5, "offset": 5}).json()
    last = catalog.get("/api/v1/jobs", params={"limit": 5, "offset": 10}).json()
    names = [j["name"] for page in (first, second, last) for j in page["jobs"]]
    assert first["totalCount"] == 12 and len(names) == 12 == len(set(names))
    assert names == sorted(names)
    job = first["jobs"][0]
    assert job["inputs"] and job["outputs"] and job["latestRun"]["state"] == "COMPLETED"
    assert job["nodeId"] == f"job:pipelines:{job['name']}"


def test_datasets_filter_by_namespace_and_carry_their_schema(catalog: TestClient) -> None:
    lake = catalog.get("/api/v1/datasets", params={"namespace": "s3://lake"}).json()
    assert lake["totalCount"] == 6
    assert {d["namespace"] for d in lake["datasets"]} == {"s3://lake"}
    orders = catalog.get("/api/v1/datasets", params={"namespace": "warehouse", "name_contains": "Orders_3"}).json()
    assert [d["name"] for d in orders["datasets"]] == ["Orders_3"]
    assert orders["datasets"][0]["fields"][0]["name"] == "id"


def test_search_finds_name_fragments_in_any_case(catalog: TestClient) -> None:
    found = catalog.get("/api/v1/search", params={"q": "orders_1"}).json()
    assert {(r["type"], r["name"]) for r in found["results"]} >= {("JOB", "load_orders_1"), ("DATASET", "Orders_1")}
    assert {r["name"] for r in found["results"]} == {
        "load_orders_1",
        "load_orders_10",
        "load_orders_11",
        "Orders_1",
        "Orders_10",
        "Orders_11",
    }
    datasets_only = catalog.get("/api/v1/search", params={"q": "ORDERS_1", "filter": "dataset"}).json()
    assert {r["type"] for r in datasets_only["results"]} == {"DATASET"}
    assert catalog.get("/api/v1/search", params={"q": "\\%"}).json()["totalCount"] == 0  # an escaped % is literal
    node = found["results"][0]["nodeId"]
    assert catalog.get("/api/v1/lineage", params={"nodeId": node, "depth": 0}).status_code == 200


def test_runs_of_a_job_and_one_run_with_its_datasets(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    client.post(
        "/api/v1/lineage", json=run_event("COMPLETE", "copy", run_id, inputs=[dataset("a")], outputs=[dataset("b")])
    )
    runs = client.get("/api/v1/runs", params={"jobNamespace": "pipelines", "jobName": "copy"}).json()
    assert [r["id"] for r in runs["runs"]] == [run_id]
    run = client.get(f"/api/v1/runs/{run_id.upper()}").json()
    assert run["inputs"] == [{"namespace": "warehouse", "name": "a"}]
    assert run["outputs"] == [{"namespace": "warehouse", "name": "b"}]
    assert client.get(f"/api/v1/runs/{uuid.uuid4()}").status_code == 404
    assert client.get("/api/v1/runs/not-a-uuid").status_code == 400
    assert client.get("/api/v1/runs", params={"jobNamespace": "pipelines", "jobName": "nope"}).status_code == 404


def test_raw_events_come_back_as_sent(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    sent = [
        run_event("START", "copy", run_id, time=0),
        run_event("COMPLETE", "copy", run_id, time=10),
        run_event("START", "other"),
    ]
    client.post("/api/v1/lineage/batch", json=sent)
    of_run = client.get("/api/v1/events", params={"runId": run_id}).json()
    assert of_run["events"] == [sent[1], sent[0]]  # newest first, exactly as sent
    window = client.get("/api/v1/events", params={"after": "2026-03-01T12:00:05Z"}).json()
    assert window["events"] == [sent[1]]


def test_retention_prunes_old_events_and_runs_but_never_the_graph(client: TestClient) -> None:
    old_run, latest_run = str(uuid.uuid4()), str(uuid.uuid4())
    old = {
        **run_event("COMPLETE", "copy", old_run, inputs=[dataset("a")], outputs=[dataset("b", fields=["x"])]),
        "eventTime": "2020-01-01T00:00:00Z",
    }
    latest = {**run_event("COMPLETE", "copy", latest_run), "eventTime": "2020-01-02T00:00:00Z"}
    recent = {**run_event("START", "fresh"), "eventTime": datetime.now(timezone.utc).isoformat()}
    client.post("/api/v1/lineage/batch", json=[old, latest, recent])
    pruned = client.post("/api/v1/retention", params={"days": 30}).json()
    assert pruned == {"events": 2, "runs": 1}
    assert client.get(f"/api/v1/runs/{old_run}").status_code == 404
    assert client.get(f"/api/v1/runs/{latest_run}").status_code == 200  # each job's latest run stays
    assert client.get("/api/v1/events").json()["events"] == [recent]
    graph = client.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:b", "depth": 1}).json()
    assert graph_ids(graph) == {"dataset:warehouse:a", "job:pipelines:copy", "dataset:warehouse:b"}
    assert client.post("/api/v1/retention", params={"days": 0}).status_code == 400


def test_scheduled_retention_runs_after_ingest(tmp_path) -> None:

    from airflow_lineage_provider.consumer import create_app

    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", retention_days=30, anonymous=Access.ADMIN)
    with TestClient(app) as client:
        old = {**run_event("START", "copy"), "eventTime": "2020-01-01T00:00:00Z"}
        client.post("/api/v1/lineage", json=old)
        wait_until(lambda: client.get("/api/v1/events").json()["totalCount"] == 0, "the old event was never pruned")


def test_the_openapi_document_describes_every_endpoint(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/api/v1/lineage",
        "/api/v1/lineage/batch",
        "/api/v1/column-lineage",
        "/api/v1/namespaces",
        "/api/v1/jobs",
        "/api/v1/datasets",
        "/api/v1/search",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/events",
        "/api/v1/retention",
    } <= set(paths)
    assert set(paths["/api/v1/lineage/batch"]["post"]["responses"]) >= {"200", "207", "400", "401", "413"}


def test_datasets_list_their_symlinks(client: TestClient) -> None:
    event = run_event("COMPLETE", "load", outputs=[dataset("orders")])
    event["outputs"][0]["facets"]["symlinks"] = {
        "_producer": "https://example.com",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        "identifiers": [{"namespace": "hive://metastore", "name": "db.orders", "type": "TABLE"}],
    }
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    found = client.get("/api/v1/datasets").json()["datasets"][0]
    assert found["symlinks"] == [{"namespace": "hive://metastore", "name": "db.orders", "type": "TABLE"}]
