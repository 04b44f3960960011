"""What a graph answer shows of each node when many cards are built at once: datasets sharing one stored schema
each show it without its nulls, types come from each node's own facets or namespace, and the answers are the
same whichever way the cards were read (along with the walk, after it, or with the cache off) — on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import dataset_type_dataset, job_type_job, schema_dataset
from openlineage.client.serde import Serde
from support.consumer_helpers import PRODUCER, at
from support.olschema import assert_valid_event, shared_available

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access

pytest_plugins = ("support.consumer_fixtures",)

KAFKA = "kafka://broker:9092"


def _schema(*names: str) -> schema_dataset.SchemaDatasetFacet:
    # openlineage-python writes "description": null for each field: the stored schema holds nulls.
    fields = [schema_dataset.SchemaDatasetFacetFields(name=name, type="VARCHAR") for name in names]
    return schema_dataset.SchemaDatasetFacet(fields=fields)


def _event(job: str, inputs: list[Any], outputs: list[Any], job_facets: dict[str, Any] | None = None) -> dict[str, Any]:
    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=at(60),
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace="pipelines", name=job, facets=job_facets or {}),
        producer=PRODUCER,
        inputs=inputs,
        outputs=outputs,
    )
    data: dict[str, Any] = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _events() -> list[dict[str, Any]]:
    shared = _schema("id", "amount")
    streaming = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="STREAMING", integration="FLINK", jobType="JOB")
    }
    topic = {"datasetType": dataset_type_dataset.DatasetTypeDatasetFacet(datasetType="TOPIC")}
    outputs = [
        OutputDataset(namespace="warehouse", name="orders_a", facets={"schema": shared}),
        OutputDataset(namespace="warehouse", name="orders_b", facets={"schema": shared}),
        OutputDataset(namespace="warehouse", name="orders_c", facets={"schema": _schema("id")}),
        OutputDataset(namespace=KAFKA, name="events", facets={"schema": _schema("id")}),
        OutputDataset(namespace="warehouse", name="clicks", facets=topic),
        OutputDataset(namespace="warehouse", name="plain"),
    ]
    sources = [InputDataset(namespace="warehouse", name=name) for name in ("orders_a", "orders_b", "events", "clicks")]
    return [
        _event("load", [], outputs, streaming),
        _event("report", sources, [OutputDataset(namespace="warehouse", name="report")]),
    ]


def _graph(client: TestClient, node: str, depth: int) -> dict[str, Any]:
    params = {"nodeId": node, "depth": depth, "direction": "both"}
    response = client.get("/api/v1/lineage", params=params)
    assert response.status_code == 200, response.text
    return {item["id"]: item for item in response.json()["graph"]}


def test_cards_built_together_show_each_nodes_own_schema_and_type(store_url: str) -> None:
    answers = []
    for cache in (100_000, 0):
        app = create_app(store_url=store_url, anonymous=Access.ADMIN, graph_cache_nodes=cache)
        try:
            with TestClient(app) as client:
                if cache:  # loaded once, read by both apps
                    for event in _events():
                        assert client.post("/api/v1/lineage", json=event).status_code == 201
                # A small walk twice (its cards then all found), so the big one reads versions first and the
                # missing cards after; with the cache off every card comes with the walk.
                for _ in range(2):
                    _graph(client, "dataset:warehouse:report", 0)
                answers.append(_graph(client, "job:pipelines:load", 3))
                answers.append(_graph(client, "job:pipelines:load", 3))
        finally:
            app.state.store.dispose()

    graph = answers[0]
    assert all(answer == graph for answer in answers[1:])
    two_columns = [{"name": "id", "type": "VARCHAR", "tags": []}, {"name": "amount", "type": "VARCHAR", "tags": []}]
    assert graph["dataset:warehouse:orders_a"]["data"]["fields"] == two_columns
    assert graph["dataset:warehouse:orders_b"]["data"]["fields"] == two_columns
    assert graph["dataset:warehouse:orders_c"]["data"]["fields"] == two_columns[:1]
    assert graph[f"dataset:{KAFKA}:events"]["data"]["fields"] == two_columns[:1]
    assert graph["dataset:warehouse:plain"]["data"]["fields"] == []
    types = {node: item["data"]["type"] for node, item in graph.items()}
    assert types == {
        "job:pipelines:load": "STREAM",
        "job:pipelines:report": "BATCH",
        "dataset:warehouse:orders_a": "DB_TABLE",
        "dataset:warehouse:orders_b": "DB_TABLE",
        "dataset:warehouse:orders_c": "DB_TABLE",
        f"dataset:{KAFKA}:events": "STREAM",
        "dataset:warehouse:clicks": "STREAM",
        "dataset:warehouse:plain": "DB_TABLE",
        "dataset:warehouse:report": "DB_TABLE",
    }
