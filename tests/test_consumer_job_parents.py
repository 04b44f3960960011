"""Graph answers tell the job containing a job (``data.parentJob``) and the Airflow task instance a job is
(``data.airflowTask``), on SQLite and PostgreSQL (docs/consumer.md#the-graph, docs/ui.md#tasks-and-their-jobs).

The store holds an Airflow task's run as the stock provider emits it and two ``lineage_run`` jobs inside it, as
``lineage_run`` emits them (:mod:`support.task_jobs`): the walk and the graph listing name the task as their
parent, with its task instance; a parent run never received is named by the child's ``parent`` facet; a key
limited to namespaces is not told a parent in a namespace it cannot see. A mapped task's instances
(:func:`support.task_jobs.mapped_task_events`) carry their map index, as Airflow's UI addresses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.task_jobs import (
    AGGREGATE_NODE,
    AIRFLOW,
    COPY_NODE,
    DAG_ID,
    JOIN_NODE,
    LAKE,
    LOADER,
    MAPPED_COPY_NODE,
    MAPPED_TASK,
    MAPPED_TASK_ID,
    MAPPED_TASK_NODE,
    ORPHAN_NODE,
    ORPHAN_PARENT,
    RUN_ID,
    TASK,
    TASK_ID,
    TASK_NODE,
    WAREHOUSE,
    mapped_task_events,
    task_job_events,
)

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

ADMIN = {"X-API-Key": "admin-secret"}
LIMITED = {"X-API-Key": "limited-secret"}
KEYS = (
    ApiKey("operator", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("limited", Access.READ, LIMITED["X-API-Key"], NamespaceScope((AIRFLOW, WAREHOUSE))),
)
TASK_INSTANCE = {"dagId": DAG_ID, "taskId": TASK_ID, "runId": RUN_ID}
THE_TASK = {"namespace": AIRFLOW, "name": TASK, "airflowTask": TASK_INSTANCE}


@pytest.fixture
def consumer(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        for event in [*task_job_events(), *mapped_task_events()]:
            answer = client.post("/api/v1/lineage", json=event, headers=ADMIN)
            assert answer.status_code in (200, 201), answer.text
        yield client
    app.state.store.dispose()


def _walk(client: TestClient, node: str, headers: dict[str, str] = ADMIN) -> dict[str, dict[str, Any]]:
    answer = client.get("/api/v1/lineage", params={"nodeId": node, "depth": 3}, headers=headers)
    assert answer.status_code == 200, answer.text
    return {item["id"]: item["data"] for item in answer.json()["graph"]}


def _listing(client: TestClient, headers: dict[str, str] = ADMIN) -> dict[str, dict[str, Any]]:
    answer = client.get("/api/v1/graph", params={"limit": 100}, headers=headers)
    assert answer.status_code == 200, answer.text
    return {item["id"]: item["data"] for item in answer.json()["nodes"]}


def test_lineage_run_jobs_name_the_task_containing_them(consumer: TestClient) -> None:
    graph = _walk(consumer, JOIN_NODE)
    assert graph[JOIN_NODE]["parentJob"] == graph[AGGREGATE_NODE]["parentJob"] == THE_TASK
    assert "airflowTask" not in graph[JOIN_NODE]


def test_the_graph_listing_names_containing_jobs_too(consumer: TestClient) -> None:
    nodes = _listing(consumer)
    assert nodes[JOIN_NODE]["parentJob"] == nodes[AGGREGATE_NODE]["parentJob"] == THE_TASK
    assert nodes[COPY_NODE]["parentJob"] == {"namespace": LAKE, "name": LOADER}


def test_the_task_names_its_airflow_task_instance_and_its_dag(consumer: TestClient) -> None:
    task = _listing(consumer)[TASK_NODE]
    assert task["airflowTask"] == TASK_INSTANCE
    # The DAG run was never received: its job is the one the task run's parent facet names.
    assert task["parentJob"] == {"namespace": AIRFLOW, "name": DAG_ID}


def test_a_parent_run_never_received_is_named_by_the_parent_facet(consumer: TestClient) -> None:
    assert _walk(consumer, ORPHAN_NODE)[ORPHAN_NODE]["parentJob"] == {"namespace": AIRFLOW, "name": ORPHAN_PARENT}


def test_jobs_without_a_parent_run_and_datasets_name_none(consumer: TestClient) -> None:
    nodes = _listing(consumer)
    loader = nodes[f"job:{LAKE}:{LOADER}"]
    assert "parentJob" not in loader and "airflowTask" not in loader
    assert not any("parentJob" in data for node, data in nodes.items() if node.startswith("dataset:"))


def test_a_limited_key_is_not_told_a_parent_it_cannot_see(consumer: TestClient) -> None:
    assert _walk(consumer, COPY_NODE)[COPY_NODE]["parentJob"] == {"namespace": LAKE, "name": LOADER}
    walked = _walk(consumer, COPY_NODE, LIMITED)[COPY_NODE]
    listed = _listing(consumer, LIMITED)
    assert "parentJob" not in walked and "parentJob" not in listed[COPY_NODE]
    assert LAKE not in str(walked) and LAKE not in str(listed)
    assert listed[JOIN_NODE]["parentJob"] == THE_TASK  # a visible parent still is


def _instance(map_index: int) -> dict[str, Any]:
    return {"dagId": DAG_ID, "taskId": MAPPED_TASK_ID, "runId": RUN_ID, "mapIndex": map_index}


def test_a_mapped_task_names_the_instance_of_its_latest_run_by_map_index(consumer: TestClient) -> None:
    assert _listing(consumer)[MAPPED_TASK_NODE]["airflowTask"] == _instance(1)
    assert _walk(consumer, MAPPED_TASK_NODE)[MAPPED_TASK_NODE]["airflowTask"] == _instance(1)


def test_a_job_inside_a_mapped_task_names_the_instance_it_ran_in(consumer: TestClient) -> None:
    """Its parent run's instance (map index 0, kept though falsy), not the task's latest one."""
    expected = {"namespace": AIRFLOW, "name": MAPPED_TASK, "airflowTask": _instance(0)}
    assert _walk(consumer, MAPPED_COPY_NODE)[MAPPED_COPY_NODE]["parentJob"] == expected
    assert _listing(consumer)[MAPPED_COPY_NODE]["parentJob"] == expected
    # A task not mapped names no map index.
    assert "mapIndex" not in _listing(consumer)[TASK_NODE]["airflowTask"]
