"""Feast's OpenLineage consumer API, differentially: Feast 0.67's own consumer and this one, same events, same reads.

The same Airflow-shaped events (a DAG run and its tasks with inputs and outputs and ``parent`` facets, a failed
task, a second job namespace) are sent to ``feast serve_lineage`` (:mod:`support.feast_consumer`) and to this
consumer served by uvicorn, and every read of Feast's API under ``/api/v1/lineage/openlineage`` is asked of both
and compared field by field. Normalised, as documented in docs/consumer.md ("Feast's consumer API"): event ids
(Feast draws a random one, this consumer names an event by its content), the times each consumer records when
it receives or updates something (compared as set or not set; event times are compared exactly), JSON held in
text fields (compared decoded), and the order of rows Feast sorts by its receive time or not at all. Then the
batch ingest's answers (200, 204, 207), ``DELETE .../reset?namespace`` and unknown query parameters.
On SQLite and PostgreSQL stores.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_dataset,
    documentation_job,
    job_type_job,
    ownership_dataset,
    parent_run,
    schema_dataset,
)
from openlineage.client.serde import Serde
from support.consumer_helpers import at
from support.environment import unavailable
from support.feast_consumer import FeastLineageServer, FeastUnavailable
from support.olschema import assert_valid_event, shared_available
from support.uvicorn_thread import served

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

KEY = "feast-key"
HEADERS = {"X-API-Key": KEY}
API = "/api/v1/lineage/openlineage"
PRODUCER = "https://github.com/apache/airflow/tree/providers-openlineage/2.3.0"
AIRFLOW, REPORTING = "airflow_prod", "airflow_reporting"
WAREHOUSE, LAKE = "postgres://warehouse:5432", "s3://lake"
#: Times each consumer sets when it receives or updates a row: compared as set or not set.
RECEIVE_TIMES = ("updated_at", "created_at", "started_at", "ended_at", "oldest_ms")
#: JSON held as text: compared decoded.
JSON_TEXT = ("facets_json", "schema_json", "event_json")


def _uuid(n: int) -> str:
    return str(uuid.UUID(int=n, version=4))


DAG_RUN, EXTRACT, TRANSFORM, LOAD, REPORT = (_uuid(n) for n in range(1, 6))


def _json(event: RunEvent) -> dict[str, Any]:
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _dataset(kind: type, namespace: str, name: str, fields: tuple[str, ...] = (), **facets: Any) -> Any:
    if fields:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[schema_dataset.SchemaDatasetFacetFields(name=field, type="VARCHAR") for field in fields]
        )
    return kind(namespace=namespace, name=name, facets=facets)


def _task(
    state: str, run_id: str, task: str, time: float, inputs: tuple[Any, ...] = (), outputs: tuple[Any, ...] = ()
) -> dict[str, Any]:
    parent = parent_run.ParentRunFacet(
        run=parent_run.Run(runId=DAG_RUN),
        job=parent_run.Job(namespace=AIRFLOW, name="orders_daily"),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=DAG_RUN), job=parent_run.RootJob(namespace=AIRFLOW, name="orders_daily")
        ),
    )
    job_type = job_type_job.JobTypeJobFacet(processingType="BATCH", integration="AIRFLOW", jobType="TASK")
    return _json(
        RunEvent(
            eventType=RunState[state],
            eventTime=at(time),
            run=Run(runId=run_id, facets={"parent": parent}),
            job=Job(namespace=AIRFLOW, name=f"orders_daily.{task}", facets={"jobType": job_type}),
            producer=PRODUCER,
            inputs=list(inputs),
            outputs=list(outputs),
        )
    )


def _events() -> list[dict[str, Any]]:
    """A DAG run with three tasks (the last fails), and a report job in a second job namespace."""
    dag_job = {
        "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="AIRFLOW", jobType="DAG"),
        "documentation": documentation_job.DocumentationJobFacet(description="Orders, daily"),
    }
    orders = _dataset(InputDataset, WAREHOUSE, "public.orders", ("id", "amount"))
    raw = _dataset(OutputDataset, LAKE, "raw/orders", ("id", "amount"))
    curated = _dataset(
        OutputDataset,
        LAKE,
        "curated/orders",
        ("id", "amount", "day"),
        documentation=documentation_dataset.DocumentationDatasetFacet(description="Orders by day"),
        ownership=ownership_dataset.OwnershipDatasetFacet(
            owners=[ownership_dataset.Owner(name="team:analytics", type="TEAM")]
        ),
    )
    summary = _dataset(OutputDataset, WAREHOUSE, "public.orders_summary", ("day", "total"))

    def dag(state: str, time: float) -> dict[str, Any]:
        job = Job(namespace=AIRFLOW, name="orders_daily", facets=dag_job)
        return _json(RunEvent(eventType=RunState[state], eventTime=at(time), run=Run(runId=DAG_RUN), job=job,
                              producer=PRODUCER))  # fmt: skip

    def read(dataset: Any) -> Any:
        return InputDataset(namespace=dataset.namespace, name=dataset.name, facets=dataset.facets)

    report_job = Job(namespace=REPORTING, name="weekly_report")
    summed = column_lineage_dataset.Transformation(type="INDIRECT", subtype="AGGREGATION", description="sum")
    report_columns = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "total": column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(LAKE, "curated/orders", "amount", transformations=[summed]),
                    column_lineage_dataset.InputField(LAKE, "curated/orders", "day"),
                ]
            )
        }
    )
    report_output = _dataset(OutputDataset, REPORTING, "weekly.pdf", ("total",), columnLineage=report_columns)

    def report(state: str, time: float, outputs: list[Any]) -> dict[str, Any]:
        return _json(RunEvent(eventType=RunState[state], eventTime=at(time), run=Run(runId=REPORT), job=report_job,
                              producer=PRODUCER, inputs=[read(curated)], outputs=outputs))  # fmt: skip

    return [
        dag("START", 0),
        _task("START", EXTRACT, "extract", 10, (orders,)),
        _task("COMPLETE", EXTRACT, "extract", 20, (orders,), (raw,)),
        _task("START", TRANSFORM, "transform", 30, (read(raw),)),
        _task("COMPLETE", TRANSFORM, "transform", 40, (read(raw),), (curated,)),
        _task("START", LOAD, "load", 50, (read(curated),)),
        _task("FAIL", LOAD, "load", 60, (read(curated),), (summary,)),
        dag("FAIL", 70),
        report("START", 80, []),
        report("COMPLETE", 90, [report_output]),
    ]


class Consumer:
    """One of the two consumers, by base URL."""

    def __init__(self, name: str, url: str) -> None:
        self.name, self.url = name, url

    def call(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("headers", HEADERS)
        return requests.request(method, f"{self.url}{path}", timeout=30, **kwargs)

    def get(self, path: str) -> Any:
        answer = self.call("GET", f"{API}{path}")
        assert answer.status_code == 200, f"{self.name} GET {path}: {answer.status_code} {answer.text[:500]}"
        return answer.json()


@pytest.fixture
def feast(tmp_path: Path) -> Iterator[Consumer]:
    try:
        with FeastLineageServer(tmp_path / "feast", api_key=KEY) as server:
            yield Consumer("feast", server.url)
    except FeastUnavailable as error:
        unavailable(f"Feast's consumer is not available here: {error}")


@pytest.fixture
def ours(store_url: str) -> Iterator[Consumer]:
    keys = (ApiKey("feast-scripts", Access.ADMIN, KEY),)
    # Feast's consumer as configured by support.feast_consumer: no retention, checked every 6 hours (its default).
    app = create_app(store_url=store_url, keys=keys, batch_answers="feast", retention_check_interval_hours=6)
    with served(app) as url:
        yield Consumer("ours", url)
    app.state.store.dispose()


def _normal(value: Any) -> Any:
    """``value`` with receive times as set/not set, JSON text decoded and event ids left out."""
    if isinstance(value, list):
        return [_normal(item) for item in value]
    if not isinstance(value, dict):
        return value
    shown = {}
    for key, item in value.items():
        if key == "event_id":
            continue
        if key in RECEIVE_TIMES:
            shown[key] = item is not None
        elif key in JSON_TEXT and isinstance(item, str):
            shown[key] = json.loads(item)
        else:
            shown[key] = _normal(item)
    return shown


def _keyed(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """Rows in the order of ``keys`` (for rows Feast orders by its receive time, ties in no defined order)."""
    return sorted(_normal(rows), key=lambda row: tuple(str(row.get(key)) for key in keys))


def _newest_first(rows: list[dict[str, Any]]) -> None:
    times = [row["updated_at"] for row in rows]
    assert times == sorted(times, reverse=True), "rows are not most recently updated first"


def _edges(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(_normal(edges), key=lambda edge: json.dumps(edge, sort_keys=True))


def _differences(feast: Any, ours: Any, where: str = "") -> list[str]:
    """Where ``ours`` differs from ``feast``, path by path."""
    if isinstance(feast, dict) and isinstance(ours, dict):
        found = []
        for key in sorted(set(feast) | set(ours)):
            if key not in ours or key not in feast:
                found.append(f"{where}.{key}: only in {'feast' if key in feast else 'ours'}")
            else:
                found += _differences(feast[key], ours[key], f"{where}.{key}")
        return found
    if isinstance(feast, list) and isinstance(ours, list) and len(feast) == len(ours):
        pairs = enumerate(zip(feast, ours, strict=True))
        return [line for index, (one, other) in pairs for line in _differences(one, other, f"{where}[{index}]")]
    return [] if feast == ours else [f"{where}: feast {json.dumps(feast)[:400]} ours {json.dumps(ours)[:400]}"]


def _assert_same(feast: Any, ours: Any, what: str) -> None:
    assert ours == feast, f"{what} differs:\n" + "\n".join(_differences(feast, ours)[:40])


def _send(feast: Consumer, ours: Consumer, events: list[dict[str, Any]]) -> None:
    for consumer in (feast, ours):
        answer = consumer.call("POST", "/api/v1/lineage/batch", json=events)
        assert answer.status_code == 204, f"{consumer.name}: {answer.status_code} {answer.text[:500]}"


def test_every_feast_read_answers_as_feast_does(feast: Consumer, ours: Consumer) -> None:
    _send(feast, ours, _events())
    both = (feast, ours)

    namespaces = [c.get("/namespaces") for c in both]
    _assert_same(*namespaces, "namespaces")
    assert set(namespaces[1]["namespaces"]) == {AIRFLOW, REPORTING, WAREHOUSE, LAKE}

    jobs = [c.get("/jobs")["jobs"] for c in both]
    _newest_first(jobs[1])
    _assert_same(*(_keyed(rows, "job_namespace", "job_name") for rows in jobs), "jobs")
    assert len(jobs[1]) == 5

    datasets = [c.get("/datasets")["datasets"] for c in both]
    _newest_first(datasets[1])
    _assert_same(*(_keyed(rows, "dataset_namespace", "dataset_name") for rows in datasets), "datasets")
    assert len(datasets[1]) == 5

    for query in ("", "?limit=2", "?limit=2&offset=2", f"?job_namespace={AIRFLOW}", "?job_name=weekly_report",
                  f"?job_namespace={AIRFLOW}&job_name=orders_daily.load"):  # fmt: skip
        runs = [c.get(f"/runs{query}") for c in both]
        _newest_first(runs[1]["runs"])
        if "limit" in query:  # a page of rows in receive order: the same number, and every run once over pages
            assert [len(r["runs"]) for r in runs] == [2, 2] and [r["total"] for r in runs] == [2, 2], query
            continue
        _assert_same(*({**r, "runs": _keyed(r["runs"], "run_id")} for r in runs), f"runs{query}")
    states = {run["run_id"]: run["state"] for run in ours.get("/runs")["runs"]}
    assert states == {DAG_RUN: "FAIL", EXTRACT: "COMPLETE", TRANSFORM: "COMPLETE", LOAD: "FAIL", REPORT: "COMPLETE"}
    for run_id in (LOAD, REPORT):
        detail = [c.get(f"/runs/{run_id}") for c in both]
        for found in detail:  # run_io facets: Feast keeps each event's dataset facets, this store the dataset's
            for io in found["inputs"] + found["outputs"]:
                io.pop("facets")
        _assert_same(*(_normal(d) for d in detail), f"run {run_id}")

    for query in ("", "?limit=3", "?limit=3&offset=3", f"?namespace={REPORTING}", "?job_name=orders_daily.load",
                  f"?namespace={AIRFLOW}&job_name=orders_daily"):  # fmt: skip
        events = [_normal(c.get(f"/events{query}")) for c in both]  # newest event time first: order compared
        _assert_same(*events, f"events{query}")
    assert len(ours.get("/events")["events"]) == len(_events())

    for query in ("", f"?namespace={LAKE}", f"?namespace={AIRFLOW}"):
        graphs = [c.get(f"/graph{query}") for c in both]
        for graph in graphs:
            graph["nodes"] = sorted(_normal(graph["nodes"]), key=lambda n: (n["type"] != "dataset", n["namespace"],
                                                                              n["name"]))  # fmt: skip
            graph["edges"], graph["symlinks"] = _edges(graph["edges"]), _edges(graph["symlinks"])
        _assert_same(*graphs, f"graph{query}")
    kinds = {edge["edge_type"] for edge in ours.get("/graph")["edges"]}
    assert kinds == {"input", "output", "derived", "parent"}
    pages = [[c.get(f"/graph?limit=4&offset={o}") for o in (0, 4, 8)] for c in both]
    for page in range(3):  # datasets first, then jobs: the same kinds on each page
        _assert_same(*([n["type"] for n in p[page]["nodes"]] for p in pages), f"graph page {page}")
        _assert_same(*(p[page]["total_nodes"] for p in pages), "total_nodes")

    for path in (
        # Feast's route cannot address a namespace or name holding "/" (the path is decoded before routing).
        f"/graph/job/{AIRFLOW}/orders_daily.extract",
        f"/graph/job/{AIRFLOW}/orders_daily.extract?depth=1&direction=downstream",
        f"/graph/job/{AIRFLOW}/orders_daily?depth=2",
        f"/graph/job/{AIRFLOW}/orders_daily.transform?direction=upstream&depth=1",
        f"/graph/dataset/{REPORTING}/weekly.pdf?direction=upstream",
        f"/graph/dataset/{REPORTING}/nothing_here",
    ):
        found = [c.get(path) for c in both]
        for graph in found:
            graph["nodes"], graph["edges"] = _edges(graph["nodes"]), _edges(graph["edges"])
        _assert_same(*found, path)

    for path in (
        f"/datasets/{REPORTING}/weekly.pdf/versions",
        f"/datasets/{REPORTING}/weekly.pdf/versions?limit=1&offset=1",
        f"/datasets/{REPORTING}/nothing_here/versions",
        f"/datasets/{REPORTING}/weekly.pdf/columns",
        f"/datasets/{REPORTING}/weekly.pdf/columns?direction=downstream",
        f"/runs/{EXTRACT}/tree",
        f"/runs/{DAG_RUN}/tree",
        f"/runs/{REPORT}/tree",
    ):
        found = [c.get(path) for c in both]
        for answer in found:
            for version in answer.get("versions", ()):
                version.pop("version_id")  # each consumer's own row id
            for link in answer.get("column_lineage", ()):
                assert link.pop("run_id") is not None or answer is found[1]  # not kept per link here
            if "runs" in answer:  # earliest started first; Feast's receive times tie within a millisecond
                answer["runs"] = _keyed(answer["runs"], "run_id")
            if "column_lineage" in answer:
                answer["column_lineage"] = _edges(answer["column_lineage"])
        _assert_same(*(_normal(answer) for answer in found), path)
    assert ours.get(f"/datasets/{REPORTING}/weekly.pdf/versions")["total"] == 1
    assert len(ours.get(f"/datasets/{REPORTING}/weekly.pdf/columns")["column_lineage"]) == 2
    assert len(ours.get(f"/runs/{EXTRACT}/tree")["runs"]) == 4
    curated_versions = f"/datasets/{LAKE.replace('/', '%2F')}/curated%2Forders/versions"
    assert [v["created_by_run_id"] for v in ours.get(curated_versions)["versions"]] == [TRANSFORM]

    # A namespace or name holding "/", percent-encoded: Feast's route cannot address it, this one can.
    curated = f"/graph/dataset/{LAKE.replace('/', '%2F')}/curated%2Forders?depth=1&direction=upstream"
    assert feast.call("GET", f"{API}{curated}").status_code == 404
    reached = {(node["type"], node["namespace"], node["name"]) for node in ours.get(curated)["nodes"]}
    assert reached == {
        ("dataset", LAKE, "curated/orders"),
        ("job", AIRFLOW, "orders_daily.transform"),
        ("dataset", LAKE, "raw/orders"),
        ("job", AIRFLOW, "orders_daily"),
        ("job", AIRFLOW, "orders_daily.extract"),
        ("dataset", WAREHOUSE, "public.orders"),
    }

    retention = [c.get("/retention") for c in both]
    _assert_same(*(_normal(r) for r in retention), "retention")
    assert retention[1]["storage"]["events"]["count"] == len(_events())
    pruned = [c.call("POST", f"{API}/retention/prune") for c in both]
    _assert_same(*([a.status_code, a.json()] for a in pruned), "prune with retention off")


def test_feast_batch_ingest_answers_and_reset(feast: Consumer, ours: Consumer) -> None:
    events = _events()
    both = (feast, ours)
    for consumer in both:
        whole = consumer.call("POST", "/api/v1/lineage/batch", json=events[:4])
        assert (whole.status_code, whole.content) == (204, b""), consumer.name
        partial = consumer.call("POST", "/api/v1/lineage/batch", json=[events[4], 5])
        assert partial.status_code == 200, consumer.name
        assert partial.json()["status"] == "partial_success", consumer.name
        assert partial.json()["summary"] == {"received": 2, "successful": 1, "failed": 1}, consumer.name
        mixed = consumer.call("POST", "/api/v1/lineage", json=[events[5], "not an event"])
        assert mixed.status_code == 207, consumer.name
        assert mixed.json()["status"] == "partial_success", consumer.name
        assert mixed.json()["summary"] == {"received": 2, "successful": 1, "failed": 1}, consumer.name
        single = consumer.call("POST", "/api/v1/lineage", json=events[6])
        assert single.status_code == 201, consumer.name
        array = consumer.call("POST", "/api/v1/lineage", json=events[7:])
        assert array.status_code == 200, consumer.name
        assert array.json()["status"] == "success", consumer.name
        assert array.json()["summary"] == {"received": 3, "successful": 3, "failed": 0}, consumer.name
        refused = consumer.call("POST", "/api/v1/lineage/batch", json=events[:1], headers={"X-API-Key": "wrong"})
        assert refused.status_code == 401, consumer.name
        bearer = consumer.call("DELETE", f"{API}/reset?namespace=nowhere", headers={"Authorization": f"Bearer {KEY}"})
        purged = {"status": "success", "message": "Purged namespace: nowhere"}
        assert (bearer.status_code, bearer.json()) == (200, purged), consumer.name
    _assert_same(*(_keyed(c.get("/jobs")["jobs"], "job_namespace", "job_name") for c in both), "jobs")

    reset = [c.call("DELETE", f"{API}/reset?namespace={REPORTING}") for c in both]
    _assert_same(*([a.status_code, a.json()] for a in reset), "reset of a namespace")
    _assert_same(*(c.get("/namespaces") for c in both), "namespaces after the reset")
    _assert_same(*(_keyed(c.get("/jobs")["jobs"], "job_namespace", "job_name") for c in both), "jobs after the reset")
    assert REPORTING not in {job["job_namespace"] for job in ours.get("/jobs")["jobs"]}

    unknown = [c.call("GET", f"{API}/jobs?namespace_contains=x") for c in both]
    assert unknown[0].status_code == 200, "Feast ignores a parameter it does not take"
    assert unknown[1].status_code == 400 and "namespace_contains" in unknown[1].text, "this consumer names it"
    bad_type = [c.call("GET", f"{API}/graph/table/{AIRFLOW}/x") for c in both]
    assert [a.status_code for a in bad_type] == [400, 400]

    everything = [c.call("DELETE", f"{API}/reset") for c in both]
    _assert_same(*([a.status_code, a.json()] for a in everything), "reset of everything")
    for consumer in both:
        assert consumer.get("/jobs") == {"jobs": []} and consumer.get("/namespaces") == {"namespaces": []}


LIMITED = {"X-API-Key": "limited-admin-key"}


@pytest.fixture
def limited(store_url: str) -> Iterator[TestClient]:
    """This consumer alone, with an admin key limited to the DAG's namespaces (not the report's)."""
    keys = (
        ApiKey("feast-scripts", Access.ADMIN, KEY),
        ApiKey("limited", Access.ADMIN, LIMITED["X-API-Key"], NamespaceScope((AIRFLOW, LAKE, WAREHOUSE))),
    )
    app = create_app(store_url=store_url, keys=keys)
    with TestClient(app) as client:
        assert client.post("/api/v1/lineage/batch", json=_events(), headers=HEADERS).status_code == 200
        yield client
    app.state.store.dispose()


def test_a_key_limited_to_namespaces_reads_and_resets_only_its_own(limited: TestClient) -> None:
    jobs = limited.get(f"{API}/jobs", headers=LIMITED).json()["jobs"]
    assert {job["job_namespace"] for job in jobs} == {AIRFLOW}
    edges = limited.get(f"{API}/graph", headers=LIMITED).json()["edges"]
    assert edges and REPORTING not in {e["source_namespace"] for e in edges} | {e["target_namespace"] for e in edges}
    assert limited.get(f"{API}/graph/job/{REPORTING}/weekly_report", headers=LIMITED).status_code == 404
    assert limited.get(f"{API}/graph/job/{AIRFLOW}/not_a_job", headers=LIMITED).status_code == 404
    assert limited.get(f"{API}/runs/{REPORT}", headers=LIMITED).status_code == 404
    assert limited.get(f"{API}/datasets/{REPORTING}/weekly.pdf/versions", headers=LIMITED).json() == {
        "versions": [],
        "total": 0,
    }
    assert limited.get(f"{API}/retention", headers=LIMITED).status_code == 403  # counts the whole store
    assert limited.delete(f"{API}/reset", headers=LIMITED).status_code == 403  # never the whole store
    assert limited.delete(f"{API}/reset?namespace={REPORTING}", headers=LIMITED).status_code == 404
    # The lake is shared with the report job in a namespace this key cannot see: nothing is removed.
    assert limited.delete(f"{API}/reset?namespace={LAKE}", headers=LIMITED).status_code == 409
    assert len(limited.get(f"{API}/jobs", headers=HEADERS).json()["jobs"]) == 5
    assert limited.get(f"{API}/jobs", headers={"Authorization": "Bearer limited-admin-key"}).status_code == 200
    assert limited.get(f"{API}/jobs").status_code == 401


def test_batch_answers_is_summary_or_feast(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_answers"):
        create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", api_key="k", batch_answers="marquez")
