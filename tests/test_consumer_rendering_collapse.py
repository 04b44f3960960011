"""Renderings of a templated name drawn as one node, on SQLite and PostgreSQL (docs/declared-lineage.md).

``summarize`` declares ``totals_{{ ds_nodash }}`` and wrote a partition a day; ``report`` reads one of them.
Graph answers draw the partitions as the pattern's node, with how many there are and the latest, the edges to
and from them drawn to and from the pattern once; ``renderings=expanded`` or ``expand=<pattern>`` draws them
each; listings show them unless asked ``renderings=collapsed``; a key limited to namespaces never sees the name
of a rendering it cannot see.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, JobEvent, OutputDataset, Run, RunEvent, RunState
from openlineage.client.generated import symlinks_dataset
from openlineage.client.serde import Serde
from support.consumer_helpers import PRODUCER
from support.olschema import assert_valid_event, shared_available

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.facets.design_time import TEMPLATED_NAME_KEY, TemplatedNameDatasetFacet
from airflow_lineage_provider.name_templates import name_regex

pytest_plugins = ("support.consumer_fixtures",)

NOW = datetime.now(timezone.utc)
JOBS, WAREHOUSE = "pipelines", "warehouse"
TEMPLATE = "totals_{{ ds_nodash }}"
PATTERN = f"dataset:{WAREHOUSE}:{TEMPLATE}"
ADMIN = {"X-API-Key": "admin-secret"}
LIMITED = {"X-API-Key": "limited-secret"}
LAKE_TEMPLATE = "lake_{{ params.region }}"
KEYS = (
    ApiKey("operator", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("limited", Access.READ, LIMITED["X-API-Key"], NamespaceScope((JOBS, WAREHOUSE, "lake_{*", "lake_eu"))),
)
DAYS = [f"202602{day:02d}" for day in range(1, 6)]


def _checked(event: Any) -> dict[str, Any]:
    data = json.loads(Serde.to_json(event))
    if shared_available():
        assert_valid_event(data)
    return data


def _when(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).isoformat()


def _pattern(namespace: str, name: str, kind: type) -> Any:
    templated = "{{" in namespace
    facet = TemplatedNameDatasetFacet(
        nameTemplate=name,
        nameRegex=name_regex(name),
        variables=["ds_nodash"],
        namespaceTemplate=namespace if templated else None,
        namespaceRegex=name_regex(namespace) if templated else None,
    )
    return kind(namespace=namespace, name=name, facets={TEMPLATED_NAME_KEY: facet})


def declared(job: str, outputs: list[Any], days_ago: float) -> dict[str, Any]:
    """A JobEvent of ``job`` declaring ``outputs`` (datasets)."""
    event = JobEvent(
        eventTime=_when(days_ago), job=Job(namespace=JOBS, name=job), producer=PRODUCER, inputs=[], outputs=outputs
    )
    return _checked(event)


def ran(job: str, days_ago: float, inputs: list[tuple[str, str]] = (), outputs: list[tuple[str, str]] = ()) -> Any:  # type: ignore[assignment]
    """A COMPLETE RunEvent of ``job`` reading and writing ``(namespace, name)`` datasets."""
    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=_when(days_ago),
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace=JOBS, name=job),
        producer=PRODUCER,
        inputs=[InputDataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[OutputDataset(namespace=ns, name=name) for ns, name in outputs],
    )
    return _checked(event)


def _post(client: TestClient, *events: dict[str, Any]) -> None:
    for event in events:
        answer = client.post("/api/v1/lineage", json=event, headers=ADMIN)
        assert answer.status_code in (200, 201), answer.text


@pytest.fixture
def consumer(store_url: str) -> Iterator[TestClient]:
    """``summarize`` declared ``totals_{{ ds_nodash }}`` and wrote :data:`DAYS` (one a day, the last most
    recently); ``report`` read the third, before the last two were written, and wrote ``report_out``."""
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        _post(client, declared("summarize", [_pattern(WAREHOUSE, TEMPLATE, OutputDataset)], days_ago=10))
        for age, day in zip(range(len(DAYS), 0, -1), DAYS, strict=True):
            _post(client, ran("summarize", age, outputs=[(WAREHOUSE, f"totals_{day}")]))
        _post(
            client, ran("report", 2.5, inputs=[(WAREHOUSE, f"totals_{DAYS[2]}")], outputs=[(WAREHOUSE, "report_out")])
        )
        yield client
    app.state.store.dispose()


def _graph(client: TestClient, node: str, headers: dict[str, str] = ADMIN, **params: Any) -> dict[str, Any]:
    answer = client.get("/api/v1/lineage", params={"nodeId": node, "depth": 2, **params}, headers=headers)
    assert answer.status_code == 200, answer.text
    return {item["id"]: item for item in answer.json()["graph"]}


def _edges(graph: dict[str, Any]) -> dict[tuple[str, str], tuple[bool, bool]]:
    """Every edge ``(origin, destination) → (declared, observed)``, checked to agree at both ends."""
    ends = [
        {(e["origin"], e["destination"]): (e["declared"], e["observed"]) for n in graph.values() for e in n[key]}
        for key in ("outEdges", "inEdges")
    ]
    assert ends[0] == ends[1]
    return ends[0]


def _rendering(day: str, namespace: str = WAREHOUSE) -> str:
    return f"dataset:{namespace}:totals_{day}"


def test_the_renderings_are_one_node_with_their_count_and_latest(consumer: TestClient) -> None:
    graph = _graph(consumer, f"job:{JOBS}:summarize", direction="downstream")
    assert set(graph) == {f"job:{JOBS}:summarize", PATTERN, f"job:{JOBS}:report", f"dataset:{WAREHOUSE}:report_out"}
    renderings = graph[PATTERN]["data"]["renderings"]
    assert renderings["count"] == len(DAYS) and "expanded" not in renderings
    assert (renderings["latest"]["namespace"], renderings["latest"]["name"]) == (WAREHOUSE, f"totals_{DAYS[-1]}")
    assert renderings["latest"]["updatedAt"].endswith("Z")
    assert "declaredOnly" not in graph[PATTERN]  # the partitions it stands for were written
    assert _edges(graph) == {
        (f"job:{JOBS}:summarize", PATTERN): (True, True),  # the pattern's declared edge and the written ones, once
        (PATTERN, f"job:{JOBS}:report"): (False, True),  # what a rendering feeds, fed by the pattern
        (f"job:{JOBS}:report", f"dataset:{WAREHOUSE}:report_out"): (False, True),
    }
    assert all("renderings" not in node["data"] for node_id, node in graph.items() if node_id != PATTERN)


def test_expanded_every_rendering_is_its_own_node(consumer: TestClient) -> None:
    asked: list[dict[str, Any]] = [{"renderings": "expanded"}, {"expand": PATTERN}]
    for params in asked:
        graph = _graph(consumer, f"job:{JOBS}:summarize", direction="downstream", **params)
        assert {_rendering(day) for day in DAYS} <= set(graph)
        assert graph[PATTERN]["data"]["renderings"]["expanded"] is True
        assert graph[PATTERN]["declaredOnly"] is True
        edges = _edges(graph)
        assert edges[(f"job:{JOBS}:summarize", PATTERN)] == (True, False)
        assert edges[(_rendering(DAYS[2]), f"job:{JOBS}:report")] == (False, True)


def test_expanding_another_pattern_leaves_this_one_collapsed(consumer: TestClient) -> None:
    graph = _graph(consumer, f"job:{JOBS}:summarize", expand=f"dataset:{WAREHOUSE}:other_{{{{ ds }}}}")
    assert not any(node_id.startswith(f"dataset:{WAREHOUSE}:totals_2") for node_id in graph)


def test_a_walk_from_the_pattern_reaches_what_its_renderings_feed(consumer: TestClient) -> None:
    graph = _graph(consumer, PATTERN, direction="downstream", depth=1)
    assert set(graph) == {PATTERN, f"job:{JOBS}:report", f"dataset:{WAREHOUSE}:report_out"}
    expanded = _graph(consumer, PATTERN, direction="downstream", depth=1, renderings="expanded")
    assert _rendering(DAYS[2]) in expanded and f"dataset:{WAREHOUSE}:report_out" in expanded


def test_a_walk_from_a_rendering_shows_it_as_itself(consumer: TestClient) -> None:
    graph = _graph(consumer, _rendering(DAYS[2]), depth=1)
    assert _rendering(DAYS[2]) in graph and "renderings" not in graph[_rendering(DAYS[2])]["data"]
    assert (_rendering(DAYS[2]), f"job:{JOBS}:report") in _edges(graph)


def test_the_graph_listing_collapses_renderings_unless_expanded(consumer: TestClient) -> None:
    def listing(**params: Any) -> dict[str, Any]:
        answer = consumer.get("/api/v1/graph", params={"limit": 100, **params}, headers=ADMIN)
        assert answer.status_code == 200, answer.text
        return answer.json()

    collapsed, expanded = listing(), listing(renderings="expanded")
    assert expanded["totalCount"] - collapsed["totalCount"] == len(DAYS)
    nodes = {node["id"]: node for node in collapsed["nodes"]}
    assert not any(node_id.startswith(f"dataset:{WAREHOUSE}:totals_2") for node_id in nodes)
    assert nodes[PATTERN]["data"]["renderings"]["count"] == len(DAYS)
    edges = {(e["origin"], e["destination"]): (e["declared"], e["observed"]) for e in collapsed["edges"]}
    assert edges[(f"job:{JOBS}:summarize", PATTERN)] == (True, True)
    assert edges[(PATTERN, f"job:{JOBS}:report")] == (False, True)
    assert len(collapsed["edges"]) == len(edges) == 3
    assert {_rendering(day) for day in DAYS} <= {node["id"] for node in expanded["nodes"]}


def test_listings_show_renderings_unless_collapsed(consumer: TestClient) -> None:
    def names(path: str, key: str, **params: Any) -> set[str]:
        answer = consumer.get(path, params=params, headers=ADMIN)
        assert answer.status_code == 200, answer.text
        return {item["name"] for item in answer.json()[key]}

    every = {f"totals_{day}" for day in DAYS}
    assert every | {TEMPLATE} <= names("/api/v1/datasets", "datasets")
    assert names("/api/v1/datasets", "datasets", renderings="collapsed") == {TEMPLATE, "report_out"}
    assert every | {TEMPLATE} == names("/api/v1/search", "results", q="totals")
    assert names("/api/v1/search", "results", q="totals", renderings="collapsed") == {TEMPLATE}
    refused = consumer.get("/api/v1/datasets", params={"renderings": "folded"}, headers=ADMIN)
    assert refused.status_code in (400, 422), refused.text


def test_a_limited_key_never_sees_a_hidden_renderings_name(consumer: TestClient) -> None:
    """A templated namespace renders into ``lake_eu`` (visible to the key) and ``lake_us`` (hidden), the hidden
    one written last: the key's answers count and name the visible one only."""
    _post(
        consumer,
        declared("export", [_pattern(LAKE_TEMPLATE, TEMPLATE, OutputDataset)], days_ago=10),
        ran("export", 2, outputs=[("lake_eu", f"totals_{DAYS[0]}")]),
        ran("export", 1, outputs=[("lake_us", f"totals_{DAYS[1]}")]),
    )
    pattern = f"dataset:{LAKE_TEMPLATE}:{TEMPLATE}"
    admin = _graph(consumer, f"job:{JOBS}:export")[pattern]["data"]["renderings"]
    assert admin["count"] == 2 and admin["latest"]["namespace"] == "lake_us"
    for params in ({}, {"renderings": "expanded"}):
        answer = consumer.get(
            "/api/v1/lineage", params={"nodeId": f"job:{JOBS}:export", "depth": 2, **params}, headers=LIMITED
        )
        assert answer.status_code == 200, answer.text
        assert "lake_us" not in answer.text
        graph = {item["id"]: item for item in answer.json()["graph"]}
        limited = graph[pattern]["data"]["renderings"]
        assert limited["count"] == 1 and limited["latest"]["namespace"] == "lake_eu"
    listing = consumer.get("/api/v1/graph", params={"limit": 100}, headers=LIMITED)
    assert listing.status_code == 200 and "lake_us" not in listing.text


