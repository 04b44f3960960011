"""Marquez's own Python client (``marquez-python``) against a real ``airflow-lineage serve``, SQLite and PostgreSQL.

As a user moving from Marquez would: events go in through openlineage-python's HTTP transport with the
write key, then every read method of ``marquez_client.MarquezClient`` is called with the read key, and the
tag writes it offers with the write key. The answers are checked value by value.

The store: job ``etl.load/orders`` in namespace ``pipelines`` with two runs, the first COMPLETED (a nominal
time, jobType BATCH, sourceCodeLocation, documentation), the second FAILED with an errorMessage facet. Both
read ``public.orders`` and write ``public.order_totals`` in namespace ``postgres://db:5432`` (a URI: the
client percent-encodes it in paths), both with a schema facet, the output with column lineage
(``total`` <- ``orders.amount``, ``customer_id`` <- ``orders.customer_id``).

``MarquezClient(api_key=...)`` writes the ``Authorization: Bearer`` header into a dict shared by every client
of the process (``marquez_client.client._HEADERS``): the last client made decides the key of all. Each
call here therefore goes through a client made just before it, with the key that call is meant to use.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import marquez_client.client as marquez_module
import pytest
import requests
from marquez_client import MarquezClient
from marquez_client.errors import APIError
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_job,
    error_message_run,
    job_type_job,
    nominal_time_run,
    schema_dataset,
    source_code_location_job,
)
from openlineage.client.transport.http import HttpConfig, HttpTransport
from support.environment import postgres_schema_url
from support.served import Served, serve_consumer

READ_KEY, WRITE_KEY = "marquez-client-read-k3y", "marquez-client-write-k3y"
JOB_NS, JOB = "pipelines", "etl.load/orders"
DB = "postgres://db:5432"
SOURCE, TARGET = "public.orders", "public.order_totals"
COMPLETED_RUN, FAILED_RUN = str(uuid.uuid4()), str(uuid.uuid4())
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PRODUCER = "https://github.com/acme/airflow-lineage-provider/tests"
LOCATION = "https://git.example/etl/load_orders.py"


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _schema(*names: str) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=name, type="VARCHAR") for name in names]
    )


def _column_lineage() -> column_lineage_dataset.ColumnLineageDatasetFacet:
    def sourced(field: str) -> column_lineage_dataset.Fields:
        return column_lineage_dataset.Fields(
            inputFields=[column_lineage_dataset.InputField(namespace=DB, name=SOURCE, field=field)],
            transformationDescription="",
            transformationType="IDENTITY",
        )

    return column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={"total": sourced("amount"), "customer_id": sourced("customer_id")}
    )


def _event(state: RunState, run_id: str, seconds: float, run_facets: dict[str, Any]) -> RunEvent:
    job_facets = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="AIRFLOW", jobType="TASK"),
        "sourceCodeLocation": source_code_location_job.SourceCodeLocationJobFacet(type="git", url=LOCATION),
        "documentation": documentation_job.DocumentationJobFacet(description="Totals the orders per customer."),
    }
    return RunEvent(
        eventType=state,
        eventTime=_at(seconds),
        run=Run(runId=run_id, facets=run_facets),
        job=Job(namespace=JOB_NS, name=JOB, facets=job_facets),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=DB, name=SOURCE, facets={"schema": _schema("id", "customer_id", "amount")})],
        outputs=[
            OutputDataset(
                namespace=DB,
                name=TARGET,
                facets={"schema": _schema("customer_id", "total"), "columnLineage": _column_lineage()},
            )
        ],
    )


def _events() -> list[RunEvent]:
    nominal = nominal_time_run.NominalTimeRunFacet(nominalStartTime=_at(-3600), nominalEndTime=_at(0))
    error = error_message_run.ErrorMessageRunFacet(
        message="division by zero", programmingLanguage="python", stackTrace="Traceback: ZeroDivisionError"
    )
    return [
        _event(RunState.START, COMPLETED_RUN, 0, {"nominalTime": nominal}),
        _event(RunState.COMPLETE, COMPLETED_RUN, 60, {}),
        _event(RunState.START, FAILED_RUN, 100, {}),
        _event(RunState.FAIL, FAILED_RUN, 130, {"errorMessage": error}),
    ]


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``airflow-lineage serve`` with a read and a write key, on SQLite or PostgreSQL, holding :func:`_events`.

    One server per store for the module: only the tag test writes, and no other test reads tags.
    """
    tmp_path = tmp_path_factory.mktemp(f"marquez-client-{request.param}")
    keys = ("--key", f"reader:read:{READ_KEY}", "--key", f"producer:write:{WRITE_KEY}")
    if request.param == "sqlite":
        with serve_consumer(f"sqlite:///{tmp_path / 'lineage.db'}", tmp_path, *keys) as server:
            _emit(server.url)
            yield server
        return
    with postgres_schema_url() as store, serve_consumer(store, tmp_path, *keys) as server:
        _emit(server.url)
        yield server


