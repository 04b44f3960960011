"""Marquez's ``GET /api/v1/lineage`` and ``GET /api/v1/column-lineage`` answers against Marquez's ``LineageGraph``,
and column lineage from a ``job:`` id with Marquez's ``withDownstream`` — on SQLite and PostgreSQL.

A graph node's ``data`` is a Job or a Dataset as the node's ``type`` says (the spec's discriminator, which the
schema check cannot read from the parent): each is checked against that schema here. Column-lineage nodes
are ``DATASET_FIELD`` in Marquez's answers and UI, a type Marquez's description of ``LineageGraph`` leaves out:
their ids and edges are checked against ``LineageGraph``, their data member by member.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, graph_edges, graph_ids, job_event, run_event
from support.marquez_spec import assert_marquez

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

FIELD = "datasetField:warehouse:{}:{}".format


def assert_lineage_graph(body: dict[str, Any]) -> None:
    """``body`` is Marquez's ``LineageGraph``, each node's data the Job or Dataset its type says."""
    assert_marquez("LineageGraph", body)
    for node in body["graph"]:
        assert_marquez({"JOB": "Job", "DATASET": "Dataset"}[node["type"]], node["data"])


def assert_column_graph(body: dict[str, Any]) -> None:
    """``body`` is a column-lineage graph: Marquez's ``LineageGraph`` ids and edges, ``DATASET_FIELD`` nodes."""
    assert_marquez(
        "LineageGraph", {"graph": [{k: v for k, v in n.items() if k not in ("type", "data")} for n in body["graph"]]}
    )
    for node in body["graph"]:
        data = node["data"]
        assert node["type"] == "DATASET_FIELD"
        assert node["id"] == f"datasetField:{data['namespace']}:{data['dataset']}:{data['field']}"
        assert set(data) <= {"namespace", "dataset", "field", "fieldType", "inputFields"}
        assert None not in data.values()  # Marquez leaves out what it does not know
        for item in data["inputFields"]:
            assert {"namespace", "dataset", "field"} <= set(item) and None not in item.values()


def _get(client: TestClient, path: str, headers: dict | None = None, **params: Any) -> dict[str, Any]:
    answer = client.get(path, params=params, headers=headers or {})
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture
def columns(client: TestClient) -> TestClient:
    """``stage`` copies raw.id → orders.id; ``sum`` reads orders (id, amount) and writes totals (total ←
    amount, id ← id); ``publish`` copies totals.total → report.total. ``notes`` has no column lineage."""
    events = [
        run_event(
            "COMPLETE",
            "stage",
            inputs=[dataset("raw", fields=["id"])],
            outputs=[dataset("orders", fields=["id", "amount"], columns={"id": [("warehouse", "raw", "id")]})],
        ),
        run_event(
            "COMPLETE",
            "sum",
            inputs=[dataset("orders", fields=["id", "amount"])],
            outputs=[
                dataset(
                    "totals",
                    fields=["id", "total"],
                    columns={"total": [("warehouse", "orders", "amount")], "id": [("warehouse", "orders", "id")]},
                )
            ],
        ),
        run_event(
            "START",
            "publish",
            inputs=[dataset("totals", fields=["total"])],
            outputs=[dataset("report", fields=["total"], columns={"total": [("warehouse", "totals", "total")]})],
        ),
        run_event("COMPLETE", "notes", inputs=[dataset("memo")], outputs=[dataset("memo_copy")]),
    ]
    answer = client.post("/api/v1/lineage/batch", json=events)
    assert answer.status_code == 200 and answer.json()["successful"] == len(events), answer.text
    return client


def test_the_lineage_graph_is_marquez_s_for_jobs_and_datasets(columns: TestClient) -> None:
    for node_id in ("job:pipelines:sum", "dataset:warehouse:totals", "job:pipelines:publish"):
        body = _get(columns, "/api/v1/lineage", nodeId=node_id, depth=2)
        assert_lineage_graph(body)
        assert node_id in graph_ids(body)
    publish = next(n for n in body["graph"] if n["id"] == "job:pipelines:publish")
    assert publish["data"]["latestRun"]["state"] == "RUNNING"
    assert "endedAt" not in publish["data"]["latestRun"]  # a running run has no end: left out, as Marquez does
    static = job_event("static", [dataset("totals")], [dataset("archive")])  # a job without runs
    assert columns.post("/api/v1/lineage", json=static).status_code == 201
    body = _get(columns, "/api/v1/lineage", nodeId="job:pipelines:static", depth=1)
    assert_lineage_graph(body)
    assert "latestRun" not in next(n for n in body["graph"] if n["id"] == "job:pipelines:static")["data"]