def test_a_rendering_of_two_patterns_is_drawn_as_the_lowest(consumer: TestClient) -> None:
    """``both_{{ ds_nodash }}`` and ``both_{{ params.x }}`` (any text) both render ``both_20260201``."""
    templates = ["both_{{ ds_nodash }}", "both_{{ params.x }}"]
    _post(
        consumer,
        declared("twice", [_pattern(WAREHOUSE, name, OutputDataset) for name in templates], days_ago=10),
        ran("twice", 1, outputs=[(WAREHOUSE, "both_20260201")]),
    )
    store = consumer.app.state.store  # type: ignore[attr-defined]
    with store.read() as conn:
        n = tables.nodes.c
        ids = dict(conn.execute(sa.select(n.name, n.id).where(n.name.in_(templates))).all())
    lowest = min(templates, key=lambda name: ids[name])
    graph = _graph(consumer, f"job:{JOBS}:twice")
    assert f"dataset:{WAREHOUSE}:both_20260201" not in graph
    observed = {destination for (_, destination), (_, seen) in _edges(graph).items() if seen}
    assert observed == {f"dataset:{WAREHOUSE}:{lowest}"}
    assert all(graph[f"dataset:{WAREHOUSE}:{name}"]["data"]["renderings"]["count"] == 1 for name in templates)