def _emit(url: str) -> None:
    """Send :func:`_events` with openlineage-python's HTTP transport and the write key, as a producer does."""
    config = HttpConfig.from_dict(
        {"url": url, "endpoint": "api/v1/lineage", "auth": {"type": "api_key", "apiKey": WRITE_KEY}}
    )
    producer = OpenLineageClient(transport=HttpTransport(config))
    for event in _events():
        producer.emit(event)
    producer.transport.close()  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _forget_the_clients_key() -> Iterator[None]:
    """The client keeps its key in a module-level dict: leave it as found for the other tests."""
    before = dict(marquez_module._HEADERS)
    yield
    marquez_module._HEADERS.clear()
    marquez_module._HEADERS.update(before)


def reader(served: Served) -> MarquezClient:
    """A client sending the read key (made right before its calls, see the module docstring)."""
    return MarquezClient(served.url, api_key=READ_KEY)


def writer(served: Served) -> MarquezClient:
    """A client sending the write key."""
    return MarquezClient(served.url, api_key=WRITE_KEY)


def _status(error: APIError) -> int:
    cause = error.__cause__
    assert isinstance(cause, requests.HTTPError) and cause.response is not None
    return cause.response.status_code


def _job_checks(job: dict[str, Any]) -> None:
    assert job["id"] == {"namespace": JOB_NS, "name": JOB}
    assert job["type"] == "BATCH"
    assert job["location"] == LOCATION
    assert job["description"] == "Totals the orders per customer."
    assert job["inputs"] == [{"namespace": DB, "name": SOURCE}]
    assert job["outputs"] == [{"namespace": DB, "name": TARGET}]
    assert job["latestRun"]["id"] == FAILED_RUN and job["latestRun"]["state"] == "FAILED"
    assert [run["state"] for run in job["latestRuns"]] == ["FAILED", "COMPLETED"]
    assert job["currentVersion"] == job["latestRun"]["jobVersion"]["version"]


def test_namespaces(served: Served) -> None:
    listed = reader(served).list_namespaces()
    assert {ns["name"] for ns in listed["namespaces"]} == {JOB_NS, DB}
    one = reader(served).get_namespace(DB)
    assert one["name"] == DB
    with pytest.raises(APIError) as unknown:
        reader(served).get_namespace("no-such-namespace")
    assert _status(unknown.value) == 404


def test_jobs(served: Served) -> None:
    listed = reader(served).list_jobs(JOB_NS)
    assert listed["totalCount"] == 1
    assert [job["name"] for job in listed["jobs"]] == [JOB]
    _job_checks(listed["jobs"][0])
    job = reader(served).get_job(JOB_NS, JOB)
    _job_checks(job)
    assert job == listed["jobs"][0]
    assert reader(served).list_jobs(DB)["totalCount"] == 0


def test_runs(served: Served) -> None:
    runs = reader(served).list_job_runs(JOB_NS, JOB)
    assert runs["totalCount"] == 2
    failed, completed = runs["runs"]
    assert (failed["id"], failed["state"], failed["durationMs"]) == (FAILED_RUN, "FAILED", 30_000)
    assert (completed["id"], completed["state"], completed["durationMs"]) == (COMPLETED_RUN, "COMPLETED", 60_000)
    assert failed["facets"]["errorMessage"]["message"] == "division by zero"
    assert completed["nominalStartTime"] == "2026-03-01T11:00:00.000000Z"
    assert completed["nominalEndTime"] == "2026-03-01T12:00:00.000000Z"
    one = reader(served).get_job_run(FAILED_RUN)
    assert one == failed
    assert one["startedAt"] == "2026-03-01T12:01:40.000000Z" and one["endedAt"] == "2026-03-01T12:02:10.000000Z"
    with pytest.raises(APIError) as unknown:
        reader(served).get_job_run(str(uuid.uuid4()))
    assert _status(unknown.value) == 404


