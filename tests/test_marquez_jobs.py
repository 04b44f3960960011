"""Marquez's namespace, job and run reads over the real app and stores (SQLite and PostgreSQL).

The store: job ``etl.load/orders`` in namespace ``postgres://db:5432`` (both need percent-encoding in a path)
with two runs — the first COMPLETED (nominal time, jobType STREAMING, sourceCodeLocation v1, documentation),
the second FAILED (an errorMessage, sourceCodeLocation v2: a second job version) — and job ``other`` in
``pipelines`` with one RUNNING run. Every answer is checked against Marquez's OpenAPI component schemas.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import PRODUCER, at, dataset, run_event
from support.marquez_spec import assert_marquez

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store.graph import nodes
from airflow_lineage_provider.consumer.store.write.namespaces import UPDATED_PRECISION

pytest_plugins = ("support.consumer_fixtures",)

NS, JOB = "postgres://db:5432", "etl.load/orders"
JOB_PATH = f"/api/v1/namespaces/{quote(NS, safe='')}/jobs/{quote(JOB, safe='')}"
FIRST, SECOND, RUNNING = (str(uuid.uuid4()) for _ in range(3))
SPEC = "https://openlineage.io/spec/facets/1-0-0/{}.json#/$defs/{}"


def _facet(name: str, **members: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": SPEC.format(name, name), **members}


def _job_facets(location: str) -> dict[str, Any]:
    return {
        "jobType": _facet("JobTypeJobFacet", processingType="STREAMING", integration="SPARK", jobType="JOB"),
        "sourceCodeLocation": _facet("SourceCodeLocationJobFacet", type="git", url=location),
        "documentation": _facet("DocumentationJobFacet", description="Loads the orders."),
    }


def _event(kind: str, run_id: str, time: float, location: str, **run_facets: Any) -> dict[str, Any]:
    event = run_event(
        kind,
        JOB,
        run_id,
        time=time,
        inputs=[dataset("public.src", namespace=NS)],
        outputs=[dataset("public.dst", namespace=NS)],
        namespace=NS,
    )
    event["job"]["facets"] = _job_facets(location)
    event["run"]["facets"] = run_facets
    return event


def _events() -> list[dict[str, Any]]:
    nominal = _facet("NominalTimeRunFacet", nominalStartTime=at(-3600), nominalEndTime=at(0))
    error = _facet("ErrorMessageRunFacet", message="division by zero", programmingLanguage="python")
    v1, v2 = "https://git.example/etl/v1", "https://git.example/etl/v2"
    return [
        _event("START", FIRST, 0, v1, nominalTime=nominal),
        _event("COMPLETE", FIRST, 60, v1),
        _event("START", SECOND, 100, v2),
        _event("FAIL", SECOND, 130, v2, errorMessage=error),
        run_event("START", "other", RUNNING, time=200, inputs=[dataset("raw")]),
    ]


@pytest.fixture
def marquez(client: TestClient) -> TestClient:
    for event in _events():
        answer = client.post("/api/v1/lineage", json=event)
        assert answer.status_code == 201, answer.text
    return client


def _get(client: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    answer = client.get(path, params=params)
    assert answer.status_code == status, answer.text
    return answer.json()


def test_a_job_says_what_its_events_said(marquez: TestClient) -> None:
    job = _get(marquez, JOB_PATH)
    assert_marquez("Job", job)
    assert job["id"] == {"namespace": NS, "name": JOB} and (job["namespace"], job["name"]) == (NS, JOB)
    assert job["type"] == "STREAM"  # from the jobType facet, not a constant
    assert job["location"] == "https://git.example/etl/v2"  # the latest events' sourceCodeLocation
    assert job["description"] == "Loads the orders."
    assert job["inputs"] == [{"namespace": NS, "name": "public.src"}]
    assert job["outputs"] == [{"namespace": NS, "name": "public.dst"}]
    assert set(job["facets"]) == {"jobType", "sourceCodeLocation", "documentation"}
    assert job["tags"] == [] and job["nodeId"] == f"job:{NS}:{JOB}"
    latest = job["latestRun"]
    assert (latest["id"], latest["state"], latest["durationMs"]) == (SECOND, "FAILED", 30_000)
    assert latest["facets"]["errorMessage"]["message"] == "division by zero"
    assert "nominalStartTime" not in latest  # no nominalTime facet in that run: left out, never null
    assert [run["id"] for run in job["latestRuns"]] == [SECOND, FIRST]
    first = job["latestRuns"][1]
    assert (first["state"], first["durationMs"]) == ("COMPLETED", 60_000)
    assert (first["nominalStartTime"], first["nominalEndTime"]) == (
        "2026-03-01T11:00:00.000000Z",
        "2026-03-01T12:00:00.000000Z",
    )
    assert (first["startedAt"], first["endedAt"]) == ("2026-03-01T12:00:00.000000Z", "2026-03-01T12:01:00.000000Z")
    assert job["currentVersion"] == latest["jobVersion"]["version"] != first["jobVersion"]["version"]
    assert not [key for key, value in job.items() if value is None]


def test_runs_of_a_job_newest_first_with_paging_boundaries(marquez: TestClient) -> None:
    runs = _get(marquez, f"{JOB_PATH}/runs")
    assert_marquez("RunList", runs)
    assert ([run["id"] for run in runs["runs"]], runs["totalCount"]) == ([SECOND, FIRST], 2)
    for run in runs["runs"]:
        assert_marquez("Run", run)
        assert run["jobVersion"]["namespace"] == NS and run["jobVersion"]["name"] == JOB
    one = _get(marquez, f"{JOB_PATH}/runs", limit=1)
    assert ([run["id"] for run in one["runs"]], one["totalCount"]) == ([SECOND], 2)
    last = _get(marquez, f"{JOB_PATH}/runs", limit=1, offset=1)
    assert ([run["id"] for run in last["runs"]], last["totalCount"]) == ([FIRST], 2)
    past = _get(marquez, f"{JOB_PATH}/runs", offset=2)
    assert past == {"runs": [], "totalCount": 2}
    assert _get(marquez, f"{JOB_PATH}/runs", offset=500) == {"runs": [], "totalCount": 2}
    assert _get(marquez, f"{JOB_PATH}/runs", 400, limit=0)["detail"]  # the consumer's own limits: 1..1000


def test_each_distinct_content_is_a_version_with_a_stable_id(marquez: TestClient, tmp_path: Path) -> None:
    versions = _get(marquez, f"{JOB_PATH}/versions")
    assert_marquez("JobVersionList", versions)
    assert versions["totalCount"] == 2
    newer, older = versions["versions"]
    for version in (newer, older):
        assert_marquez("JobVersion", version)
        assert version["id"] == {"namespace": NS, "name": JOB, "version": version["version"]}
        assert version["inputs"] == [{"namespace": NS, "name": "public.src"}]
        assert version["outputs"] == [{"namespace": NS, "name": "public.dst"}]
    assert (newer["location"], older["location"]) == ("https://git.example/etl/v2", "https://git.example/etl/v1")
    assert (newer["latestRun"]["id"], older["latestRun"]["id"]) == (SECOND, FIRST)
    assert (newer["createdAt"], older["createdAt"]) == ("2026-03-01T12:01:40.000000Z", "2026-03-01T12:00:00.000000Z")
    assert _get(marquez, JOB_PATH)["currentVersion"] == newer["version"]

    assert _get(marquez, f"{JOB_PATH}/versions/{older['version']}") == older
    assert_marquez("JobVersion", older)
    assert _get(marquez, f"{JOB_PATH}/versions", limit=1, offset=1) == {"versions": [older], "totalCount": 2}
    missing = str(uuid.uuid4())
    assert _get(marquez, f"{JOB_PATH}/versions/{missing}", 404) == {
        "code": 404,
        "message": f"Job version '{missing}' not found.",
    }

    # The same events, in the opposite order, in another store (SQLite: the other database when this one is
    # PostgreSQL) make the same version ids.
    other = create_app(store_url=f"sqlite:///{tmp_path / 'again.db'}", anonymous=Access.ADMIN)
    try:
        with TestClient(other) as again:
            for event in reversed(_events()):
                assert again.post("/api/v1/lineage", json=event).status_code == 201
            assert _get(again, f"{JOB_PATH}/versions") == versions
    finally:
        other.state.store.dispose()


def test_a_run_and_its_facets_merged_over_its_events(marquez: TestClient) -> None:
    run = _get(marquez, f"/api/v1/jobs/runs/{FIRST}")
    assert_marquez("Run", run)
    assert (run["id"], run["state"], run["durationMs"]) == (FIRST, "COMPLETED", 60_000)
    assert run["nominalStartTime"] == "2026-03-01T11:00:00.000000Z"
    assert _get(marquez, f"/api/v1/jobs/runs/{FIRST.upper()}")["id"] == FIRST

    facets = _get(marquez, f"/api/v1/jobs/runs/{FIRST}/facets", type="run")
    # Marquez's FacetsResult says its ``facets`` is one CustomFacet; Marquez answers a map of facets
    # (RunFacets.java), so the map is checked as RunFacets/JobFacets and the rest as FacetsResult.
    assert_marquez("FacetsResult", {"runId": facets["runId"]})
    assert_marquez("RunFacets", facets["facets"])
    assert facets["runId"] == FIRST
    assert set(facets["facets"]) == {"nominalTime"}  # said by START only: kept after COMPLETE said none
    failed = _get(marquez, f"/api/v1/jobs/runs/{SECOND}/facets", type="run")
    assert failed["facets"]["errorMessage"]["message"] == "division by zero"
    job = _get(marquez, f"/api/v1/jobs/runs/{FIRST}/facets", type="job")
    assert_marquez("JobFacets", job["facets"])
    assert job["facets"]["sourceCodeLocation"]["url"] == "https://git.example/etl/v1"  # that run's, not the latest
    assert _get(marquez, f"/api/v1/jobs/runs/{FIRST}/facets", 400)["detail"]  # type is required
    assert _get(marquez, f"/api/v1/jobs/runs/{FIRST}/facets", 400, type="dataset")["detail"]


def test_namespaces_are_marquez_namespaces(marquez: TestClient) -> None:
    listed = _get(marquez, "/api/v1/namespaces")
    assert_marquez("NamespaceList", listed)
    assert [ns["name"] for ns in listed["namespaces"]] == ["pipelines", NS, "warehouse"]
    one = _get(marquez, f"/api/v1/namespaces/{quote(NS, safe='')}")
    assert_marquez("Namespace", one)
    assert one == listed["namespaces"][1]
    assert (one["ownerName"], one["isHidden"]) == ("anonymous", False) and "description" not in one
    # Created with its first node; updated with its latest (12:02:10) within the namespaces table's precision.
    assert one["createdAt"] == "2026-03-01T12:00:00.000000Z"
    latest = datetime(2026, 3, 1, 12, 2, 10, tzinfo=timezone.utc)
    assert latest - UPDATED_PRECISION <= datetime.fromisoformat(one["updatedAt"].replace("Z", "+00:00")) <= latest
    page = _get(marquez, "/api/v1/namespaces", limit=1, offset=1)
    assert ([ns["name"] for ns in page["namespaces"]], page["totalCount"]) == ([NS], 3)
    assert _get(marquez, "/api/v1/namespaces", offset=3) == {"namespaces": [], "totalCount": 3}


def test_jobs_of_a_namespace_and_of_all_paged_and_filtered_by_run_state(marquez: TestClient) -> None:
    mine = _get(marquez, f"/api/v1/namespaces/{quote(NS, safe='')}/jobs")
    assert_marquez("JobList", mine)
    assert ([job["name"] for job in mine["jobs"]], mine["totalCount"]) == ([JOB], 1)
    assert mine["jobs"][0] == _get(marquez, JOB_PATH)
    assert _get(marquez, "/api/v1/namespaces/pipelines/jobs", limit=1, offset=1) == {"jobs": [], "totalCount": 1}

    every = _get(marquez, "/api/v1/jobs")
    assert_marquez("JobList", every)
    assert [(job["namespace"], job["name"]) for job in every["jobs"]] == [("pipelines", "other"), (NS, JOB)]
    other = every["jobs"][0]
    assert (other["type"], other["latestRun"]["state"]) == ("BATCH", "RUNNING")  # no jobType facet: Marquez's default
    assert "durationMs" not in other["latestRun"] and "endedAt" not in other["latestRun"]
    first = _get(marquez, "/api/v1/jobs", limit=1)
    assert ([job["name"] for job in first["jobs"]], first["totalCount"]) == (["other"], 2)

    def names(**params: Any) -> tuple[list[str], int]:
        found = _get(marquez, "/api/v1/jobs", **params)
        assert_marquez("JobList", found)
        return [job["name"] for job in found["jobs"]], found["totalCount"]

    assert names(runState="FAILED") == ([JOB], 1)
    assert names(runState="RUNNING") == (["other"], 1)
    assert names(runState="COMPLETED") == ([], 0)  # the first run completed, but the latest failed
    assert names(runState=["RUNNING", "FAILED"]) == (["other", JOB], 2)
    assert names(lastRunStates="FAILED") == ([JOB], 1)  # as Marquez's web UI names it
    assert names(runState="RUNNING", limit=1, offset=1) == ([], 1)
    assert _get(marquez, "/api/v1/jobs", 400, runState="DONE")["detail"]
    assert names(namespace=NS, name_contains="load/") == ([JOB], 1)  # the lineage page's parameters


def test_unknown_names_answer_marquez_404(marquez: TestClient) -> None:
    nowhere, nobody, no_run = "mysql://nowhere", "no.such/job", str(uuid.uuid4())
    cases = {
        f"/api/v1/namespaces/{quote(nowhere, safe='')}": f"Namespace '{nowhere}' not found.",
        f"/api/v1/namespaces/{quote(nowhere, safe='')}/jobs": f"Namespace '{nowhere}' not found.",
        f"/api/v1/namespaces/{quote(nowhere, safe='')}/jobs/{quote(JOB, safe='')}": f"Namespace '{nowhere}' not found.",
        f"/api/v1/namespaces/{quote(NS, safe='')}/jobs/{quote(nobody, safe='')}": f"Job '{nobody}' not found.",
        f"/api/v1/namespaces/{quote(NS, safe='')}/jobs/{quote(nobody, safe='')}/runs": f"Job '{nobody}' not found.",
        f"/api/v1/namespaces/{quote(NS, safe='')}/jobs/{quote(nobody, safe='')}/versions": f"Job '{nobody}' not found.",
        f"/api/v1/namespaces/warehouse/jobs/{quote(JOB, safe='')}": f"Job '{JOB}' not found.",  # a dataset namespace
        f"/api/v1/jobs/runs/{no_run}": f"Run '{no_run}' not found.",
        f"/api/v1/jobs/runs/{no_run}/facets?type=run": f"Run '{no_run}' not found.",
        "/api/v1/jobs/runs/not-a-uuid": "Run 'not-a-uuid' not found.",
    }
    for path, message in cases.items():
        answer = marquez.get(path)
        assert (answer.status_code, answer.json()) == (404, {"code": 404, "message": message}), path
    assert marquez.get("/api/v1/runs/not-a-uuid").json().keys() == {"detail"}  # other routes keep their shape


@pytest.fixture
def keyed(store_url: str) -> Iterator[TestClient]:
    keys = (
        ApiKey("all", Access.ADMIN, "all-secret"),
        ApiKey("pipes", Access.READ, "pipes-secret", NamespaceScope(("pipelines", "warehouse"))),
    )
    app = create_app(store_url=store_url, keys=keys)
    try:
        with TestClient(app) as client:
            for event in _events():
                assert (
                    client.post("/api/v1/lineage", json=event, headers={"X-API-Key": "all-secret"}).status_code == 201
                )
            client.headers["X-API-Key"] = "pipes-secret"
            yield client
    finally:
        app.state.store.dispose()


def test_a_namespace_limited_key_sees_no_hidden_namespace(keyed: TestClient) -> None:
    hidden = {
        f"/api/v1/namespaces/{quote(NS, safe='')}": f"Namespace '{NS}' not found.",
        f"/api/v1/namespaces/{quote(NS, safe='')}/jobs": f"Namespace '{NS}' not found.",
        JOB_PATH: f"Namespace '{NS}' not found.",
        f"{JOB_PATH}/runs": f"Namespace '{NS}' not found.",
        f"{JOB_PATH}/versions": f"Namespace '{NS}' not found.",
        f"/api/v1/jobs/runs/{FIRST}": f"Run '{FIRST}' not found.",
        f"/api/v1/jobs/runs/{FIRST}/facets?type=job": f"Run '{FIRST}' not found.",
    }
    for path, message in hidden.items():
        answer = keyed.get(path)
        assert (answer.status_code, answer.json()) == (404, {"code": 404, "message": message}), path
    assert [ns["name"] for ns in _get(keyed, "/api/v1/namespaces")["namespaces"]] == ["pipelines", "warehouse"]
    jobs = _get(keyed, "/api/v1/jobs")
    assert ([job["name"] for job in jobs["jobs"]], jobs["totalCount"]) == (["other"], 1)
    assert _get(keyed, "/api/v1/jobs", runState="FAILED") == {"jobs": [], "totalCount": 0}
    assert _get(keyed, f"/api/v1/jobs/runs/{RUNNING}")["id"] == RUNNING
    keyed.headers["X-API-Key"] = "all-secret"
    assert _get(keyed, JOB_PATH)["latestRun"]["id"] == SECOND


def test_graph_nodes_and_details_carry_the_types_the_events_said(marquez: TestClient) -> None:
    stream = dataset("orders_topic", namespace="kafka://broker:9092")
    marquez.post("/api/v1/lineage", json=run_event("COMPLETE", "publish", outputs=[stream], time=300))
    graph = _get(marquez, "/api/v1/lineage", nodeId=f"job:{NS}:{JOB}", depth=1)["graph"]
    types = {node["id"]: node["data"]["type"] for node in graph}
    assert types == {
        f"job:{NS}:{JOB}": "STREAM",
        f"dataset:{NS}:public.src": "DB_TABLE",
        f"dataset:{NS}:public.dst": "DB_TABLE",
    }
    graph = _get(marquez, "/api/v1/lineage", nodeId="job:pipelines:publish", depth=1)["graph"]
    types = {node["id"]: node["data"]["type"] for node in graph}
    assert types == {"job:pipelines:publish": "BATCH", "dataset:kafka://broker:9092:orders_topic": "STREAM"}

    with marquez.app.state.store.read() as conn:
        ids = {row.name: row.id for row in conn.execute(nodes.tables.nodes.select())}
        details = nodes.node_details(conn, [ids[JOB], ids["orders_topic"], ids["public.src"], ids["publish"]])
    assert [details[ids[name]]["type"] for name in (JOB, "orders_topic", "public.src", "publish")] == [
        "STREAM",
        "STREAM",
        "DB_TABLE",
        "BATCH",
    ]
    assert details[ids[JOB]]["inputs"] == [{"namespace": NS, "name": "public.src"}]  # a STREAM job keeps its io


def test_listed_jobs_kept_in_memory_are_never_stale(marquez: TestClient, store_url: str) -> None:
    """Job listings keep each Job by its node's version: another process's ingest, tag writes and removals,
    and retention pruning runs show at once, and a listing from memory is exactly what a process without the
    cache answers."""
    writer = create_app(store_url=store_url, anonymous=Access.ADMIN)
    uncached = create_app(store_url=store_url, anonymous=Access.ADMIN, graph_cache_nodes=0)
    listing = f"/api/v1/namespaces/{quote(NS, safe='')}/jobs"
    try:
        with TestClient(writer) as other, TestClient(uncached) as plain:

            def listed() -> dict[str, Any]:
                found = _get(marquez, listing)
                assert found == _get(plain, listing) == {**_get(marquez, "/api/v1/jobs", namespace=NS)}
                return found["jobs"][0]

            assert listed()["latestRun"]["id"] == SECOND
            assert len(marquez.app.state.store.job_objects) == 1  # kept after the first listing
            third = str(uuid.uuid4())
            assert other.post("/api/v1/lineage", json=_event("START", third, 300, "v3")).status_code == 201
            job = listed()
            assert (job["latestRun"]["id"], job["latestRun"]["state"]) == (third, "RUNNING")
            assert [run["id"] for run in job["latestRuns"]] == [third, SECOND, FIRST]
            assert other.post(f"{JOB_PATH}/tags/PII").status_code == 200
            assert listed()["tags"] == ["PII"]
            assert other.delete(f"{JOB_PATH}/tags/PII").status_code == 200
            assert listed()["tags"] == []
            assert other.post("/api/v1/retention", params={"days": 1}).json()["runs"] >= 2  # all but the latest
            assert [run["id"] for run in listed()["latestRuns"]] == [third]
    finally:
        writer.state.store.dispose()
        uncached.state.store.dispose()
