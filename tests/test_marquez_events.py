"""Marquez's ``GET /api/v1/events/lineage``: the run events as received, paged by time window, direction,
limit and offset — every answer checked against Marquez's ``LineageEventList`` — on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import at, dataset, dataset_event, job_event, run_event
from support.marquez_spec import assert_marquez

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

PATH = "/api/v1/events/lineage"


def _events(client: TestClient, headers: dict[str, str] | None = None, **params: Any) -> dict[str, Any]:
    answer = client.get(PATH, params=params, headers=headers or {})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert_marquez("LineageEventList", body)
    return body


def _post(client: TestClient, *events: dict[str, Any]) -> None:
    answer = client.post("/api/v1/lineage/batch", json=list(events))
    assert answer.status_code == 200, answer.text
    assert answer.json()["successful"] == len(events)


def _key(event: dict[str, Any]) -> tuple[str, str]:
    return event["job"]["name"], event["eventType"]


@pytest.fixture
def timeline(client: TestClient) -> list[dict[str, Any]]:
    """Run events at 0, 10, 10, 10 and 20 s (three sharing one time), plus a JobEvent and a DatasetEvent
    (which Marquez's listing leaves out), posted out of time order."""
    events = [
        run_event("COMPLETE", "late", time=20),
        run_event("START", "first", time=0),
        run_event("START", "tie_a", time=10),
        run_event("START", "tie_b", time=10),
        run_event("FAIL", "tie_c", time=10),
    ]
    _post(client, *events)
    _post(client, job_event("static", [dataset("a")], [dataset("b")], time=5), dataset_event(dataset("c"), time=15))
    return events


def test_newest_first_by_default_with_ties_in_a_stable_order(client: TestClient, timeline: list) -> None:
    body = _events(client)
    assert body["totalCount"] == 5  # run events only, as Marquez lists them
    names = [e["job"]["name"] for e in body["events"]]
    assert names[0] == "late" and names[-1] == "first"
    assert set(names[1:4]) == {"tie_a", "tie_b", "tie_c"}
    assert all("run" in e for e in body["events"])  # Marquez's web UI reads event.run.runId of each
    oldest = _events(client, sortDirection="asc")
    assert [e["job"]["name"] for e in oldest["events"]] == list(reversed(names))
    assert _events(client, sortDirection="DESC")["events"] == body["events"]  # any case, as Marquez's enum
    stored = {_key(e): e for e in timeline}
    assert all(e == stored[_key(e)] for e in body["events"])  # the events exactly as they were sent


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_pages_of_one_walk_every_event_once_even_at_equal_times(
    client: TestClient, timeline: list, direction: str
) -> None:
    whole = _events(client, sortDirection=direction)["events"]
    pages = [_events(client, sortDirection=direction, limit=1, offset=i) for i in range(len(whole))]
    assert [p["events"][0] for p in pages] == whole
    assert {p["totalCount"] for p in pages} == {5}
    past = _events(client, sortDirection=direction, limit=1, offset=5)
    assert past == {"events": [], "totalCount": 5}
    far = _events(client, offset=10_000)
    assert far == {"events": [], "totalCount": 5}


def test_after_is_inclusive_and_before_exclusive(client: TestClient, timeline: list) -> None:
    at_ten = _events(client, after=at(10), before=at(20))
    assert {e["job"]["name"] for e in at_ten["events"]} == {"tie_a", "tie_b", "tie_c"}
    assert at_ten["totalCount"] == 3
    assert _events(client, after=at(10), before=at(10)) == {"events": [], "totalCount": 0}
    from_ten = _events(client, after=at(10))
    assert {e["job"]["name"] for e in from_ten["events"]} == {"tie_a", "tie_b", "tie_c", "late"}
    before_ten = _events(client, before=at(10))
    assert [e["job"]["name"] for e in before_ten["events"]] == ["first"]
    # the same instant written in another zone and without a zone (UTC)
    assert _events(client, after="2026-03-01T13:00:10+01:00", before="2026-03-01T12:00:20")["totalCount"] == 3
    window = _events(client, after=at(10), sortDirection="asc")["events"]
    assert window[-1]["job"]["name"] == "late"
    paged = _events(client, after=at(10), limit=2, offset=1, sortDirection="asc")
    assert paged == {"events": window[1:3], "totalCount": 4}


def test_empty_bounds_are_no_bounds_as_marquez_web_ui_sends_them(client: TestClient, timeline: list) -> None:
    # Marquez's web UI asks events/lineage?limit=100&before=&after=&sortDirection=desc
    assert _events(client, before="", after="", sortDirection="desc", limit=100)["totalCount"] == 5


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sortDirection": "sideways"}, "sortDirection: 'sideways'"),
        ({"before": "yesterday"}, "before: 'yesterday'"),
        ({"after": "2026-13-01T00:00:00Z"}, "after: '2026-13-01T00:00:00Z'"),
        ({"before": "0001-01-01T00:00:00+14:00"}, "before: 0001-01-01T00:00:00+14:00"),
        ({"limit": 0}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"offset": -1}, "offset"),
    ],
)
def test_bad_parameters_answer_400_naming_the_value(client: TestClient, params: dict, named: str) -> None:
    answer = client.get(PATH, params=params)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["detail"]


