"""Job and dataset types in Marquez's words come from what the events say."""

from __future__ import annotations

import pytest

from airflow_lineage_provider.consumer.store.graph.node_types import dataset_type, job_kind, job_type


@pytest.mark.parametrize(
    ("facets", "expected"),
    [
        (None, "BATCH"),
        ({"jobType": {"processingType": "STREAMING", "integration": "FLINK", "jobType": "JOB"}}, "STREAM"),
        ({"jobType": {"processingType": "BATCH", "integration": "AIRFLOW", "jobType": "TASK"}}, "BATCH"),
        ({"jobType": "not an object"}, "BATCH"),
    ],
)
def test_job_type(facets: dict | None, expected: str) -> None:
    assert job_type(facets) == expected


@pytest.mark.parametrize(
    ("facets", "namespace", "expected"),
    [
        (None, "postgres://db:5432", "DB_TABLE"),
        ({"datasetType": {"datasetType": "TOPIC"}}, "postgres://db", "STREAM"),
        ({"datasetType": {"datasetType": "view"}}, "kafka://broker", "DB_TABLE"),  # what the event says wins
        ({"dataSource": {"name": "k", "uri": "kafka://broker:9092"}}, "x", "STREAM"),
        ({}, "kafka://broker:9092", "STREAM"),
    ],
)
def test_dataset_type(facets: dict | None, namespace: str, expected: str) -> None:
    assert dataset_type(facets, namespace) == expected


def test_job_kind() -> None:
    assert job_kind({"jobType": {"processingType": "BATCH", "jobType": "DAG"}}) == "DAG"
    assert job_kind({}) is None
