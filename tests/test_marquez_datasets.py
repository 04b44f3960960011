"""Marquez's dataset, dataset version and source reads over the real app and stores (SQLite and PostgreSQL).

The store (every name that needs it is percent-encoded in the paths):

* ``postgres://db:5432`` / ``public.orders``, written by job ``etl/load`` in ``pipelines``: run FIRST
  (START t=0 + COMPLETE t=10) with fields ``id, amount`` and a ``dataSource`` facet; run SECOND (COMPLETE
  t=100) with ``id, amount, currency`` (``currency`` described, ``amount`` of no stated type), the
  ``dataSource``, ``documentation`` and ``lifecycleStateChange`` facets; run THIRD (START t=200, still
  running) with the same schema as SECOND. ``warehouse`` / ``raw_orders`` is read by every run, never written.
* ``kafka://broker:9092`` / ``orders.events``, a topic written by job ``publish`` (no ``dataSource`` facet):
  a stream.
* ``s3://bucket`` / ``exports/orders/2026``, a name holding ``/``.

Every answer is checked against Marquez's OpenAPI component schemas.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import PRODUCER, T0, dataset, on_a_request_thread, run_event
from support.marquez_spec import assert_marquez

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.marquez.datasets import version_id
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

NS, ORDERS = "postgres://db:5432", "public.orders"
KAFKA, TOPIC = "kafka://broker:9092", "orders.events"
S3, EXPORT = "s3://bucket", "exports/orders/2026"
FIRST, SECOND, THIRD, PUBLISH = (str(uuid.uuid4()) for _ in range(4))
SPEC = "https://openlineage.io/spec/facets/1-0-0/{0}.json#/$defs/{0}"
SOURCE = {"name": "orders-db", "uri": "postgres://db:5432/shop"}


def path(namespace: str, name: str | None = None, *rest: str) -> str:
    """A Marquez dataset path with ``namespace`` and ``name`` percent-encoded."""
    url = f"/api/v1/namespaces/{quote(namespace, safe='')}/datasets"
    if name is not None:
        url += f"/{quote(name, safe='')}"
    return "/".join((url, *rest))


def stamp(seconds: float) -> str:
    """The API's text for the time ``seconds`` after the events' T0."""
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def facet(schema: str, **members: Any) -> dict[str, Any]:
    """A facet whose schema is ``schema``."""
    return {"_producer": PRODUCER, "_schemaURL": SPEC.format(schema), **members}


def _orders(kind: str, run_id: str, time: float, fields: list[str], **facets: Any) -> dict[str, Any]:
    event = run_event(
        kind,
        "etl/load",
        run_id,
        time=time,
        inputs=[dataset("raw_orders")],
        outputs=[dataset(ORDERS, namespace=NS, fields=fields)],
    )
    output = event["outputs"][0]["facets"]
    output.update(facets)
    for item in output["schema"]["fields"]:
        if item["name"] == "amount" and len(fields) == 3:
            del item["type"]
        if item["name"] == "currency":
            item["description"] = "ISO 4217 code"
    return event


def events() -> list[dict[str, Any]]:
    """The store's events (see the module docstring)."""
    source = facet("DatasourceDatasetFacet", **SOURCE)
    later = {
        "dataSource": source,
        "documentation": facet("DocumentationDatasetFacet", description="Orders as sold."),
        "lifecycleStateChange": facet("LifecycleStateChangeDatasetFacet", lifecycleStateChange="OVERWRITE"),
    }
    return [
        _orders("START", FIRST, 0, ["id", "amount"]),
        _orders("COMPLETE", FIRST, 10, ["id", "amount"], dataSource=source),
        _orders("COMPLETE", SECOND, 100, ["id", "amount", "currency"], **later),
        _orders("START", THIRD, 200, ["id", "amount", "currency"], **later),
        run_event("COMPLETE", "publish", PUBLISH, time=50, outputs=[dataset(TOPIC, namespace=KAFKA, fields=["id"])]),
        run_event("COMPLETE", "export", time=60, outputs=[dataset(EXPORT, namespace=S3)]),
    ]


