"""Listing parameters, on SQLite and PostgreSQL: the events listing's job filters (Feast's ``namespace`` and
``job_name``, and ``jobNamespace``/``jobName``), and a 400 naming an unknown query parameter on any listing —
while every parameter Marquez's web UI and its OpenAPI send to a listing is still taken."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event
from support.environment import require_shared
from support.olschema import SPEC

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

READ, LIMITED = "read-secret-1", "limited-secret-2"
KEYS = (
    ApiKey("viewer", Access.WRITE, READ),
    ApiKey("finance", Access.READ, LIMITED, NamespaceScope(("finance",))),
)


def _key(secret: str) -> dict[str, str]:
    return {"X-API-Key": secret}


@pytest.fixture
def keyed(store_url: str) -> Any:
    """A consumer holding 9 events: load and report 3 times each in ``pipelines``, load twice and close in
    ``finance``."""
    app = create_app(store_url=store_url, keys=KEYS)
    events = [
        *(run_event("COMPLETE", "load", outputs=[dataset("raw")]) for _ in range(3)),
        *(run_event("COMPLETE", "report", inputs=[dataset("raw")]) for _ in range(3)),
        *(run_event("COMPLETE", "load", namespace="finance") for _ in range(2)),
        run_event("COMPLETE", "close", namespace="finance"),
    ]
    with TestClient(app) as client:
        assert client.post("/api/v1/lineage/batch", json=events, headers=_key(READ)).status_code == 200
        yield client
    app.state.store.dispose()


def _jobs(client: TestClient, secret: str = READ, path: str = "/api/v1/events", **params: Any) -> list[tuple]:
    answer = client.get(path, params=params, headers=_key(secret))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    found = [(e["job"]["namespace"], e["job"]["name"]) for e in body["events"]]
    assert body["totalCount"] == len(found)
    return found


def test_events_filter_by_job_name_and_namespace_in_either_spelling(keyed: TestClient) -> None:
    assert len(_jobs(keyed)) == 9
    assert sorted(_jobs(keyed, job_name="load")) == [("finance", "load")] * 2 + [("pipelines", "load")] * 3
    assert len(_jobs(keyed, jobName="load")) == 5
    assert _jobs(keyed, job_name="load", namespace="finance") == [("finance", "load")] * 2
    assert _jobs(keyed, jobName="load", jobNamespace="finance") == [("finance", "load")] * 2
    assert _jobs(keyed, jobNamespace="pipelines", job_name="report") == [("pipelines", "report")] * 3
    assert _jobs(keyed, job_name="absent") == []
    assert _jobs(keyed, path="/api/v1/events/finance", job_name="close") == [("finance", "close")]
    paged = keyed.get("/api/v1/events", params={"job_name": "load", "limit": 2}, headers=_key(READ)).json()
    assert paged["totalCount"] == 5 and len(paged["events"]) == 2
    disagree = keyed.get("/api/v1/events", params={"job_name": "load", "jobName": "close"}, headers=_key(READ))
    assert disagree.status_code == 400 and "job_name and jobName" in disagree.text
    same = keyed.get("/api/v1/events", params={"namespace": "finance", "jobNamespace": "finance"}, headers=_key(READ))
    assert same.status_code == 200 and same.json()["totalCount"] == 3


def test_a_limited_key_filters_only_what_it_sees(keyed: TestClient) -> None:
    assert _jobs(keyed, LIMITED, job_name="load") == [("finance", "load")] * 2
    assert _jobs(keyed, LIMITED, job_name="report") == []  # pipelines is hidden: nothing, not a hint
    assert _jobs(keyed, LIMITED, job_name="load", namespace="pipelines") == []


def test_an_unknown_query_parameter_on_a_listing_is_a_400_naming_it(keyed: TestClient) -> None:
    for path in (
        "/api/v1/events",
        "/api/v1/events/finance",
        "/api/v1/events/lineage",
        "/api/v1/jobs",
        "/api/v1/datasets",
        "/api/v1/namespaces",
        "/api/v1/runs",
        "/api/v1/graph",
        "/api/v1/search",
        "/api/v1/tags",
        "/api/v1/sources",
        "/api/v1/namespaces/pipelines/jobs",
        "/api/v1/namespaces/pipelines/jobs/load/runs",
        "/api/v1/namespaces/pipelines/datasets",
    ):
        answer = keyed.get(path, params={"job": "load", "limit": 5}, headers=_key(READ))
        assert answer.status_code == 400, (path, answer.text)
        assert "unknown query parameter 'job'" in answer.text and "limit" in answer.text, (path, answer.text)
    both = keyed.get("/api/v1/events", params={"jobname": "x", "zz": "1"}, headers=_key(READ))
    assert "unknown query parameters 'jobname', 'zz'" in both.text
    assert keyed.get("/api/v1/events", params={"job": "load"}).status_code == 401  # credentials first


def _ui_requests() -> list[tuple[str, list[str]]]:
    """The GET requests with query parameters Marquez's web UI makes (SOURCES.md), as (path, names)."""
    text = (SPEC / "marquez" / "SOURCES.md").read_text()
    found = []
    for path, query in re.findall(r"^GET (/api/v1/\S+?)\?(\S+)", text, re.MULTILINE):
        names = [name for name in re.split(r"[&\[\]]+", query) if name and "=" not in name]
        names += [name.split("=")[0] for name in re.split(r"[&\[\]]+", query) if "=" in name]
        found.append((path, names))
    return found


def _openapi_listings() -> list[tuple[str, list[str]]]:
    """The GET paths of Marquez's OpenAPI with their query parameters, as (path, names)."""
    spec = yaml.safe_load((SPEC / "marquez" / "openapi.yml").read_text())
    shared = spec["components"]["parameters"]
    found = []
    for path, item in spec["paths"].items():
        get = item.get("get")
        if not get:
            continue
        params = [shared[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p for p in get.get("parameters", [])]
        names = [p["name"] for p in params if p.get("in") == "query"]
        if names:
            found.append(("/api/v1" + path, names))
    return found


_SAMPLE = {
    "limit": "5",
    "offset": "0",
    "depth": "2",
    "withDownstream": "true",
    "sortDirection": "desc",
    "before": "2030-01-01",
    "after": "2000-01-01",
    "sort": "NAME",
    "filter": "JOB",
    "q": "load",
    "type": "run",
    "period": "DAY",
    "timezone": "UTC",
    "runState": "COMPLETED",
    "namespace": "pipelines",
}


def test_every_parameter_marquez_sends_to_a_listing_is_taken(keyed: TestClient) -> None:
    require_shared()
    requests = _ui_requests() + _openapi_listings()
    assert len(requests) >= 10, requests
    checked = 0
    for template, names in requests:
        path = (
            template.replace("{ns}", "pipelines")
            .replace("{namespace}", "pipelines")
            .replace("{job}", "load")
            .replace("{dataset}", "raw")
        )
        if "{" in path:  # a run id or version: the listings take no such path
            continue
        node = "job:pipelines:load"
        params = {name: _SAMPLE.get(name, node if name == "nodeId" else "x") for name in names}
        answer = keyed.get(path, params=params, headers=_key(READ))
        assert "unknown query parameter" not in answer.text, (path, params, answer.text)
        checked += 1
    assert checked >= 10
