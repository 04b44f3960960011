"""Declared and observed lineage in the consumer, on SQLite and PostgreSQL.

JobEvents (lineage without a run) declare edges; RunEvents observe them. Graph answers flag every edge
``declared``/``observed`` and every node no RunEvent named ``declaredOnly``; ``declared=exclude|only`` chooses
the edges walked and drawn; ``GET /api/v1/drift`` lists, per declared job, declared edges not observed in the
last N days and observed edges never declared. Events are built with openlineage-python's ``event_v2`` classes
and serialized by ``Serde``, with times relative to now (the drift window is).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, JobEvent, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import symlinks_dataset
from openlineage.client.serde import Serde
from support.consumer_helpers import PRODUCER, graph_edges, graph_ids

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

NOW = datetime.now(timezone.utc)
JOBS, WAREHOUSE, LAKE = "pipelines", "warehouse", "lake"
ADMIN = {"X-API-Key": "admin-secret"}
PIPELINES_AND_WAREHOUSE = {"X-API-Key": "limited-secret"}
WAREHOUSE_ONLY = {"X-API-Key": "warehouse-secret"}
KEYS = (
    ApiKey("operator", Access.ADMIN, ADMIN["X-API-Key"]),
    ApiKey("limited", Access.READ, PIPELINES_AND_WAREHOUSE["X-API-Key"], NamespaceScope((JOBS, WAREHOUSE))),
    ApiKey("warehouse", Access.READ, WAREHOUSE_ONLY["X-API-Key"], NamespaceScope((WAREHOUSE,))),
)


def _when(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).isoformat()


def _datasets(names: list[str], kind: type) -> list[Any]:
    """Datasets ``namespace.name`` (``warehouse`` without a dot) as ``kind`` (InputDataset or OutputDataset)."""
    found = []
    for name in names:
        namespace, _, short = name.rpartition(".")
        found.append(kind(namespace=namespace or WAREHOUSE, name=short))
    return found


def declared(job: str, inputs: list[str], outputs: list[str], days_ago: float) -> dict[str, Any]:
    """A JobEvent declaring ``job``'s inputs and outputs (no run)."""
    event = JobEvent(
        eventTime=_when(days_ago),
        job=Job(namespace=JOBS, name=job),
        producer=PRODUCER,
        inputs=_datasets(inputs, InputDataset),
        outputs=_datasets(outputs, OutputDataset),
    )
    return json.loads(Serde.to_json(event))


def observed(job: str, inputs: list[str], outputs: list[str], days_ago: float) -> dict[str, Any]:
    """A COMPLETE RunEvent of ``job`` reading ``inputs`` and writing ``outputs``."""
    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=_when(days_ago),
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace=JOBS, name=job),
        producer=PRODUCER,
        inputs=_datasets(inputs, InputDataset),
        outputs=_datasets(outputs, OutputDataset),
    )
    return json.loads(Serde.to_json(event))


#: ``load`` declares src → load → dst, planned and lake.hidden and runs reading src, writing dst and extra;
#: ``design_only`` is declared and never ran; ``stale`` was declared and last ran 20 days ago; ``adhoc`` ran
#: and was never declared.
EVENTS = [
    declared("load", ["src"], ["dst", "planned", "lake.hidden"], days_ago=1),
    observed("load", ["src"], ["dst", "extra"], days_ago=2),
    declared("design_only", ["dst"], ["future"], days_ago=1),
    declared("stale", [], ["stale_out"], days_ago=1),
    observed("stale", [], ["stale_out"], days_ago=20),
    observed("adhoc", ["dst"], ["adhoc_out"], days_ago=1),
]


@pytest.fixture
def keyed(store_url: str) -> Iterator[TestClient]:
    """A keyed consumer on ``store_url`` holding :data:`EVENTS`."""
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        answer = client.post("/api/v1/lineage", json=EVENTS, headers=ADMIN)
        assert answer.status_code in (200, 201), answer.text
        yield client
    app.state.store.dispose()