def test_renderings_collapse_in_a_store_with_datasets_known_under_several_names(consumer: TestClient) -> None:
    """``report_out`` is also the metastore's ``default.report_out`` (a symlink), which ``audit`` reads: the walks
    go through groups."""
    symlinks = symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[symlinks_dataset.Identifier(namespace="hive://metastore", name="default.report_out", type="TABLE")]
    )
    event = _checked(
        RunEvent(
            eventType=RunState.COMPLETE,
            eventTime=_when(0.2),
            run=Run(runId=str(uuid.uuid4())),
            job=Job(namespace=JOBS, name="report"),
            producer=PRODUCER,
            outputs=[OutputDataset(namespace=WAREHOUSE, name="report_out", facets={"symlinks": symlinks})],
        )
    )
    _post(consumer, event, ran("audit", 0.1, inputs=[("hive://metastore", "default.report_out")]))
    graph = _graph(consumer, f"job:{JOBS}:summarize", direction="downstream")
    assert any("aliases" in node["data"] for node in graph.values())  # report_out shown as its group
    assert not any(node_id.startswith(f"dataset:{WAREHOUSE}:totals_2") for node_id in graph)
    assert graph[PATTERN]["data"]["renderings"]["count"] == len(DAYS)
    assert _edges(graph)[(PATTERN, f"job:{JOBS}:report")] == (False, True)