def test_datasets_and_versions(served: Served) -> None:
    listed = reader(served).list_datasets(DB)
    assert listed["totalCount"] == 2
    assert [d["name"] for d in listed["datasets"]] == [TARGET, SOURCE]  # by name: "_" sorts before "s"
    target = reader(served).get_dataset(DB, TARGET)
    assert target["id"] == {"namespace": DB, "name": TARGET}
    assert [field["name"] for field in target["fields"]] == ["customer_id", "total"]
    assert target["namespace"] == DB and target["sourceName"] == DB
    versions = reader(served).list_dataset_versions(DB, TARGET)
    assert versions["totalCount"] == 2  # one per run that wrote it
    assert {v["createdByRun"]["id"] for v in versions["versions"]} == {COMPLETED_RUN, FAILED_RUN}
    newest = versions["versions"][0]
    assert [field["name"] for field in newest["fields"]] == ["customer_id", "total"]
    one = reader(served).get_dataset_version(DB, TARGET, newest["version"])
    assert one["version"] == newest["version"] and one["createdByRun"]["id"] == newest["createdByRun"]["id"]


def _column_nodes(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["id"]: node for node in graph["graph"]}


def test_column_lineage(served: Served) -> None:
    total = f"datasetField:{DB}:{TARGET}:total"
    amount = f"datasetField:{DB}:{SOURCE}:amount"
    by_dataset = _column_nodes(reader(served).get_column_lineage_by_dataset(DB, TARGET))
    assert {total, amount, f"datasetField:{DB}:{TARGET}:customer_id"} <= set(by_dataset)
    assert [(f["namespace"], f["dataset"], f["field"]) for f in by_dataset[total]["data"]["inputFields"]] == [
        (DB, SOURCE, "amount")
    ]
    by_field = _column_nodes(reader(served).get_column_lineage_by_dataset_field(DB, TARGET, "total"))
    assert set(by_field) == {total, amount}
    by_job = _column_nodes(reader(served).get_column_lineage_by_job(JOB_NS, JOB))
    assert {total, amount} <= set(by_job)


def test_sources(served: Served) -> None:
    listed = reader(served).list_sources()
    assert DB in {source["name"] for source in listed["sources"]}
    source = reader(served).get_source(DB)
    assert source["name"] == DB and source["connectionUrl"] == DB


def test_events(served: Served) -> None:
    events = reader(served).list_events()  # GET /api/v1/events
    assert events["totalCount"] == 4
    assert {e["run"]["runId"] for e in events["events"]} == {COMPLETED_RUN, FAILED_RUN}


def test_events_of_a_namespace(served: Served) -> None:
    """``list_events(namespace=...)`` asks ``GET /api/v1/events/{namespace}`` (not encoded by the client)."""
    by_namespace = reader(served).list_events(namespace=JOB_NS)
    assert by_namespace["totalCount"] == 4


def test_tags_written_with_the_write_key_and_read_back(served: Served) -> None:
    with pytest.raises(APIError) as refused:
        reader(served).create_tag("pii", description="personal data")
    assert _status(refused.value) == 403
    created = writer(served).create_tag("pii", description="personal data")
    assert created == {"name": "pii", "description": "personal data"}
    tagged = writer(served).tag_dataset(DB, TARGET, "pii")
    assert tagged["id"] == {"namespace": DB, "name": TARGET} and "pii" in tagged["tags"]
    field = writer(served).tag_dataset_field(DB, TARGET, "customer_id", "pii")  # a field's tags: upper case, as Marquez
    assert {f["name"]: f["tags"] for f in field["fields"]}["customer_id"] == ["PII"]
    tags = {tag["name"]: tag.get("description") for tag in reader(served).list_tags()["tags"]}
    assert tags["pii"] == "personal data" and "PII" in tags
    dataset = reader(served).get_dataset(DB, TARGET)
    assert dataset["tags"] == ["pii"]
    assert {f["name"]: f["tags"] for f in dataset["fields"]} == {"customer_id": ["PII"], "total": []}