def _graph(client: TestClient, node: str, **params: Any) -> dict[str, Any]:
    answer = client.get("/api/v1/lineage", params={"nodeId": node, "depth": 5, **params}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _flags(graph: dict[str, Any]) -> dict[tuple[str, str], tuple[bool, bool]]:
    """``(origin, destination) → (declared, observed)`` of every edge, the same at both of its ends."""
    out = {
        (e["origin"], e["destination"]): (e["declared"], e["observed"]) for n in graph["graph"] for e in n["outEdges"]
    }
    into = {
        (e["origin"], e["destination"]): (e["declared"], e["observed"]) for n in graph["graph"] for e in n["inEdges"]
    }
    assert out == into
    return out


def _declared_only(graph: dict[str, Any]) -> set[str]:
    marked = {node["id"] for node in graph["graph"] if node.get("declaredOnly")}
    assert all(node.get("declaredOnly", True) is True for node in graph["graph"])  # true or left out
    return marked


LOAD, SRC, DST = f"job:{JOBS}:load", f"dataset:{WAREHOUSE}:src", f"dataset:{WAREHOUSE}:dst"
PLANNED, EXTRA = f"dataset:{WAREHOUSE}:planned", f"dataset:{WAREHOUSE}:extra"
DESIGN_ONLY, FUTURE = f"job:{JOBS}:design_only", f"dataset:{WAREHOUSE}:future"
HIDDEN = f"dataset:{LAKE}:hidden"


def test_every_edge_says_whether_it_was_declared_observed_or_both(keyed: TestClient) -> None:
    flags = _flags(_graph(keyed, LOAD, direction="both"))
    assert flags[(SRC, LOAD)] == (True, True)  # declared and observed
    assert flags[(LOAD, DST)] == (True, True)
    assert flags[(LOAD, PLANNED)] == (True, False)  # declared only
    assert flags[(LOAD, HIDDEN)] == (True, False)
    assert flags[(LOAD, EXTRA)] == (False, True)  # observed only
    assert flags[(DST, DESIGN_ONLY)] == (True, False)
    assert flags[(DST, f"job:{JOBS}:adhoc")] == (False, True)


def test_the_whole_graph_listing_says_the_same_of_every_edge(keyed: TestClient) -> None:
    page = keyed.get("/api/v1/graph", params={"limit": 10_000}, headers=ADMIN).json()
    flags = {(e["origin"], e["destination"]): (e["declared"], e["observed"]) for e in page["edges"]}
    walked = _flags(_graph(keyed, LOAD, direction="both"))
    assert flags[(LOAD, PLANNED)] == (True, False) and flags[(LOAD, EXTRA)] == (False, True)
    assert {pair: flags[pair] for pair in walked} == walked


def test_nodes_no_run_named_are_marked_declared_only(keyed: TestClient) -> None:
    graph = _graph(keyed, LOAD, direction="both")
    assert _declared_only(graph) == {PLANNED, HIDDEN, DESIGN_ONLY, FUTURE}
    assert {SRC, DST, EXTRA, LOAD} <= graph_ids(graph)


def test_declared_exclude_leaves_out_declared_only_edges_and_what_only_they_reach(keyed: TestClient) -> None:
    graph = _graph(keyed, LOAD, direction="both", declared="exclude")
    assert graph_ids(graph) == {SRC, LOAD, DST, EXTRA, f"job:{JOBS}:adhoc", f"dataset:{WAREHOUSE}:adhoc_out"}
    assert all(observed for _declared, observed in _flags(graph).values())
    assert _declared_only(graph) == set()
    # the root itself is always shown, even when known only by declaration
    assert graph_ids(_graph(keyed, DESIGN_ONLY, direction="both", declared="exclude")) == {DESIGN_ONLY}


def test_declared_only_keeps_the_declared_graph(keyed: TestClient) -> None:
    graph = _graph(keyed, LOAD, direction="both", declared="only")
    assert graph_ids(graph) == {SRC, LOAD, DST, PLANNED, HIDDEN, DESIGN_ONLY, FUTURE}
    assert graph_edges(graph) == {(SRC, LOAD), (LOAD, DST), (LOAD, PLANNED), (LOAD, HIDDEN), (DST, DESIGN_ONLY),
                                  (DESIGN_ONLY, FUTURE)}  # fmt: skip
    assert all(declared for declared, _observed in _flags(graph).values())


def test_include_is_the_default_and_a_bad_value_is_refused(keyed: TestClient) -> None:
    assert _graph(keyed, LOAD, direction="both") == _graph(keyed, LOAD, direction="both", declared="include")
    answer = keyed.get("/api/v1/lineage", params={"nodeId": LOAD, "declared": "maybe"}, headers=ADMIN)
    assert answer.status_code in (400, 422)


def test_a_run_observing_a_declared_edge_makes_it_both_in_the_next_answer(keyed: TestClient) -> None:
    """The graph cards are cached by node version: the change must show through them."""
    before = _graph(keyed, LOAD, direction="downstream")
    assert _flags(before)[(LOAD, PLANNED)] == (True, False) and PLANNED in _declared_only(before)
    answer = keyed.post("/api/v1/lineage", json=observed("load", [], ["planned"], days_ago=0.5), headers=ADMIN)
    assert answer.status_code in (200, 201)
    after = _graph(keyed, LOAD, direction="downstream")
    assert _flags(after)[(LOAD, PLANNED)] == (True, True)
    assert PLANNED not in _declared_only(after)
    assert after["graph"] != before["graph"]


def _drift(client: TestClient, headers: dict[str, str] = ADMIN, **params: Any) -> dict[str, Any]:
    answer = client.get("/api/v1/drift", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _summary(body: dict[str, Any]) -> dict[str, tuple[set[str], set[str]]]:
    """``job name → (declared not observed, observed not declared)`` as ``direction namespace.name``."""
    return {
        job["job"]["name"]: tuple(  # type: ignore[misc]
            {f"{e['direction']} {e['namespace']}.{e['name']}" for e in job[member]}
            for member in ("declaredNotObserved", "observedNotDeclared")
        )
        for job in body["jobs"]
    }


def test_drift_lists_both_directions_per_declared_job_within_the_window(keyed: TestClient) -> None:
    week = _drift(keyed, days=7)
    assert week["totalCount"] == 3
    assert [job["job"] for job in week["jobs"]] == [
        {"namespace": JOBS, "name": name} for name in ("design_only", "load", "stale")
    ]  # namespace, name order; adhoc was never declared: no drift
    assert _summary(week) == {
        "load": (
            {"output warehouse.planned", "output lake.hidden"},
            {"output warehouse.extra"},
        ),
        "design_only": ({"input warehouse.dst", "output warehouse.future"}, set()),
        "stale": ({"output warehouse.stale_out"}, set()),  # last observed 20 days ago
    }
    load = next(job for job in week["jobs"] if job["job"]["name"] == "load")
    planned = next(e for e in load["declaredNotObserved"] if e["name"] == "planned")
    assert planned["lastObservedAt"] is None and planned["declaredAt"].startswith(_when(1)[:10])
    extra = load["observedNotDeclared"][0]
    assert extra["declaredAt"] is None and extra["lastObservedAt"].startswith(_when(2)[:10])
    stale = week["jobs"][2]["declaredNotObserved"][0]
    assert stale["lastObservedAt"].startswith(_when(20)[:10])


def test_the_window_decides_what_counts_as_observed(keyed: TestClient) -> None:
    month = _summary(_drift(keyed, days=30))
    assert "stale" not in month  # observed 20 days ago: within 30 days
    day = _summary(_drift(keyed, days=1))  # load's run was 2 days ago: nothing of it is recent
    assert day["load"] == (
        {"input warehouse.src", "output warehouse.dst", "output warehouse.planned", "output lake.hidden"},
        set(),
    )


def test_drift_pages_and_filters_by_namespace(keyed: TestClient) -> None:
    page = _drift(keyed, days=7, limit=1, offset=1)
    assert page["totalCount"] == 3 and [job["job"]["name"] for job in page["jobs"]] == ["load"]
    assert _drift(keyed, days=7, namespace="elsewhere") == {"jobs": [], "totalCount": 0}
    assert _drift(keyed, days=7, namespace=JOBS)["totalCount"] == 3


def test_a_namespace_limited_key_sees_only_its_namespaces(keyed: TestClient) -> None:
    limited = _summary(_drift(keyed, PIPELINES_AND_WAREHOUSE, days=7))
    assert limited["load"] == ({"output warehouse.planned"}, {"output warehouse.extra"})  # lake is hidden
    assert set(limited) == {"load", "design_only", "stale"}
    assert _drift(keyed, WAREHOUSE_ONLY, days=7) == {"jobs": [], "totalCount": 0}  # the jobs are hidden
    graph = keyed.get("/api/v1/lineage", params={"nodeId": LOAD, "depth": 5}, headers=PIPELINES_AND_WAREHOUSE).json()
    assert HIDDEN not in graph_ids(graph) and PLANNED in _declared_only(graph)


def test_drift_needs_a_key(keyed: TestClient) -> None:
    assert keyed.get("/api/v1/drift").status_code == 401


def test_a_dataset_known_under_two_names_merges_the_flags_of_the_edges_drawn_to_it(client: TestClient) -> None:
    """In a store with dataset groups (symlinks), a JobEvent declaring ``load2`` writes ``warehouse.dst2`` and a
    run of ``load2`` writing the files that name symlinks to it are one edge, drawn once: declared and observed."""
    run = observed("load2", [], [], days_ago=2)
    run["outputs"] = [
        json.loads(
            Serde.to_json(
                OutputDataset(
                    namespace="file",
                    name="/data/dst2",
                    facets={
                        "symlinks": symlinks_dataset.SymlinksDatasetFacet(
                            identifiers=[symlinks_dataset.Identifier(namespace=WAREHOUSE, name="dst2", type="TABLE")]
                        )
                    },
                )
            )
        )
    ]
    events = [declared("load2", [], ["dst2"], days_ago=1), run, declared("reader2", ["dst2"], [], days_ago=1)]
    assert client.post("/api/v1/lineage", json=events).status_code in (200, 201)
    graph = client.get("/api/v1/lineage", params={"nodeId": f"job:{JOBS}:load2", "depth": 3}).json()
    shown = [node["id"] for node in graph["graph"] if node["type"] == "DATASET"]
    assert len(shown) == 1  # one node for both names
    flags = _flags(graph)
    assert flags == {(f"job:{JOBS}:load2", shown[0]): (True, True), (shown[0], f"job:{JOBS}:reader2"): (True, False)}
    assert _declared_only(graph) == {f"job:{JOBS}:reader2"}
    excluded = client.get(
        "/api/v1/lineage", params={"nodeId": f"job:{JOBS}:load2", "depth": 3, "declared": "exclude"}
    ).json()
    assert graph_ids(excluded) == {f"job:{JOBS}:load2", shown[0]}
