"""Graph and column-lineage walks on known graphs with diamonds and cycles, checked node by node against
an independent breadth-first search, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections import defaultdict, deque

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, dataset_event, graph_edges, graph_ids, job_event, run_event

pytest_plugins = ("support.consumer_fixtures",)

NS = "warehouse"
#: job → (inputs, outputs): a diamond A→{B,C}→D, a cycle B→D→E→B, a source job and a branch.
JOBS = {
    "j1": (["A"], ["B"]),
    "j2": (["A"], ["C"]),
    "j3": (["B", "C"], ["D"]),
    "j4": (["D"], ["E"]),
    "j5": (["E"], ["B"]),
    "j6": (["E"], ["F"]),
    "j7": (["G"], ["A"]),
    "j8": ([], ["G"]),
    "j9": (["C"], ["H"]),
}


def _id(name: str) -> str:
    return f"job:pipelines:{name}" if name.startswith("j") else f"dataset:{NS}:{name}"


def reference_edges() -> set[tuple[str, str]]:
    edges = set()
    for job, (inputs, outputs) in JOBS.items():
        edges |= {(_id(i), _id(job)) for i in inputs} | {(_id(job), _id(o)) for o in outputs}
    return edges


def reference_walk(root: str, direction: str, hops: int) -> dict[str, int]:
    """Breadth-first distances from ``root`` (in edges), up to ``hops``."""
    upstream, downstream = defaultdict(list), defaultdict(list)
    for origin, destination in reference_edges():
        upstream[destination].append(origin)
        downstream[origin].append(destination)
    steps = (
        [upstream] if direction == "upstream" else [downstream] if direction == "downstream" else [upstream, downstream]
    )
    distance = {root: 0}
    for neighbours in steps:
        seen, queue = {root: 0}, deque([root])
        while queue:
            node = queue.popleft()
            if seen[node] == hops:
                continue
            for nxt in neighbours.get(node, []):
                if nxt not in seen:
                    seen[nxt] = seen[node] + 1
                    queue.append(nxt)
        for node, d in seen.items():
            distance[node] = min(d, distance.get(node, d))
    return distance


@pytest.fixture
def graph_client(client: TestClient) -> TestClient:
    events = []
    for job, (inputs, outputs) in JOBS.items():
        ins, outs = [dataset(n) for n in inputs], [dataset(n, fields=["x"]) for n in outputs]
        if job == "j9":  # job-level lineage without a run
            events.append(job_event(job, ins, outs, time=5))
        else:
            events += [
                run_event("START", job, time=0, inputs=ins),
                run_event("COMPLETE", job, time=9, inputs=ins, outputs=outs),
            ]
    assert client.post("/api/v1/lineage/batch", json=events).status_code == 200
    return client


ROOTS = ["dataset:warehouse:F", "dataset:warehouse:B", "job:pipelines:j3", "dataset:warehouse:A", "job:pipelines:j8"]


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("direction", ["upstream", "downstream", "both"])
def test_walks_match_a_breadth_first_search_node_by_node(graph_client: TestClient, root: str, direction: str) -> None:
    edges = reference_edges()
    for depth in range(0, 7):
        hops = 2 * depth + (1 if root.startswith("job:") else 0)
        expected = reference_walk(root, direction, hops)
        response = graph_client.get(
            "/api/v1/lineage", params={"nodeId": root, "depth": depth, "direction": direction, "maxNodes": 1000}
        )
        assert response.status_code == 200
        body = response.json()
        assert graph_ids(body) == set(expected), f"depth {depth}"
        assert graph_edges(body) == {(a, b) for a, b in edges if a in expected and b in expected}
        order = [node["id"] for node in body["graph"]]
        assert [expected[n] for n in order] == sorted(expected[n] for n in order), "nearest nodes first"


def test_depth_counts_jobs(graph_client: TestClient) -> None:
    params = {"nodeId": "dataset:warehouse:F", "direction": "upstream"}
    assert graph_ids(graph_client.get("/api/v1/lineage", params={**params, "depth": 0}).json()) == {_id("F")}
    one = graph_ids(graph_client.get("/api/v1/lineage", params={**params, "depth": 1}).json())
    assert one == {_id("F"), _id("j6"), _id("E")}
    two = graph_ids(graph_client.get("/api/v1/lineage", params={**params, "depth": 2}).json())
    assert two == one | {_id("j4"), _id("D")}


def test_cycles_end_however_deep_the_walk(graph_client: TestClient) -> None:
    body = graph_client.get("/api/v1/lineage", params={"nodeId": _id("B"), "depth": 100, "direction": "both"}).json()
    assert graph_ids(body) == set(reference_walk(_id("B"), "both", 201))


@pytest.mark.parametrize("max_nodes", [1, 2, 5, 9])
def test_max_nodes_keeps_the_nearest_nodes(graph_client: TestClient, max_nodes: int) -> None:
    expected = reference_walk(_id("F"), "upstream", 40)
    params = {"nodeId": _id("F"), "depth": 20, "direction": "upstream", "maxNodes": max_nodes}
    found = [node["id"] for node in graph_client.get("/api/v1/lineage", params=params).json()["graph"]]
    assert len(found) == max_nodes
    farthest = max(expected[n] for n in found)
    assert {n for n, d in expected.items() if d < farthest} <= set(found)


def test_graph_data_has_marquez_fields(graph_client: TestClient) -> None:
    body = graph_client.get("/api/v1/lineage", params={"nodeId": _id("j3"), "depth": 0}).json()
    nodes = {node["id"]: node for node in body["graph"]}
    job = nodes[_id("j3")]
    assert job["type"] == "JOB"
    assert job["data"]["id"] == {"namespace": "pipelines", "name": "j3"}
    assert job["data"]["latestRun"]["state"] == "COMPLETED"
    assert set(job["data"]["latestRun"]) == {"id", "state", "endedAt"}  # no START seen: no startedAt (no nulls)
    d = nodes[_id("D")]
    assert d["type"] == "DATASET"
    assert d["data"]["fields"] == [{"name": "x", "type": "VARCHAR", "tags": []}]
    assert {"origin": _id("j3"), "destination": _id("D"), "declared": False, "observed": True} in d["inEdges"]
    job_only = graph_client.get("/api/v1/lineage", params={"nodeId": _id("j9"), "depth": 0}).json()
    j9 = next(n for n in job_only["graph"] if n["id"] == _id("j9"))
    assert "latestRun" not in j9["data"]  # a job without runs: left out, as Marquez does


def test_unknown_and_malformed_nodes(graph_client: TestClient) -> None:
    assert graph_client.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:nope"}).status_code == 404
    assert graph_client.get("/api/v1/lineage", params={"nodeId": "table:warehouse:A"}).status_code == 400
    assert graph_client.get("/api/v1/lineage", params={"nodeId": "datasetField:warehouse:A:x"}).status_code == 400
    assert graph_client.get("/api/v1/lineage").status_code == 400
    too_deep = graph_client.get("/api/v1/lineage", params={"nodeId": _id("A"), "depth": 101})
    assert too_deep.status_code == 400 and "depth" in too_deep.json()["detail"]


def test_namespaces_and_names_with_colons_and_slashes(client: TestClient) -> None:
    source = dataset("db.public.orders", namespace="postgres://db.internal:5432")
    target = dataset("s3://bucket/path:part=1/file", namespace="s3://bucket")
    tricky = dataset("5432:db.public.orders", namespace="postgres://db.internal")  # same text, other split
    client.post("/api/v1/lineage", json=run_event("COMPLETE", "copy:job/1", inputs=[source], outputs=[target]))
    client.post("/api/v1/lineage", json=run_event("COMPLETE", "other", inputs=[tricky], outputs=[dataset("t")]))
    node = "dataset:postgres://db.internal:5432:db.public.orders"
    body = client.get("/api/v1/lineage", params={"nodeId": node, "depth": 1, "direction": "downstream"}).json()
    assert graph_ids(body) == {node, "job:pipelines:copy:job/1", "dataset:s3://bucket:s3://bucket/path:part=1/file"}
    job = client.get("/api/v1/lineage", params={"nodeId": "job:pipelines:copy:job/1", "depth": 0}).json()
    assert _id("x") not in graph_ids(job) and len(graph_ids(job)) == 3


@pytest.fixture
def column_client(client: TestClient) -> TestClient:
    def columns(**mapping: list[tuple[str, str]]) -> dict:
        return {target: [(NS, ds, field) for ds, field in sources] for target, sources in mapping.items()}

    events = [
        run_event(
            "COMPLETE",
            "j1",
            inputs=[dataset("A")],
            outputs=[dataset("B", fields=["x"], columns=columns(x=[("A", "x")]))],
        ),
        run_event(
            "COMPLETE",
            "j3",
            inputs=[dataset("B"), dataset("C")],
            outputs=[dataset("D", fields=["y", "k"], columns=columns(y=[("B", "x"), ("C", "z")], k=[("C", "k")]))],
        ),
        run_event(
            "COMPLETE",
            "j4",
            inputs=[dataset("D")],
            outputs=[dataset("E", fields=["w"], columns=columns(w=[("D", "y")]))],
        ),
        dataset_event(dataset("B", fields=["x"], columns=columns(x=[("E", "w")]))),  # closes a cycle
    ]
    assert client.post("/api/v1/lineage/batch", json=events).status_code == 200
    return client


def _field(dataset_name: str, field: str) -> str:
    return f"datasetField:{NS}:{dataset_name}:{field}"


def test_column_lineage_upstream_of_a_field(column_client: TestClient) -> None:
    params = {"nodeId": _field("D", "y"), "direction": "upstream"}
    one = column_client.get("/api/v1/column-lineage", params={**params, "depth": 1}).json()
    assert graph_ids(one) == {_field("D", "y"), _field("B", "x"), _field("C", "z")}
    assert graph_edges(one) == {(_field("B", "x"), _field("D", "y")), (_field("C", "z"), _field("D", "y"))}
    d_y = next(n for n in one["graph"] if n["id"] == _field("D", "y"))
    assert d_y["type"] == "DATASET_FIELD"
    assert d_y["data"]["fieldType"] == "VARCHAR"
    assert sorted(f["dataset"] for f in d_y["data"]["inputFields"]) == ["B", "C"]
    deep = column_client.get("/api/v1/column-lineage", params={**params, "depth": 50}).json()
    assert graph_ids(deep) == {_field("D", "y"), _field("B", "x"), _field("C", "z"), _field("A", "x"), _field("E", "w")}


def test_column_lineage_of_a_whole_dataset_and_downstream(column_client: TestClient) -> None:
    params = {"nodeId": f"dataset:{NS}:D", "depth": 1, "direction": "both"}
    both = column_client.get("/api/v1/column-lineage", params=params).json()
    assert graph_ids(both) == {
        _field("D", "y"),
        _field("D", "k"),
        _field("B", "x"),
        _field("C", "z"),
        _field("C", "k"),
        _field("E", "w"),
    }
    down = column_client.get(
        "/api/v1/column-lineage", params={"nodeId": _field("A", "x"), "depth": 3, "direction": "downstream"}
    ).json()
    assert graph_ids(down) == {_field("A", "x"), _field("B", "x"), _field("D", "y"), _field("E", "w")}
    missing = column_client.get("/api/v1/column-lineage", params={"nodeId": _field("D", "nope")})
    assert missing.status_code == 404