def test_column_lineage_of_a_job_starts_from_the_fields_of_its_inputs_and_outputs(columns: TestClient) -> None:
    body = _get(columns, "/api/v1/column-lineage", nodeId="job:pipelines:sum", depth=1)  # upstream, as Marquez
    assert_column_graph(body)
    totals_total, totals_id = FIELD("totals", "total"), FIELD("totals", "id")
    orders_amount, orders_id, raw_id = FIELD("orders", "amount"), FIELD("orders", "id"), FIELD("raw", "id")
    assert graph_ids(body) == {totals_total, totals_id, orders_amount, orders_id, raw_id}
    assert graph_edges(body) == {(orders_amount, totals_total), (orders_id, totals_id), (raw_id, orders_id)}
    total = next(n for n in body["graph"] if n["id"] == totals_total)
    assert total["data"]["fieldType"] == "VARCHAR"
    assert total["data"]["inputFields"] == [
        {
            "namespace": "warehouse",
            "dataset": "orders",
            "field": "amount",
            "transformationDescription": "",
            "transformationType": "IDENTITY",
            "transformations": {"transformationDescription": "", "transformationType": "IDENTITY"},
        }
    ]
    same = _get(columns, "/api/v1/column-lineage", nodeId="job:pipelines:sum", depth=1, withDownstream="false")
    assert same == body
    both = _get(columns, "/api/v1/column-lineage", nodeId="job:pipelines:sum", depth=1, withDownstream="true")
    assert_column_graph(both)
    assert graph_ids(both) == graph_ids(body) | {FIELD("report", "total")}
    down = _get(columns, "/api/v1/column-lineage", nodeId="job:pipelines:sum", depth=1, direction="downstream")
    assert graph_ids(down) == {totals_total, totals_id, orders_amount, orders_id, FIELD("report", "total")}
    shallow = _get(columns, "/api/v1/column-lineage", nodeId="job:pipelines:sum", depth=0)
    assert graph_ids(shallow) == {totals_total, totals_id, orders_amount, orders_id}
    assert graph_edges(shallow) == {(orders_amount, totals_total), (orders_id, totals_id)}


def test_dataset_and_field_ids_keep_working_with_marquez_s_parameters(columns: TestClient) -> None:
    upstream = _get(columns, "/api/v1/column-lineage", nodeId=FIELD("report", "total"), depth=20)
    assert_column_graph(upstream)
    assert graph_ids(upstream) == {FIELD("report", "total"), FIELD("totals", "total"), FIELD("orders", "amount")}
    whole = _get(columns, "/api/v1/column-lineage", nodeId="dataset:warehouse:orders", withDownstream="true")
    assert_column_graph(whole)
    assert graph_ids(whole) == {
        FIELD("orders", "id"),
        FIELD("orders", "amount"),
        FIELD("raw", "id"),
        FIELD("totals", "id"),
        FIELD("totals", "total"),
        FIELD("report", "total"),
    }


@pytest.mark.parametrize(
    ("params", "code", "named"),
    [
        ({"nodeId": "job:pipelines:nope"}, 404, "job:pipelines:nope"),
        ({"nodeId": "job:pipelines:notes"}, 404, "job:pipelines:notes"),  # a job without column lineage
        ({"nodeId": "job:pipelines:sum", "withDownstream": "true", "direction": "both"}, 400, "withDownstream=true"),
        ({"nodeId": "job:pipelines:sum", "withDownstream": "sometimes"}, 400, "withDownstream"),
        ({"nodeId": "run:pipelines:sum"}, 400, "run:pipelines:sum"),
        ({"nodeId": "job:pipelines:sum", "depth": -1}, 400, "depth"),
    ],
)
def test_unknown_and_bad_starts_answer_4xx_naming_them(
    columns: TestClient, params: dict, code: int, named: str
) -> None:
    answer = columns.get("/api/v1/column-lineage", params=params)
    assert answer.status_code == code, answer.text
    assert named in answer.json()["detail"]


def test_a_namespace_limited_key_walks_a_job_s_columns_only_in_its_namespaces(store_url: str) -> None:
    keys = (
        ApiKey("all", Access.ADMIN, "all-secret"),
        ApiKey("wh", Access.READ, "wh-secret", NamespaceScope(("warehouse", "pipelines"))),
        ApiKey("fin", Access.READ, "fin-secret", NamespaceScope(("finance",))),
    )
    app = create_app(store_url=store_url, keys=keys)
    everyone, limited, other = ({"X-API-Key": f"{k}-secret"} for k in ("all", "wh", "fin"))
    try:
        with TestClient(app) as client:
            event = run_event(
                "COMPLETE",
                "split",
                inputs=[dataset("src", fields=["id"]), dataset("ledger", "finance", fields=["id"])],
                outputs=[
                    dataset("dst", fields=["id"], columns={"id": [("warehouse", "src", "id")]}),
                    dataset("fin_dst", "finance", fields=["id"], columns={"id": [("finance", "ledger", "id")]}),
                ],
            )
            assert client.post("/api/v1/lineage", json=event, headers=everyone).status_code == 201
            every = _get(client, "/api/v1/column-lineage", everyone, nodeId="job:pipelines:split")
            assert_column_graph(every)
            assert graph_ids(every) == {
                FIELD("src", "id"),
                FIELD("dst", "id"),
                "datasetField:finance:ledger:id",
                "datasetField:finance:fin_dst:id",
            }
            seen = _get(client, "/api/v1/column-lineage", limited, nodeId="job:pipelines:split")
            assert_column_graph(seen)
            assert graph_ids(seen) == {FIELD("src", "id"), FIELD("dst", "id")}
            hidden = client.get("/api/v1/column-lineage", params={"nodeId": "job:pipelines:split"}, headers=other)
            missing = client.get("/api/v1/column-lineage", params={"nodeId": "job:pipelines:nope"}, headers=other)
            assert (hidden.status_code, missing.status_code) == (404, 404)  # a hidden job is a missing one
            assert hidden.json()["detail"].replace("split", "nope") == missing.json()["detail"]
    finally:
        app.state.store.dispose()
