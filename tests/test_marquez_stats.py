"""The charts of Marquez's web UI (``/api/v1/stats/...``) over events at known times before now, on SQLite and
PostgreSQL. Marquez's OpenAPI description has no schema for them: each answer is checked against the shape
of Marquez's ``LineageMetric`` / ``IntervalMetric`` (every member, ``date-time`` instants) and the intervals
against the period (24 contiguous hours, or 7 calendar days of the zone, the last holding now)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import T0, dataset, job_event, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

LINEAGE_METRIC = {"startInterval", "endInterval", "fail", "start", "complete", "abort"}
INTERVAL_METRIC = {"startInterval", "endInterval", "count"}


def _seconds_ago(delta: timedelta) -> float:
    """``time`` for the event builders (seconds after T0) of an instant ``delta`` before now."""
    return (datetime.now(UTC) - delta - T0).total_seconds()


def _instant(text: str) -> datetime:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text)


def _stats(client: TestClient, what: str, headers: dict | None = None, **params: Any) -> list[dict[str, Any]]:
    before = datetime.now(UTC)
    answer = client.get(f"/api/v1/stats/{what}", params=params, headers=headers or {})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    members = LINEAGE_METRIC if what == "lineage-events" else INTERVAL_METRIC
    assert isinstance(body, list)
    for metric in body:
        assert set(metric) == members
        assert all(isinstance(metric[m], int) and metric[m] >= 0 for m in members - {"startInterval", "endInterval"})
    spans = [(_instant(m["startInterval"]), _instant(m["endInterval"])) for m in body]
    assert all(end == following for (_, end), (following, _) in pairwise(spans))  # contiguous
    assert spans[-1][0] <= before and datetime.now(UTC) < spans[-1][1]  # the last interval holds now
    if params["period"].upper() == "DAY":
        assert len(body) == 24 and all(end - start == timedelta(hours=1) for start, end in spans)
    else:
        zone = ZoneInfo(params.get("timezone") or "UTC")
        assert len(body) == 7
        for start, end in spans:  # local midnights (a day across a DST change is 23 or 25 hours)
            assert start.astimezone(zone).time() == end.astimezone(zone).time() == datetime.min.time()
            assert end.astimezone(zone).date() - start.astimezone(zone).date() == timedelta(days=1)
    return body


def _interval_of(body: list[dict[str, Any]], delta: timedelta) -> int:
    """The index of the interval holding ``now - delta`` (taken from the answer, so an hour turning over
    between posting and asking cannot make the test wrong)."""
    moment = datetime.now(UTC) - delta
    for i, metric in enumerate(body):
        if _instant(metric["startInterval"]) <= moment < _instant(metric["endInterval"]):
            return i
    raise AssertionError(f"{moment} is in no interval")


@pytest.fixture
def recent(client: TestClient) -> TestClient:
    """Events 30 minutes ago (START, COMPLETE), 5 hours ago (START, FAIL, ABORT, RUNNING), 3 days ago (START,
    COMPLETE) and 30 days ago (COMPLETE), plus a JobEvent 2 hours ago (not counted: no event type)."""
    h = timedelta(hours=1)
    events = [
        run_event("START", "load", run_id="11111111-1111-4111-8111-111111111111", time=_seconds_ago(0.5 * h)),
        run_event("COMPLETE", "load", run_id="11111111-1111-4111-8111-111111111111", time=_seconds_ago(0.4 * h)),
        run_event("START", "fragile", time=_seconds_ago(5 * h), outputs=[dataset("fragile_out", "s3://lake")]),
        run_event("FAIL", "fragile", time=_seconds_ago(5 * h)),
        run_event("ABORT", "cancelled", time=_seconds_ago(5 * h)),
        run_event("RUNNING", "cancelled", time=_seconds_ago(5 * h)),
        run_event("START", "weekly", time=_seconds_ago(72 * h), inputs=[dataset("orders")]),
        run_event("COMPLETE", "weekly", time=_seconds_ago(72 * h)),
        run_event("COMPLETE", "ancient", time=_seconds_ago(720 * h), outputs=[dataset("old", "postgres://db:5432")]),
        job_event("static", [dataset("orders")], [dataset("report")], time=_seconds_ago(2 * h)),
    ]
    answer = client.post("/api/v1/lineage/batch", json=events)
    assert answer.status_code == 200 and answer.json()["successful"] == len(events), answer.text
    return client


def test_lineage_events_per_hour_of_the_last_day(recent: TestClient) -> None:
    body = _stats(recent, "lineage-events", period="DAY", timezone="Europe/Berlin")
    counted = {i: m for i, m in enumerate(body) if m["start"] + m["complete"] + m["fail"] + m["abort"]}
    started, completed = _interval_of(body, timedelta(minutes=30)), _interval_of(body, timedelta(minutes=24))
    five_hours = _interval_of(body, timedelta(hours=5))
    assert set(counted) == {started, completed, five_hours}
    assert (body[started]["start"], body[completed]["complete"]) == (1, 1)
    total = {k: sum(m[k] for m in body) for k in ("start", "complete", "fail", "abort")}
    assert total == {"start": 2, "complete": 1, "fail": 1, "abort": 1}  # RUNNING and JobEvents are not counted
    assert body[five_hours] | {"startInterval": "", "endInterval": ""} == {
        "startInterval": "",
        "endInterval": "",
        "start": 1,
        "complete": 0,
        "fail": 1,
        "abort": 1,
    }


def test_lineage_events_per_day_of_the_last_week_in_the_asked_zone(recent: TestClient) -> None:
    for zone in ("UTC", "America/New_York", "Asia/Kolkata"):
        body = _stats(recent, "lineage-events", period="WEEK", timezone=zone)
        total = {k: sum(m[k] for m in body) for k in ("start", "complete", "fail", "abort")}
        assert total == {"start": 3, "complete": 2, "fail": 1, "abort": 1}  # 30 days ago is outside the week
        three_days = _interval_of(body, timedelta(hours=72))
        assert (body[three_days]["start"], body[three_days]["complete"]) == (1, 1)
    utc = _stats(recent, "lineage-events", period="WEEK", timezone="UTC")
    assert _stats(recent, "lineage-events", period="week", timezone="UTC") == utc  # the period in any case


def test_jobs_datasets_and_sources_count_what_was_seen_by_each_intervals_end(recent: TestClient) -> None:
    jobs = _stats(recent, "jobs", period="DAY", timezone="UTC")
    # ancient and weekly were seen before the day began; static 2 h, fragile and cancelled 5 h, load 30 min ago
    assert jobs[0]["count"] == 2 and jobs[-1]["count"] == 6
    assert jobs[_interval_of(jobs, timedelta(hours=5))]["count"] == 4
    assert jobs[_interval_of(jobs, timedelta(hours=2))]["count"] == 5
    counts = [m["count"] for m in jobs]
    assert counts == sorted(counts)  # cumulative
    week = _stats(recent, "jobs", period="WEEK", timezone="Europe/Berlin")
    assert week[0]["count"] == 1 and week[-1]["count"] == 6  # only ancient (30 days ago) before the week
    datasets = _stats(recent, "datasets", period="WEEK")  # the time zone defaults to UTC here
    assert datasets[-1]["count"] == 4  # fragile_out, orders, old, report
    assert datasets[0]["count"] == 1  # old, 30 days ago
    sources = _stats(recent, "sources", period="DAY")
    # dataset namespaces: postgres://db:5432 (30 days ago), warehouse (3 days), s3://lake (5 hours)
    assert sources[0]["count"] == 2 and sources[-1]["count"] == 3
    assert sources[_interval_of(sources, timedelta(hours=5))]["count"] == 3


def test_an_empty_store_answers_zeros(client: TestClient) -> None:
    assert {m["complete"] for m in _stats(client, "lineage-events", period="DAY")} == {0}
    for what in ("jobs", "datasets", "sources"):
        assert {m["count"] for m in _stats(client, what, period="WEEK", timezone="Pacific/Chatham")} == {0}


@pytest.mark.parametrize(
    ("what", "params", "named"),
    [
        ("lineage-events", {"period": "MONTH"}, "period: 'MONTH'"),
        ("lineage-events", {}, "period"),
        ("lineage-events", {"period": "WEEK"}, "timezone must be given"),  # as Marquez: WEEK needs a zone
        ("jobs", {"period": "DAY", "timezone": "Mars/Olympus"}, "timezone: 'Mars/Olympus'"),
        ("datasets", {"period": "WEEK", "timezone": "../../etc/passwd"}, "timezone: '../../etc/passwd'"),
        ("sources", {"period": "YEAR"}, "period: 'YEAR'"),
    ],
)
def test_bad_parameters_answer_400_naming_the_value(client: TestClient, what: str, params: dict, named: str) -> None:
    answer = client.get(f"/api/v1/stats/{what}", params=params)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["detail"]


def test_a_namespace_limited_key_counts_only_its_namespaces(store_url: str) -> None:
    keys = (
        ApiKey("all", Access.ADMIN, "all-secret"),
        ApiKey("wh", Access.READ, "wh-secret", NamespaceScope(("warehouse", "pipelines"))),
    )
    app = create_app(store_url=store_url, keys=keys)
    everyone, limited = {"X-API-Key": "all-secret"}, {"X-API-Key": "wh-secret"}
    hour = timedelta(hours=1)
    try:
        with TestClient(app) as client:
            events = [
                run_event("COMPLETE", "load", time=_seconds_ago(hour), outputs=[dataset("orders")]),
                run_event("COMPLETE", "to_fin", time=_seconds_ago(hour), outputs=[dataset("ledger", "finance")]),
                run_event("FAIL", "close", time=_seconds_ago(hour), namespace="finance"),
            ]
            assert client.post("/api/v1/lineage/batch", json=events, headers=everyone).status_code == 200
            every = _stats(client, "lineage-events", everyone, period="DAY")
            assert sum(m["complete"] + m["fail"] for m in every) == 3
            seen = _stats(client, "lineage-events", limited, period="DAY")
            assert (sum(m["complete"] for m in seen), sum(m["fail"] for m in seen)) == (1, 0)
            assert _stats(client, "jobs", everyone, period="DAY")[-1]["count"] == 3
            assert _stats(client, "jobs", limited, period="DAY")[-1]["count"] == 2  # load, to_fin (pipelines)
            assert _stats(client, "datasets", limited, period="DAY")[-1]["count"] == 1
            assert _stats(client, "sources", limited, period="DAY")[-1]["count"] == 1
            assert _stats(client, "sources", everyone, period="DAY")[-1]["count"] == 2
    finally:
        app.state.store.dispose()


def test_a_source_is_the_datasource_facet_name_or_the_namespace(client: TestClient) -> None:
    event = run_event("COMPLETE", "load", time=_seconds_ago(timedelta(hours=1)), outputs=[dataset("a"), dataset("b")])
    event["outputs"][0]["facets"]["dataSource"] = {
        "_producer": "https://example.com",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
        "name": "pg-main",
        "uri": "postgres://db:5432",
    }
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    assert _stats(client, "sources", period="DAY")[-1]["count"] == 2  # pg-main (a) and warehouse (b)
    assert _stats(client, "datasets", period="DAY")[-1]["count"] == 2
