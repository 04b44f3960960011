"""Run state follows the lifecycle and eventTime, never arrival order; duplicates change nothing.

On SQLite and PostgreSQL, across requests and inside one batch.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import T0, dataset, run_event

pytest_plugins = ("support.consumer_fixtures",)


def _iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _run(client: TestClient, run_id: str) -> dict:
    response = client.get(f"/api/v1/runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()


def _post_each(client: TestClient, events: list[dict]) -> None:
    for event in events:
        assert client.post("/api/v1/lineage", json=event).status_code == 201


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "one-batch"])
def test_start_then_complete(client: TestClient, together: bool) -> None:
    run_id = str(uuid.uuid4())
    events = [run_event("START", "load", run_id, time=0), run_event("COMPLETE", "load", run_id, time=30)]
    _post_each(client, events) if not together else client.post("/api/v1/lineage/batch", json=events)
    run = _run(client, run_id)
    assert (run["state"], run["startedAt"], run["endedAt"], run["durationMs"]) == (
        "COMPLETED",
        _iso(0),
        _iso(30),
        30000,
    )


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "one-batch"])
def test_complete_arriving_before_start_still_completes(client: TestClient, together: bool) -> None:
    run_id = str(uuid.uuid4())
    events = [run_event("COMPLETE", "load", run_id, time=30), run_event("START", "load", run_id, time=0)]
    _post_each(client, events) if not together else client.post("/api/v1/lineage/batch", json=events)
    run = _run(client, run_id)
    assert (run["state"], run["startedAt"], run["endedAt"]) == ("COMPLETED", _iso(0), _iso(30))


@pytest.mark.parametrize("terminal", ["FAIL", "ABORT", "COMPLETE"])
def test_a_late_start_never_reverts_a_terminal_state(client: TestClient, terminal: str) -> None:
    run_id = str(uuid.uuid4())
    _post_each(client, [run_event(terminal, "load", run_id, time=60), run_event("START", "load", run_id, time=0)])
    _post_each(client, [run_event("RUNNING", "load", run_id, time=30)])
    expected = {"FAIL": "FAILED", "ABORT": "ABORTED", "COMPLETE": "COMPLETED"}[terminal]
    run = _run(client, run_id)
    assert (run["state"], run["endedAt"], run["startedAt"]) == (expected, _iso(60), _iso(0))


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["in-order", "reversed"])
def test_between_two_terminal_events_the_later_event_time_wins(client: TestClient, order: tuple[int, int]) -> None:
    run_id = str(uuid.uuid4())
    events = [run_event("COMPLETE", "load", run_id, time=10), run_event("FAIL", "load", run_id, time=20)]
    _post_each(client, [events[i] for i in order])
    run = _run(client, run_id)
    assert (run["state"], run["endedAt"]) == ("FAILED", _iso(20))


def test_running_events_keep_the_earliest_start(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    _post_each(client, [run_event("RUNNING", "load", run_id, time=40), run_event("START", "load", run_id, time=5)])
    run = _run(client, run_id)
    assert (run["state"], run["startedAt"], run["endedAt"]) == ("RUNNING", _iso(5), None)


def test_times_come_from_event_time_not_the_consumer_clock(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    start = {**run_event("START", "load", run_id), "eventTime": "2019-06-01T08:00:00+02:00"}
    complete = {**run_event("COMPLETE", "load", run_id), "eventTime": "2019-06-01T06:30:00Z"}
    _post_each(client, [start, complete])
    run = _run(client, run_id)
    assert (run["startedAt"], run["endedAt"], run["durationMs"]) == (
        "2019-06-01T06:00:00.000000Z",
        "2019-06-01T06:30:00.000000Z",
        30 * 60 * 1000,
    )


def test_resending_everything_changes_nothing(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    events = [
        run_event("START", "load", run_id, time=0, inputs=[dataset("raw", fields=["a"])], outputs=[dataset("out")]),
        run_event("COMPLETE", "load", run_id, time=9, inputs=[dataset("raw")], outputs=[dataset("out", fields=["b"])]),
    ]
    client.post("/api/v1/lineage/batch", json=events)
    before = [
        client.get(path, params=params).json()
        for path, params in [
            (f"/api/v1/runs/{run_id}", {}),
            ("/api/v1/events", {}),
            ("/api/v1/datasets", {}),
            ("/api/v1/jobs", {}),
            ("/api/v1/lineage", {"nodeId": "job:pipelines:load", "depth": 3}),
        ]
    ]
    again = client.post("/api/v1/lineage/batch", json=events + events[::-1])
    assert again.json()["duplicates"] == 4
    for event in events:
        assert client.post("/api/v1/lineage", json=event).json() == {"status": "duplicate"}
    after = [
        client.get(path, params=params).json()
        for path, params in [
            (f"/api/v1/runs/{run_id}", {}),
            ("/api/v1/events", {}),
            ("/api/v1/datasets", {}),
            ("/api/v1/jobs", {}),
            ("/api/v1/lineage", {"nodeId": "job:pipelines:load", "depth": 3}),
        ]
    ]
    assert after == before


def test_the_latest_run_of_a_job_is_the_one_with_the_latest_events(client: TestClient) -> None:
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    _post_each(client, [run_event("START", "load", new, time=100), run_event("COMPLETE", "load", old, time=50)])
    _post_each(client, [run_event("START", "load", old, time=0)])  # a late event of the older run
    job = client.get("/api/v1/jobs").json()["jobs"][0]
    assert (job["latestRun"]["id"], job["latestRun"]["state"]) == (new, "RUNNING")
    runs = client.get("/api/v1/runs", params={"jobNamespace": "pipelines", "jobName": "load"}).json()
    assert [r["id"] for r in runs["runs"]] == [new, old]


def test_a_late_old_schema_does_not_replace_the_latest(client: TestClient) -> None:
    newer = run_event("COMPLETE", "load", time=100, outputs=[dataset("orders", fields=["id", "amount", "currency"])])
    older = run_event("COMPLETE", "load", time=10, outputs=[dataset("orders", fields=["id"])])
    _post_each(client, [newer, older])
    fields = client.get("/api/v1/datasets").json()["datasets"][0]["fields"]
    assert [f["name"] for f in fields] == ["id", "amount", "currency"]
    graph = client.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:orders", "depth": 0}).json()["graph"]
    assert [f["name"] for f in graph[0]["data"]["fields"]] == ["id", "amount", "currency"]
