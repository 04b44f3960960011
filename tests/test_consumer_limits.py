"""Hostile input that once made the consumer do more than linear work, or answer a 4xx for an overloaded
store (issue 12): node ids with very many ``:`` and an exhausted connection pool, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.nodeids import MAX_SEPARATORS
from airflow_lineage_provider.consumer.store import create_store_engine

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def statements(app: Any) -> Iterator[list[str]]:
    """The SQL statements the app's store runs while the test runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    engine = app.state.store.engine
    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def test_a_thousand_part_column_lineage_id_is_refused_before_any_lookup(
    client: TestClient, statements: list[str]
) -> None:
    node_id = "datasetField:" + ":".join(["a"] * 1000)
    client.get("/api/v1/namespaces")  # the store is opened and migrated
    statements.clear()
    answer = client.get("/api/v1/column-lineage", params={"nodeId": node_id})
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith(
        f"nodeId has 999 ':' separators after datasetField:; at most {MAX_SEPARATORS}"
    )
    assert len(answer.text) < 500  # the id is not echoed back whole
    assert statements == []  # refused before the store is asked anything: no work grows with the id


def test_an_id_at_the_separator_bound_costs_two_statements(client: TestClient, statements: list[str]) -> None:
    columns = {"total": [("warehouse", "orders", "amount")]}
    client.post(
        "/api/v1/lineage", json=run_event("COMPLETE", "sum", outputs=[dataset("t", fields=["total"], columns=columns)])
    )
    statements.clear()
    node_id = "datasetField:" + ":".join(["a"] * (MAX_SEPARATORS + 1))
    assert client.get("/api/v1/column-lineage", params={"nodeId": node_id}).status_code == 404
    lookups = [s for s in statements if "lineage_nodes" in s or "lineage_fields" in s]
    assert len(lookups) <= 2, lookups
    found = client.get("/api/v1/column-lineage", params={"nodeId": "datasetField:warehouse:t:total"})
    assert found.status_code == 200
    assert "datasetField:warehouse:orders:amount" in {node["id"] for node in found.json()["graph"]}


def test_an_exhausted_connection_pool_answers_503_with_retry_after(store_url: str) -> None:
    engine = create_store_engine(store_url, pool_size=1, max_overflow=0, pool_timeout=0.5)
    app = create_app(store_url=store_url, engine=engine, anonymous=Access.ADMIN)
    with TestClient(app) as client:
        assert client.get("/api/v1/namespaces").status_code == 200  # the store is created and migrated
        held = engine.connect()  # the pool's only connection, as if a slow walk held it
        try:
            ingest = client.post("/api/v1/lineage", json=run_event("START", "load"))
            read = client.get("/api/v1/jobs")
        finally:
            held.close()
        for answer in (ingest, read):
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"]
            assert "busy" in answer.json()["detail"] or "unavailable" in answer.json()["detail"]
        assert client.post("/api/v1/lineage", json=run_event("START", "load")).status_code == 201
    engine.dispose()


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/search", {"q": "a\x00b"}),
        ("/api/v1/datasets", {"namespace": "\x00"}),
        ("/api/v1/jobs", {"name_contains": "\x00"}),
        ("/api/v1/runs", {"jobNamespace": "a\x00", "jobName": "b"}),
        ("/api/v1/lineage", {"nodeId": "dataset:a:\x00"}),
        ("/api/v1/events", {"after": "0001-01-01T00:00:00+14:00"}),
        ("/api/v1/events", {"before": "9999-12-31T23:59:59-14:00"}),
    ],
)
def test_parameters_no_store_can_take_are_400_not_500(client: TestClient, path: str, params: dict[str, str]) -> None:
    answer = client.get(path, params=params)
    assert answer.status_code == 400, answer.text
    assert "Traceback" not in answer.text


def test_nul_in_producer_is_refused_and_in_a_parent_run_id_ignored_never_a_500(client: TestClient) -> None:
    neighbours = [run_event("START", f"fine_{i}") for i in range(2)]
    bad_producer = {**run_event("START", "poisoned"), "producer": "https://acme/\x00"}
    answer = client.post("/api/v1/lineage/batch", json=[neighbours[0], bad_producer, neighbours[1]])
    assert answer.status_code == 207, answer.text
    assert answer.json()["errors"] == [
        {"index": 1, "error": "producer contains a NUL character, which no lineage store can keep"}
    ]
    parented = run_event("START", "child")
    parented["run"]["facets"] = {"parent": {"run": {"runId": "x\x00"}, "job": {"namespace": "p", "name": "q"}}}
    assert client.post("/api/v1/lineage", json=parented).status_code == 201
    run = client.get(f"/api/v1/runs/{parented['run']['runId']}").json()
    assert run["parentRunId"] is None  # not a UUID: ignored, as any unreadable facet value
    assert client.get("/api/v1/jobs", params={"name_contains": "fine_"}).json()["totalCount"] == 2


def test_a_namespace_limited_key_lists_events_holding_nul_in_a_facet(store_url: str) -> None:
    keys = (
        ApiKey("all", Access.ADMIN, "all-namespaces"),
        ApiKey("wh", Access.READ, "warehouse-only", NamespaceScope(("warehouse", "pipelines"))),
    )
    app = create_app(store_url=store_url, keys=keys)
    event = run_event("COMPLETE", "load", outputs=[dataset("t")])
    event["job"]["facets"] = {"note": {"text": "a\x00b"}}
    with TestClient(app) as client:
        assert client.post("/api/v1/lineage", json=event, headers={"X-API-Key": "all-namespaces"}).status_code == 201
        listed = client.get("/api/v1/events", headers={"X-API-Key": "warehouse-only"})
        assert listed.status_code == 200, listed.text
        assert listed.json()["totalCount"] == 1
    app.state.store.dispose()


def test_a_run_id_with_a_trailing_newline_is_refused(client: TestClient) -> None:
    event = run_event("START", "load")
    event["run"]["runId"] += "\n"
    assert client.post("/api/v1/lineage", json=event).status_code == 400


@pytest.mark.parametrize("levels", [980, 5000])
def test_an_event_nested_past_pythons_recursion_limit_is_a_400(client: TestClient, levels: int) -> None:
    body = '{"x":' * levels + "{}" + "}" * levels
    raw = json.dumps(run_event("START", "load"))[:-1] + ',"deep":' + body + "}"
    answer = client.post("/api/v1/lineage", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert "nested too deeply" in answer.text or "not valid JSON" in answer.text


def test_a_stored_event_nested_past_pydantics_limit_does_not_break_any_listing(client: TestClient) -> None:
    deep: dict[str, Any] = {}
    for _ in range(300):  # pydantic serializes at most 255 levels; the listings must not go through it
        deep = {"x": deep}
    event = run_event("COMPLETE", "deep", outputs=[{"namespace": "w", "name": "t", "facets": {"d": deep}}])
    event["job"]["facets"] = {"d": deep}
    event["run"]["facets"] = {"d": deep}
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    run_id = event["run"]["runId"]
    for path, params in (
        ("/api/v1/events", {}),
        ("/api/v1/jobs", {}),
        ("/api/v1/datasets", {}),
        ("/api/v1/runs", {"jobNamespace": "pipelines", "jobName": "deep"}),
        (f"/api/v1/runs/{run_id}", {}),
        ("/api/v1/search", {"q": "deep"}),
        ("/api/v1/namespaces", {}),
    ):
        answer = client.get(path, params=params)
        assert answer.status_code == 200, (path, answer.text[:200])
    assert client.get("/api/v1/events").json()["events"][0]["job"]["facets"]["d"] == deep
