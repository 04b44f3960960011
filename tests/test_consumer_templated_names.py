"""Templated declared names matched to the names runs report, on SQLite and PostgreSQL.

A task declaring ``totals_{{ ds_nodash }}`` (a JobEvent whose dataset carries the templatedName facet) and
writing ``totals_20260201`` when it runs: the rendering's edge is declared and observed, the pattern's edge
stays declared-only in graph answers, and drift lists neither while a rendering was observed in the window.
Matching is by the template's own rendering regex (date macros as digits), in the same job and direction only,
whichever of the JobEvent and the RunEvent arrives first; a store upgraded from version 9 is matched too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, JobEvent, OutputDataset
from openlineage.client.serde import Serde
from support.consumer_helpers import PRODUCER
from support.olschema import assert_valid_event, shared_available

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey
from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event
from airflow_lineage_provider.facets.design_time import TEMPLATED_NAME_KEY, TemplatedNameDatasetFacet
from airflow_lineage_provider.name_templates import MAX_FREE_PARTS, name_regex, rendering_regex

pytest_plugins = ("support.consumer_fixtures",)

NOW = datetime.now(timezone.utc)
JOBS, WAREHOUSE = "pipelines", "warehouse"
ADMIN = {"X-API-Key": "admin-secret"}
KEYS = (ApiKey("operator", Access.ADMIN, ADMIN["X-API-Key"]),)
TEMPLATE = "totals_{{ ds_nodash }}"


def _when(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).isoformat()


def _checked(event: Any) -> dict[str, Any]:
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _templated(name: str, kind: type, facet_regex: str | None = None) -> Any:
    facet = TemplatedNameDatasetFacet(
        nameTemplate=name, nameRegex=facet_regex or name_regex(name), variables=["ds_nodash"]
    )
    return kind(namespace=WAREHOUSE, name=name, facets={TEMPLATED_NAME_KEY: facet})


def declared(job: str, outputs: list[str], days_ago: float, inputs: list[str] = (), **kw: Any) -> dict[str, Any]:  # type: ignore[assignment]
    """A JobEvent of ``job``; a name holding ``{{`` is declared as a template (with the templatedName facet)."""

    def datasets(names: list[str], kind: type) -> list[Any]:
        return [_templated(n, kind, **kw) if "{{" in n else kind(namespace=WAREHOUSE, name=n) for n in names]

    event = JobEvent(
        eventTime=_when(days_ago),
        job=Job(namespace=JOBS, name=job),
        producer=PRODUCER,
        inputs=datasets(list(inputs), InputDataset),
        outputs=datasets(outputs, OutputDataset),
    )
    return _checked(event)


def observed(job: str, outputs: list[str], days_ago: float, inputs: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """A COMPLETE RunEvent of ``job`` (outputs first: most tests here need only those)."""
    from test_consumer_declared import observed as run_of

    return run_of(job, list(inputs), outputs, days_ago)


@pytest.fixture
def consumer(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


def _post(client: TestClient, *events: dict[str, Any]) -> None:
    for event in events:  # one request each: the ingest matches across requests, not only within a batch
        answer = client.post("/api/v1/lineage", json=event, headers=ADMIN)
        assert answer.status_code in (200, 201), answer.text


def _drift(client: TestClient, days: int = 7) -> dict[str, tuple[set[str], set[str]]]:
    answer = client.get("/api/v1/drift", params={"days": days}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["totalCount"] == len(body["jobs"])
    return {
        job["job"]["name"]: tuple(  # type: ignore[misc]
            {f"{e['direction']} {e['name']}" for e in job[member]}
            for member in ("declaredNotObserved", "observedNotDeclared")
        )
        for job in body["jobs"]
    }


def _flags(client: TestClient, job: str) -> dict[str, tuple[bool, bool]]:
    """``dataset name → (declared, observed)`` of ``job``'s output edges, each rendering drawn as itself."""
    params = {"nodeId": f"job:{JOBS}:{job}", "depth": 1, "direction": "downstream", "renderings": "expanded"}
    answer = client.get("/api/v1/lineage", params=params, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    found = {}
    for node in answer.json()["graph"]:
        for edge in node["outEdges"]:
            if edge["origin"] == f"job:{JOBS}:{job}":
                found[edge["destination"].rpartition(":")[2]] = (edge["declared"], edge["observed"])
    return found


@pytest.mark.parametrize("order", ["declared first", "observed first"])
def test_a_rendering_is_declared_by_the_pattern_and_neither_drifts(consumer: TestClient, order: str) -> None:
    declaration = declared("summarize", [TEMPLATE], days_ago=3)
    run = observed("summarize", ["totals_20260201"], days_ago=1)
    _post(consumer, *((declaration, run) if order == "declared first" else (run, declaration)))
    assert _drift(consumer) == {}
    assert _flags(consumer, "summarize") == {
        "totals_20260201": (True, True),  # declared through the pattern, and written
        TEMPLATE: (True, False),  # no run wrote a dataset of that name
    }


def test_a_name_the_template_cannot_render_stays_drift_both_ways(consumer: TestClient) -> None:
    """``{{ ds_nodash }}`` renders as eight digits: ``totals_summary`` is not a rendering of it."""
    _post(consumer, declared("summarize", [TEMPLATE], days_ago=3), observed("summarize", ["totals_summary"], 1))
    assert _drift(consumer) == {"summarize": ({f"output {TEMPLATE}"}, {"output totals_summary"})}


def test_the_events_regex_is_not_trusted(consumer: TestClient) -> None:
    """The facet's ``nameRegex`` comes from whoever sent the event: the consumer derives its own from the
    template (here the event's regex would match anything)."""
    _post(
        consumer,
        declared("summarize", [TEMPLATE], days_ago=3, facet_regex="^.*$"),
        observed("summarize", ["totals_summary"], days_ago=1),
    )
    assert "output totals_summary" in _drift(consumer)["summarize"][1]


def test_only_the_declaring_jobs_edges_in_the_same_direction_are_matched(consumer: TestClient) -> None:
    _post(
        consumer,
        declared("summarize", [TEMPLATE], days_ago=3),
        declared("report", ["report_out"], days_ago=3),
        observed("report", ["report_out"], days_ago=1, inputs=["totals_20260201"]),  # another job, reading
        observed("summarize", [], days_ago=1, inputs=["totals_20260202"]),  # the same job, reading
    )
    assert _drift(consumer) == {
        "summarize": ({f"output {TEMPLATE}"}, {"input totals_20260202"}),
        "report": (set(), {"input totals_20260201"}),
    }


def test_a_rendering_observed_before_the_window_leaves_the_pattern_unobserved(consumer: TestClient) -> None:
    _post(consumer, declared("summarize", [TEMPLATE], days_ago=3), observed("summarize", ["totals_20260101"], 20))
    assert _drift(consumer, days=7) == {"summarize": ({f"output {TEMPLATE}"}, set())}
    assert _drift(consumer, days=30) == {}


def test_an_input_pattern_is_matched_as_an_output_is(consumer: TestClient) -> None:
    _post(
        consumer,
        declared("weekly", ["weekly_out"], days_ago=3, inputs=["events_{{ ds }}"]),
        observed("weekly", ["weekly_out"], days_ago=1, inputs=["events_2026-02-01", "events_2026-02-02"]),
    )
    assert _drift(consumer) == {}


def test_a_namespace_reset_takes_its_patterns_and_renderings(consumer: TestClient) -> None:
    _post(consumer, declared("summarize", [TEMPLATE], days_ago=3), observed("summarize", ["totals_20260201"], 1))
    store = consumer.app.state.store  # type: ignore[attr-defined]

    def counts() -> list[int]:
        with store.read() as conn:  # through the read barrier (deferred apply)
            return [
                conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()
                for table in (tables.name_patterns, tables.pattern_renderings)
            ]

    assert counts() == [1, 1]
    answer = consumer.post("/api/v1/reset", params={"namespace": WAREHOUSE}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert counts() == [0, 0]


@pytest.mark.parametrize(
    ("template", "rendered", "matches"),
    [
        ("totals_{{ ds_nodash }}", "totals_20260201", True),
        ("totals_{{ ds_nodash }}", "totals_summary", False),
        ("t_{{ ds }}_{{ ti.map_index }}", "t_2026-02-01_3", True),
        ("t_{{ ts_nodash }}", "t_20260201T120000", True),
        ("t_{{ params.region }}", "t_eu", True),  # any other expression: any text
        ("t_{{ params.region }}_{{ ds_nodash }}", "t_eu_x", False),
        ("t_{# note #}{{ ds_nodash }}", "t_20260201", True),
        ("a.b_{{ ds }}", "aXb_2026-02-01", False),  # literal parts are escaped
    ],
)
def test_the_rendering_regex(template: str, rendered: str, matches: bool) -> None:
    regex = rendering_regex(template, MAX_FREE_PARTS)
    assert regex is not None and bool(re.match(regex, rendered, re.DOTALL)) is matches


def test_a_template_with_too_many_free_parts_is_not_matched() -> None:
    assert rendering_regex("{{ a }}_{{ b }}_{{ c }}", MAX_FREE_PARTS) is None
    assert rendering_regex("{{ a }}_{{ b }}_{{ ds }}", MAX_FREE_PARTS) is not None


def test_a_version_9_store_matches_its_stored_renderings_on_upgrade(store_url: str) -> None:
    from test_consumer_store import _to_version_9

    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        events = [declared("summarize", [TEMPLATE], days_ago=3), observed("summarize", ["totals_20260201"], 1)]
        with engine.begin() as conn:
            ingest_events(conn, [parse_event(event) for event in events])
            # Back to version 9: no pattern tables, no setting, the rendering's edge not declared.
            _to_version_9(conn)
            conn.execute(tables.edges.update().where(tables.edges.c.observed_at.is_not(None)).values(declared_at=None))
            conn.execute(tables.schema_version.update().values(version=9))
        assert migrate(engine) == LATEST
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.pattern_renderings)).scalar() == 1
            undeclared = sa.select(sa.func.count()).where(tables.edges.c.declared_at.is_(None))
            assert conn.execute(undeclared.select_from(tables.edges)).scalar() == 0
    finally:
        engine.dispose()
