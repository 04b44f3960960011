"""A read key limited to namespace patterns never sees a node outside them — on SQLite and PostgreSQL.

The graph crosses the boundary twice::

    warehouse.src_orders -> pipelines.load_fin -> finance.fin_orders -> pipelines.report -> warehouse.rpt_orders
    warehouse.src_orders -> pipelines.copy -> warehouse.copy_orders
    warehouse.src_orders -> pipelines.export -> finance.fin_export          (a JobEvent: no run)
    finance.fin_orders -> finance.close_books -> finance.fin_summary

with column lineage along (``id`` of src_orders -> fin_orders -> rpt_orders, and src_orders -> copy_orders).
The key ``wh`` sees ``warehouse`` and the jobs (``pipe*``): its walks go through the jobs and stop at
``finance``, so ``rpt_orders`` — visible itself — must not be reached through ``fin_orders``. The key
``wh-only`` sees ``warehouse`` alone (jobs hidden too); ``all`` sees everything.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import PRODUCER, T0, dataset, dataset_event, graph_edges, graph_ids, job_event, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

ALL = {"X-API-Key": "all-namespaces-secret"}
WH = {"X-API-Key": "warehouse-and-jobs-secret"}
WH_ONLY = {"X-API-Key": "warehouse-only-secret"}
KEYS = (
    ApiKey("all", Access.ADMIN, ALL["X-API-Key"]),
    ApiKey("wh", Access.READ, WH["X-API-Key"], NamespaceScope(("warehouse", "pipe*"))),
    ApiKey("wh-only", Access.READ, WH_ONLY["X-API-Key"], NamespaceScope(("warehouse",))),
)

SRC, FIN, RPT, COPY = "src_orders", "fin_orders", "rpt_orders", "copy_orders"
A, B, C, D = (
    f"dataset:{ns}:{name}"
    for ns, name in (("warehouse", SRC), ("finance", FIN), ("warehouse", RPT), ("warehouse", COPY))
)
LOAD_FIN, REPORT, COPY_JOB, EXPORT = (f"job:pipelines:{name}" for name in ("load_fin", "report", "copy", "export"))
FIELD = "datasetField:{}:{}:id".format


def _parent(payload: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """``payload`` with a parent facet naming the job ``namespace``/``name``."""
    payload["run"]["facets"] = {
        "parent": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": namespace, "name": name},
        }
    }
    return payload


def _symlinks(payload: dict[str, Any], *targets: tuple[str, str]) -> dict[str, Any]:
    """``payload`` whose first output carries a symlinks facet to ``(namespace, name)`` targets."""
    payload["outputs"][0]["facets"]["symlinks"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        "identifiers": [{"namespace": ns, "name": name, "type": "TABLE"} for ns, name in targets],
    }
    return payload


class Graph:
    """The posted store: run ids by job, and which events (by event time, seconds) each key may read."""

    def __init__(self) -> None:
        self.runs = {name: str(uuid.uuid4()) for name in ("copy", "load_fin", "report", "close_books", "copy_child")}
        src = dataset(SRC, fields=["id"])
        fin = dataset(FIN, namespace="finance", fields=["id"], columns={"id": [("warehouse", SRC, "id")]})
        rpt = dataset(RPT, fields=["id"], columns={"id": [("finance", FIN, "id")]})
        copy = dataset(COPY, fields=["id"], columns={"id": [("warehouse", SRC, "id")]})
        self.events = [
            run_event("COMPLETE", "copy", self.runs["copy"], time=1, inputs=[src], outputs=[copy]),
            run_event("COMPLETE", "load_fin", self.runs["load_fin"], time=2, inputs=[src], outputs=[fin]),
            _symlinks(
                run_event("COMPLETE", "report", self.runs["report"], time=3, inputs=[fin], outputs=[rpt]),
                ("warehouse", "rpt_orders_view"),
                ("finance", "fin_report"),
            ),
            run_event(
                "COMPLETE",
                "close_books",
                self.runs["close_books"],
                time=4,
                inputs=[fin],
                outputs=[dataset("fin_summary", namespace="finance")],
                namespace="finance",
            ),
            dataset_event(dataset(SRC, fields=["id"]), time=5),
            dataset_event(dataset(FIN, namespace="finance"), time=6),  # no job: job_namespace is NULL
            job_event("copy", inputs=[src], outputs=[copy], time=7),  # no run: no lineage_run_io rows
            job_event("export", inputs=[src], outputs=[dataset("fin_export", namespace="finance")], time=8),
            # Hidden only by what facets name: a parent job in finance, column lineage from finance.
            _parent(run_event("COMPLETE", "copy", self.runs["copy_child"], time=9, inputs=[src]), "finance", "close"),
            dataset_event(rpt, time=10),
        ]
        self.visible_events = {"all": set(range(1, 11)), "wh": {1, 5, 7}, "wh-only": {5}}


@pytest.fixture
def keyed(store_url: str) -> Iterator[tuple[TestClient, Graph]]:
    app = create_app(store_url=store_url, keys=KEYS)
    posted = Graph()
    try:
        with TestClient(app) as client:
            answer = client.post("/api/v1/lineage/batch", json=posted.events, headers=ALL)
            assert answer.status_code == 200, answer.text
            yield client, posted
    finally:
        app.state.store.dispose()


def _get(client: TestClient, headers: dict[str, str], path: str, status: int = 200, **params: Any) -> Any:
    answer = client.get(path, params=params, headers=headers)
    assert answer.status_code == status, answer.text
    return answer.json()


def _walk(client: TestClient, headers: dict[str, str], node: str, direction: str = "downstream") -> dict[str, Any]:
    return _get(client, headers, "/api/v1/lineage", nodeId=node, depth=5, direction=direction)


def test_a_walk_stops_at_the_boundary_and_draws_no_edge_into_it(keyed: tuple[TestClient, Graph]) -> None:
    client, _ = keyed
    everything = _walk(client, ALL, A)  # first: every node's card is cached now, the hidden ones too
    assert {B, REPORT, C, "job:finance:close_books", "dataset:finance:fin_export"} <= graph_ids(everything)

    limited = _walk(client, WH, A)
    # fin_orders is hidden: the walk does not step into it, so report and rpt_orders (visible themselves)
    # are not reached through it; export is visible, its output in finance is not.
    assert graph_ids(limited) == {A, LOAD_FIN, COPY_JOB, EXPORT, D}
    assert graph_edges(limited) == {(A, LOAD_FIN), (A, COPY_JOB), (A, EXPORT), (COPY_JOB, D)}
    upstream = _walk(client, WH, C, "upstream")
    assert graph_ids(upstream) == {C, REPORT}
    assert graph_edges(upstream) == {(REPORT, C)}
    both = _get(client, WH, "/api/v1/lineage", nodeId=REPORT, depth=5, direction="both")
    assert graph_ids(both) == {REPORT, C}
    assert graph_ids(_walk(client, WH_ONLY, A)) == {A}  # the jobs are hidden from this key

    assert _walk(client, ALL, A) == everything  # the limited walks changed nothing for the others


def test_a_hidden_root_answers_exactly_like_a_missing_node(keyed: tuple[TestClient, Graph]) -> None:
    client, _ = keyed
    for hidden, missing in (
        (B, "dataset:finance:nope"),
        ("job:finance:close_books", "job:finance:nope"),
        (LOAD_FIN, "job:pipelines:nope"),  # for wh-only, below
    ):
        headers = WH_ONLY if hidden == LOAD_FIN else WH
        seen = client.get("/api/v1/lineage", params={"nodeId": hidden}, headers=headers)
        absent = client.get("/api/v1/lineage", params={"nodeId": missing}, headers=headers)
        assert (seen.status_code, absent.status_code) == (404, 404)
        assert seen.json() == {"detail": f"no node {hidden!r} in this lineage store"}
        assert absent.json() == {"detail": f"no node {missing!r} in this lineage store"}
        assert seen.headers.keys() == absent.headers.keys()
        assert client.get("/api/v1/lineage", params={"nodeId": hidden}, headers=ALL).status_code == 200

    seen = client.get("/api/v1/column-lineage", params={"nodeId": FIELD("finance", FIN)}, headers=WH)
    absent = client.get("/api/v1/column-lineage", params={"nodeId": FIELD("finance", "nope")}, headers=WH)
    assert (seen.status_code, absent.status_code) == (404, 404)
    assert seen.json()["detail"].replace(FIN, "nope") == absent.json()["detail"]
    seen = client.get("/api/v1/column-lineage", params={"nodeId": B}, headers=WH)
    assert seen.status_code == 404
    assert seen.json() == {"detail": f"no column lineage for {B!r} in this lineage store"}


def test_column_lineage_stops_at_the_boundary(keyed: tuple[TestClient, Graph]) -> None:
    client, _ = keyed
    path = "/api/v1/column-lineage"
    src, fin, rpt, copy = (
        FIELD("warehouse", SRC),
        FIELD("finance", FIN),
        FIELD("warehouse", RPT),
        FIELD("warehouse", COPY),
    )

    everything = _get(client, ALL, path, nodeId=src, depth=5, direction="downstream")
    assert graph_ids(everything) == {src, fin, rpt, copy}
    limited = _get(client, WH, path, nodeId=src, depth=5, direction="downstream")
    assert graph_ids(limited) == {src, copy}  # rpt_orders.id is reached only through finance
    assert graph_edges(limited) == {(src, copy)}

    upstream = _get(client, WH, path, nodeId=rpt, depth=5, direction="upstream")
    assert graph_ids(upstream) == {rpt}
    assert upstream["graph"][0]["data"]["inputFields"] == []
    by_dataset = _get(client, WH, path, nodeId=C, depth=5, direction="both")
    assert graph_ids(by_dataset) == {rpt}
    full = _get(client, ALL, path, nodeId=rpt, depth=5, direction="upstream")
    assert graph_ids(full) == {rpt, fin, src}


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


def test_listings_search_and_namespaces_show_only_visible_nodes_with_their_totals(
    keyed: tuple[TestClient, Graph],
) -> None:
    client, _ = keyed
    namespaces = {
        key: _get(client, h, "/api/v1/namespaces") for key, h in (("all", ALL), ("wh", WH), ("wh-only", WH_ONLY))
    }
    assert {k: (_names(v["namespaces"]), v["totalCount"]) for k, v in namespaces.items()} == {
        "all": (["finance", "pipelines", "warehouse"], 3),
        "wh": (["pipelines", "warehouse"], 2),
        "wh-only": (["warehouse"], 1),
    }
    page = _get(client, WH, "/api/v1/namespaces", limit=1, offset=1)
    assert (_names(page["namespaces"]), page["totalCount"]) == (["warehouse"], 2)

    jobs = _get(client, WH, "/api/v1/jobs")
    assert (_names(jobs["jobs"]), jobs["totalCount"]) == (["copy", "export", "load_fin", "report"], 4)
    by_name = {job["name"]: job for job in jobs["jobs"]}
    assert (by_name["load_fin"]["inputs"], by_name["load_fin"]["outputs"]) == (
        [{"namespace": "warehouse", "name": SRC}],
        [],
    )
    assert (by_name["report"]["inputs"], by_name["report"]["outputs"]) == (
        [],
        [{"namespace": "warehouse", "name": RPT}],
    )
    assert by_name["export"]["outputs"] == []
    unlimited = {job["name"]: job for job in _get(client, ALL, "/api/v1/jobs")["jobs"]}
    assert unlimited["load_fin"]["outputs"] == [{"namespace": "finance", "name": FIN}]
    assert _get(client, WH_ONLY, "/api/v1/jobs") == {"jobs": [], "totalCount": 0}
    assert _get(client, WH, "/api/v1/jobs", namespace="finance") == {"jobs": [], "totalCount": 0}

    datasets = _get(client, WH, "/api/v1/datasets", limit=2)
    assert (_names(datasets["datasets"]), datasets["totalCount"]) == ([COPY, RPT], 3)
    report = datasets["datasets"][1]
    assert report["symlinks"] == [{"namespace": "warehouse", "name": "rpt_orders_view", "type": "TABLE"}]
    assert report["facets"]["columnLineage"]["fields"]["id"]["inputFields"] == []  # finance's field is gone
    full = {d["name"]: d for d in _get(client, ALL, "/api/v1/datasets")["datasets"]}
    assert len(full[RPT]["symlinks"]) == 2
    assert full[RPT]["facets"]["columnLineage"]["fields"]["id"]["inputFields"][0]["namespace"] == "finance"

    found = _get(client, WH, "/api/v1/search", q="orders", limit=2)
    assert found["totalCount"] == 3 and len(found["results"]) == 2
    found = _get(client, WH, "/api/v1/search", q="orders")
    assert {r["nodeId"] for r in found["results"]} == {A, C, D}
    assert _get(client, ALL, "/api/v1/search", q="orders")["totalCount"] == 4
    fin = _get(client, WH, "/api/v1/search", q="fin")
    assert ([r["nodeId"] for r in fin["results"]], fin["totalCount"]) == ([LOAD_FIN], 1)


def test_runs_of_hidden_jobs_are_missing_and_visible_runs_lose_hidden_datasets(
    keyed: tuple[TestClient, Graph],
) -> None:
    client, graph = keyed
    hidden = client.get("/api/v1/runs", params={"jobNamespace": "finance", "jobName": "close_books"}, headers=WH)
    absent = client.get("/api/v1/runs", params={"jobNamespace": "finance", "jobName": "nope"}, headers=WH)
    assert (hidden.status_code, absent.status_code) == (404, 404)
    assert (hidden.json(), absent.json()) == (
        {"detail": "no job 'finance' / 'close_books'"},
        {"detail": "no job 'finance' / 'nope'"},
    )
    wh_only = client.get("/api/v1/runs", params={"jobNamespace": "pipelines", "jobName": "load_fin"}, headers=WH_ONLY)
    assert wh_only.status_code == 404

    run_id, nowhere = graph.runs["close_books"], str(uuid.uuid4())
    assert _get(client, WH, f"/api/v1/runs/{run_id}", 404) == {"detail": f"no run {run_id}"}
    assert _get(client, WH, f"/api/v1/runs/{nowhere}", 404) == {"detail": f"no run {nowhere}"}
    assert _get(client, ALL, f"/api/v1/runs/{run_id}")["jobNamespace"] == "finance"

    runs = _get(client, WH, "/api/v1/runs", jobNamespace="pipelines", jobName="load_fin")
    assert [run["id"] for run in runs["runs"]] == [graph.runs["load_fin"]]
    run = _get(client, WH, f"/api/v1/runs/{graph.runs['load_fin']}")
    assert (run["inputs"], run["outputs"]) == ([{"namespace": "warehouse", "name": SRC}], [])
    assert _get(client, ALL, f"/api/v1/runs/{graph.runs['load_fin']}")["outputs"] == [
        {"namespace": "finance", "name": FIN}
    ]

    child = _get(client, WH, f"/api/v1/runs/{graph.runs['copy_child']}")
    assert "job" not in child["facets"]["parent"] and "run" in child["facets"]["parent"]
    listed = _get(client, WH, "/api/v1/runs", jobNamespace="pipelines", jobName="copy")["runs"]
    assert all("job" not in run["facets"].get("parent", {}) for run in listed)
    assert (
        _get(client, ALL, f"/api/v1/runs/{graph.runs['copy_child']}")["facets"]["parent"]["job"]["namespace"]
        == "finance"
    )


def _event_times(events: list[dict[str, Any]]) -> list[int]:
    """Each event's time in seconds after the helpers' fixed instant (the events' labels here)."""
    return [round((datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")) - T0).total_seconds()) for e in events]


def test_events_naming_a_hidden_namespace_anywhere_are_left_out_with_exact_totals(
    keyed: tuple[TestClient, Graph],
) -> None:
    client, graph = keyed
    for key, headers in (("all", ALL), ("wh", WH), ("wh-only", WH_ONLY)):
        listed = _get(client, headers, "/api/v1/events")
        expected = sorted(graph.visible_events[key], reverse=True)
        assert (_event_times(listed["events"]), listed["totalCount"]) == (expected, len(expected)), key
        offsets = range(0, len(expected) + 1, 2)  # the last page is short or empty
        pages = [_get(client, headers, "/api/v1/events", limit=2, offset=offset) for offset in offsets]
        assert [time for page in pages for time in _event_times(page["events"])] == expected
        assert {page["totalCount"] for page in pages} == {len(expected)}
    assert _get(client, WH, "/api/v1/events", runId=graph.runs["load_fin"]) == {"events": [], "totalCount": 0}
    assert _event_times(_get(client, WH, "/api/v1/events", runId=graph.runs["copy"])["events"]) == [1]


def test_the_unlimited_key_runs_no_namespace_statement(keyed: tuple[TestClient, Graph]) -> None:
    """None must cost nothing: no query for the visible namespaces, no join or JSON reading in any read."""
    client, graph = keyed
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    engine = client.app.state.store.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        reads = [
            ("/api/v1/namespaces", {}),
            ("/api/v1/jobs", {}),
            ("/api/v1/datasets", {}),
            ("/api/v1/search", {"q": "orders"}),
            ("/api/v1/lineage", {"nodeId": A, "depth": 5}),
            ("/api/v1/column-lineage", {"nodeId": FIELD("warehouse", SRC), "depth": 5}),
            ("/api/v1/runs", {"jobNamespace": "pipelines", "jobName": "load_fin"}),
            (f"/api/v1/runs/{graph.runs['load_fin']}", {}),
            ("/api/v1/events", {}),
        ]
        for path, params in reads:
            assert client.get(path, params=params, headers=ALL).status_code == 200, path
        unlimited = list(statements)
        statements.clear()
        for path, params in reads:
            assert client.get(path, params=params, headers=WH).status_code == 200, path
    finally:
        event.remove(engine, "before_cursor_execute", record)
    # namespace = ANY (CAST(... AS TEXT[])) is visibility.namespace_in on PostgreSQL (ids = ANY (...) is not).
    markers = ("json_each", "json_tree", "jsonb_path_query", "ANY (CAST(", "_node ON")
    # The visible namespaces: every row of the namespaces table, unpaged (the listing of namespaces pages them).
    every_namespace = ["SELECT", "lineage_namespaces.namespace", "FROM", "lineage_namespaces"]
    assert unlimited and not [s for s in unlimited if any(m in s for m in markers) or s.split() == every_namespace]
    # The limited key's reads do use them (so the markers above are the right ones to look for).
    assert sum(s.split() == every_namespace for s in statements) == len(reads)
    assert any("_node ON" in s for s in statements)  # the walks' join in their recursive step
