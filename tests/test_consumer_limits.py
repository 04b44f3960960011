"""Hostile input that once made the consumer do more than linear work, or answer a 4xx for an overloaded
store (issue 12): node ids with very many ``:`` and an exhausted connection pool, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.access import Access
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


def test_a_thousand_part_column_lineage_id_is_refused_at_once(client: TestClient) -> None:
    node_id = "datasetField:" + ":".join(["a"] * 1000)
    started = time.perf_counter()
    answer = client.get("/api/v1/column-lineage", params={"nodeId": node_id})
    elapsed = time.perf_counter() - started
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith(
        f"nodeId has 999 ':' separators after datasetField:; at most {MAX_SEPARATORS}"
    )
    assert len(answer.text) < 500  # the id is not echoed back whole
    assert elapsed < 0.1


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