def test_a_namespace_limited_key_sees_and_counts_only_events_naming_its_namespaces(store_url: str) -> None:
    keys = (
        ApiKey("all", Access.ADMIN, "all-secret"),
        ApiKey("wh", Access.READ, "wh-secret", NamespaceScope(("warehouse", "pipelines"))),
    )
    app = create_app(store_url=store_url, keys=keys)
    everyone, limited = {"X-API-Key": "all-secret"}, {"X-API-Key": "wh-secret"}
    try:
        with TestClient(app) as client:
            seen = run_event("COMPLETE", "load", time=1, inputs=[dataset("src")], outputs=[dataset("dst")])
            hidden_output = run_event("COMPLETE", "to_fin", time=2, outputs=[dataset("ledger", "finance")])
            hidden_job = run_event("START", "close", time=3, namespace="finance")
            answer = client.post("/api/v1/lineage/batch", json=[seen, hidden_output, hidden_job], headers=everyone)
            assert answer.status_code == 200, answer.text
            assert _events(client, everyone)["totalCount"] == 3
            body = _events(client, limited)
            assert body == {"events": [seen], "totalCount": 1}
            assert _events(client, limited, limit=1, offset=1) == {"events": [], "totalCount": 1}
            assert client.get(PATH).status_code == 401  # behind the same credentials as every read
    finally:
        app.state.store.dispose()


def test_events_of_one_namespace_as_marquezs_client_asks(client: Any) -> None:
    """``GET /api/v1/events/{namespace}`` (the client sends the name unencoded): the events of that namespace's
    jobs only; ``/api/v1/events/lineage`` stays Marquez's listing, and ``?namespace=`` filters ``/events`` alike."""
    for job, namespace in (("a", "pipelines"), ("b", "pipelines"), ("c", "s3://bucket/jobs")):
        posted = client.post("/api/v1/lineage", json=run_event("COMPLETE", job, namespace=namespace))
        assert posted.status_code == 201, posted.text
    mine = client.get("/api/v1/events/pipelines").json()
    assert mine["totalCount"] == 2 and {e["job"]["name"] for e in mine["events"]} == {"a", "b"}
    slashed = client.get("/api/v1/events/s3://bucket/jobs").json()
    assert [e["job"]["name"] for e in slashed["events"]] == ["c"]
    assert client.get("/api/v1/events", params={"namespace": "pipelines"}).json()["totalCount"] == 2
    assert client.get("/api/v1/events/nowhere").json() == {"events": [], "totalCount": 0}
    assert client.get("/api/v1/events/lineage").json()["totalCount"] == 3  # Marquez's route, not a namespace