def post(client: TestClient, payloads: list[dict[str, Any]], headers: dict[str, str] | None = None) -> None:
    """Send ``payloads`` through the real ingest endpoint, each stored."""
    for payload in payloads:
        answer = client.post("/api/v1/lineage", json=payload, headers=headers or {})
        assert answer.status_code == 201, answer.text


@pytest.fixture
def marquez(client: TestClient) -> TestClient:
    """The client over a store holding :func:`events`."""
    post(client, events())
    return client


def get(client: TestClient, url: str, schema: str, **params: Any) -> dict[str, Any]:
    """GET ``url``: 200 and a body conforming to Marquez's ``schema``."""
    answer = client.get(url, params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert_marquez(schema, body)
    return body


def not_found(client: TestClient, url: str, message: str) -> None:
    """GET ``url``: Marquez's 404, saying ``message``."""
    answer = client.get(url)
    assert answer.status_code == 404, answer.text
    assert answer.json() == {"code": 404, "message": message}


def test_a_dataset_says_what_its_events_said(marquez: TestClient) -> None:
    found = get(marquez, path(NS, ORDERS), "Dataset")
    assert found["id"] == {"namespace": NS, "name": ORDERS}
    assert (found["name"], found["physicalName"], found["namespace"]) == (ORDERS, ORDERS, NS)
    assert found["type"] == "DB_TABLE"
    assert found["sourceName"] == "orders-db"
    assert found["fields"] == [
        {"name": "id", "type": "VARCHAR", "tags": []},
        {"name": "amount", "type": "UNKNOWN", "tags": []},
        {"name": "currency", "type": "VARCHAR", "tags": [], "description": "ISO 4217 code"},
    ]
    assert found["tags"] == []
    assert found["description"] == "Orders as sold."
    assert found["lastLifecycleState"] == "OVERWRITE" and found["deleted"] is False
    assert (found["createdAt"], found["updatedAt"]) == (stamp(0), stamp(200))
    # Modified by the latest run that COMPLETED (SECOND); the current version is the latest run's (THIRD).
    assert found["lastModifiedAt"] == stamp(100)
    assert found["currentVersion"] == version_id(NS, ORDERS, THIRD)
    assert set(found["facets"]) == {"schema", "dataSource", "documentation", "lifecycleStateChange"}
    assert found["facets"]["dataSource"]["uri"] == SOURCE["uri"]


def test_a_dataset_nobody_wrote_has_no_version_and_no_nulls(marquez: TestClient) -> None:
    found = get(marquez, path("warehouse", "raw_orders"), "Dataset")
    assert found["sourceName"] == "warehouse" and found["fields"] == [] and found["facets"] == {}
    assert not {"lastModifiedAt", "currentVersion", "description", "lastLifecycleState"} & set(found)
    assert None not in found.values()
    versions = get(marquez, path("warehouse", "raw_orders", "versions"), "DatasetVersionList")
    assert versions == {"versions": [], "totalCount": 0}


def test_a_topic_is_a_stream_and_its_namespace_its_source(marquez: TestClient) -> None:
    found = get(marquez, path(KAFKA, TOPIC), "Dataset")
    assert found["type"] == "STREAM" and found["sourceName"] == KAFKA
    assert found["lastModifiedAt"] == stamp(50) and found["currentVersion"] == version_id(KAFKA, TOPIC, PUBLISH)
    listed = get(marquez, path(KAFKA), "DatasetList")
    assert listed["totalCount"] == 1 and listed["datasets"] == [found]


def test_a_name_holding_slashes_is_found_percent_encoded(marquez: TestClient) -> None:
    assert get(marquez, path(S3, EXPORT), "Dataset")["name"] == EXPORT
    assert get(marquez, path(S3, EXPORT, "versions"), "DatasetVersionList")["totalCount"] == 1


def test_each_run_writing_a_dataset_is_a_version_with_its_own_fields(marquez: TestClient) -> None:
    listed = get(marquez, path(NS, ORDERS, "versions"), "DatasetVersionList")
    assert listed["totalCount"] == 3
    versions = listed["versions"]
    for version in versions:
        assert_marquez("DatasetVersion", version)
        assert version["id"] == {"namespace": NS, "name": ORDERS, "version": version["version"]}
    assert [v["createdByRun"]["id"] for v in versions] == [THIRD, SECOND, FIRST]  # newest first
    assert [v["version"] for v in versions] == [version_id(NS, ORDERS, run) for run in (THIRD, SECOND, FIRST)]
    assert [v["createdByRun"]["state"] for v in versions] == ["RUNNING", "COMPLETED", "COMPLETED"]
    third, second, first = versions
    assert [f["name"] for f in first["fields"]] == ["id", "amount"]
    assert first["fields"][1] == {"name": "amount", "type": "VARCHAR", "tags": []}
    assert [f["name"] for f in second["fields"]] == ["id", "amount", "currency"]
    assert second["fields"][1] == {"name": "amount", "type": "UNKNOWN", "tags": []}
    # A version's facets are every event of its run merged: FIRST's START had no dataSource, its COMPLETE did.
    assert set(first["facets"]) == {"schema", "dataSource"} and first["sourceName"] == "orders-db"
    assert first["description"] == "" and second["description"] == "Orders as sold."
    assert first["createdAt"] == stamp(0) and second["createdAt"] == stamp(100) and third["createdAt"] == stamp(200)
    assert first["createdByRun"]["durationMs"] == 10_000
    assert "tags" not in first  # Marquez's description types it as a string; the fields carry the tags


def test_a_version_is_found_by_its_id(marquez: TestClient) -> None:
    listed = get(marquez, path(NS, ORDERS, "versions"), "DatasetVersionList")["versions"]
    for version in listed:
        assert get(marquez, path(NS, ORDERS, "versions", version["version"]), "DatasetVersion") == version
    upper = listed[1]["version"].upper()
    assert get(marquez, path(NS, ORDERS, "versions", upper), "DatasetVersion") == listed[1]
    other = version_id(KAFKA, TOPIC, PUBLISH)  # a version, but of another dataset
    not_found(marquez, path(NS, ORDERS, "versions", other), f"Dataset version '{other}' not found.")
    not_found(marquez, path(NS, ORDERS, "versions", "not-a-uuid"), "Dataset version 'not-a-uuid' not found.")


def test_a_version_keeps_its_id_when_later_events_of_its_run_arrive(marquez: TestClient) -> None:
    before = get(marquez, path(NS, ORDERS, "versions"), "DatasetVersionList")["versions"][0]
    post(marquez, [_orders("COMPLETE", THIRD, 300, ["id", "amount", "currency", "total"])])
    after = get(marquez, path(NS, ORDERS, "versions"), "DatasetVersionList")["versions"][0]
    assert after["version"] == before["version"] and after["createdAt"] == before["createdAt"]
    assert [f["name"] for f in after["fields"]] == ["id", "amount", "currency", "total"]
    assert after["createdByRun"]["state"] == "COMPLETED"
    assert get(marquez, path(NS, ORDERS), "Dataset")["lastModifiedAt"] == stamp(300)


def test_unknown_names_answer_marquez_404s(marquez: TestClient) -> None:
    not_found(marquez, path("nowhere"), "Namespace 'nowhere' not found.")
    not_found(marquez, path("nowhere", ORDERS), "Namespace 'nowhere' not found.")
    not_found(marquez, path(NS, "public.missing"), "Dataset 'public.missing' not found.")
    not_found(marquez, path(NS, "public.missing", "versions"), "Dataset 'public.missing' not found.")
    version = version_id(NS, ORDERS, FIRST)
    not_found(marquez, path(NS, "public.missing", "versions", version), "Dataset 'public.missing' not found.")
    # A job's namespace exists, but holds no such dataset.
    not_found(marquez, path("pipelines", ORDERS), f"Dataset '{ORDERS}' not found.")
    assert get(marquez, path("pipelines"), "DatasetList") == {"datasets": [], "totalCount": 0}
    not_found(marquez, f"/api/v1/sources/{quote('no-such-db', safe='')}", "Source 'no-such-db' not found.")


@pytest.mark.parametrize(
    ("limit", "offset", "names"),
    [
        (2, 0, ["t0", "t1"]),
        (2, 2, ["t2", "t3"]),
        (2, 4, ["t4"]),
        (2, 5, []),
        (5, 0, ["t0", "t1", "t2", "t3", "t4"]),
        (100, 1, ["t1", "t2", "t3", "t4"]),
        (1, 4, ["t4"]),
    ],
)
def test_dataset_pages_and_their_total(client: TestClient, limit: int, offset: int, names: list[str]) -> None:
    outputs = [dataset(f"t{i}", namespace=NS) for i in (3, 1, 4, 0, 2)]
    post(client, [run_event("COMPLETE", "fan-out", time=i, outputs=[output]) for i, output in enumerate(outputs)])
    page = get(client, path(NS), "DatasetList", limit=limit, offset=offset)
    assert page["totalCount"] == 5
    assert [found["name"] for found in page["datasets"]] == names


def test_version_pages_and_their_total(marquez: TestClient) -> None:
    every = get(marquez, path(NS, ORDERS, "versions"), "DatasetVersionList")["versions"]
    for limit, offset in ((1, 0), (1, 2), (2, 1), (2, 3), (3, 0)):
        page = get(marquez, path(NS, ORDERS, "versions"), "DatasetVersionList", limit=limit, offset=offset)
        assert page["totalCount"] == 3 and page["versions"] == every[offset : offset + limit]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": "ten"}])
def test_bad_paging_is_refused(marquez: TestClient, params: dict[str, Any]) -> None:
    assert marquez.get(path(NS), params=params).status_code == 400
    assert marquez.get(path(NS, ORDERS, "versions"), params=params).status_code == 400
    assert marquez.get("/api/v1/sources", params=params).status_code == 400


def test_sources_are_what_the_datasets_name(marquez: TestClient) -> None:
    listed = get(marquez, "/api/v1/sources", "SourceList")
    by_name = {source["name"]: source for source in listed["sources"]}
    assert list(by_name) == sorted(by_name) and listed["totalCount"] == 4
    assert set(by_name) == {"orders-db", KAFKA, S3, "warehouse"}  # job namespaces hold no dataset: no source
    assert by_name["orders-db"] == {
        "type": "POSTGRESQL",
        "name": "orders-db",
        "createdAt": stamp(0),
        "updatedAt": stamp(200),
        "connectionUrl": SOURCE["uri"],
    }
    assert by_name[KAFKA]["type"] == "KAFKA" and by_name[KAFKA]["connectionUrl"] == KAFKA
    assert by_name[S3]["type"] == "S3"
    assert by_name["warehouse"]["type"] == "UNKNOWN"  # a namespace with no scheme says no kind of source
    for name, source in by_name.items():
        assert_marquez("Source", source)
        assert get(marquez, f"/api/v1/sources/{quote(name, safe='')}", "Source") == source
    for limit, offset in ((2, 0), (2, 3), (1, 4)):
        page = get(marquez, "/api/v1/sources", "SourceList", limit=limit, offset=offset)
        assert page == {"sources": listed["sources"][offset : offset + limit], "totalCount": 4}


ADMIN = {"X-API-Key": "admin-secret-value"}
DB_ONLY = {"X-API-Key": "db-only-secret-value"}
DB_AND_JOBS = {"X-API-Key": "db-and-jobs-secret-value"}
KEYS = (
    ApiKey("admin", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("db-only", Access.READ, DB_ONLY["X-API-Key"], NamespaceScope(("postgres://*",))),
    ApiKey("db-and-jobs", Access.READ, DB_AND_JOBS["X-API-Key"], NamespaceScope(("postgres://*", "pipelines"))),
)


@pytest.fixture
def keyed(store_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """A client of an app with the :data:`KEYS`, over a store holding :func:`events`."""
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        post(client, events(), ADMIN)
        yield client
    app.state.store.dispose()


def _as(client: TestClient, headers: dict[str, str], url: str, schema: str | None = None) -> dict[str, Any]:
    answer = client.get(url, headers=headers)
    body = answer.json()
    if schema is None:
        assert answer.status_code == 404 and set(body) == {"code", "message"}, answer.text
    else:
        assert answer.status_code == 200, answer.text
        assert_marquez(schema, body)
    return body


def test_a_namespace_limited_key_sees_only_its_datasets_and_the_runs_of_its_jobs(keyed: TestClient) -> None:
    assert keyed.get(path(NS, ORDERS)).status_code == 401
    full = _as(keyed, ADMIN, path(NS, ORDERS), "Dataset")
    # The writing job's namespace is hidden from db-only: no version, nothing it did shows.
    limited = _as(keyed, DB_ONLY, path(NS, ORDERS), "Dataset")
    assert not {"currentVersion", "lastModifiedAt"} & set(limited)
    assert {k: v for k, v in full.items() if k not in ("currentVersion", "lastModifiedAt")} == limited
    assert _as(keyed, DB_ONLY, path(NS, ORDERS, "versions"), "DatasetVersionList") == {"versions": [], "totalCount": 0}
    _as(keyed, DB_ONLY, path(NS, ORDERS, "versions", full["currentVersion"]))
    assert _as(keyed, DB_AND_JOBS, path(NS, ORDERS), "Dataset") == full
    assert _as(keyed, DB_AND_JOBS, path(NS, ORDERS, "versions"), "DatasetVersionList")["totalCount"] == 3
    # Hidden namespaces and their datasets and sources are answered as missing ones.
    for key in (DB_ONLY, DB_AND_JOBS):
        assert _as(keyed, key, path(KAFKA)) == {"code": 404, "message": f"Namespace '{KAFKA}' not found."}
        assert _as(keyed, key, path(KAFKA, TOPIC))["message"] == f"Namespace '{KAFKA}' not found."
        assert _as(keyed, key, path("warehouse", "raw_orders", "versions"))["code"] == 404
        _as(keyed, key, f"/api/v1/sources/{quote(KAFKA, safe='')}")
        sources = _as(keyed, key, "/api/v1/sources", "SourceList")
        assert [source["name"] for source in sources["sources"]] == ["orders-db"] and sources["totalCount"] == 1
    assert _as(keyed, ADMIN, "/api/v1/sources", "SourceList")["totalCount"] == 4


def test_a_page_of_datasets_costs_the_same_statements_whatever_its_size(client: TestClient) -> None:
    from sqlalchemy import event

    post(client, events())
    for i in range(30):
        run = str(uuid.uuid4())
        writes = [dataset(f"bulk_{i:02}", namespace=NS, fields=["id"])]
        post(client, [run_event("START", f"bulk{i}", run, time=i, outputs=writes)])
        post(client, [run_event("COMPLETE", f"bulk{i}", run, time=i + 1, outputs=writes)])
    assert client.get("/api/v1/namespaces").status_code == 200  # deferred apply: waits until the posts are applied
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if on_a_request_thread():
            statements.append(statement)

    engine = client.app.state.store.engine
    counts = {}
    event.listen(engine, "before_cursor_execute", record)
    try:
        for limit in (2, 31):
            statements.clear()
            page = get(client, path(NS), "DatasetList", limit=limit)
            assert len(page["datasets"]) == limit and all("currentVersion" in found for found in page["datasets"])
            counts[limit] = len(statements)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert 6 <= counts[2] == counts[31] <= 12, counts
