"""``POST /api/v1/reset`` on SQLite and PostgreSQL: one namespace goes with everything that refers to it and
the others stay intact; re-sending the same events then gives the graph a fresh store gives; a dry run says
exactly what a reset removes; the whole store needs ``confirm=all``; admin keys only, audited.

The graph (jobs in ``pipelines`` unless named ``lake.``; datasets in ``warehouse`` unless ``lake``)::

    warehouse.raw, lake.files -> load -> warehouse.orders  (run R1; column lineage orders.id <- raw.id, files.id)
    warehouse.raw             -> load -> warehouse.orders  (a later run: the io group load narrows into)
    warehouse.orders -> report -> warehouse.report -> export -> lake.export
    warehouse.report, lake.files -> blend -> warehouse.blend
    lake.files -> lake.compact -> lake.compacted -> audit (a JobEvent) -> warehouse.audit
    warehouse.orders -> mirror -> lake.orders_mirror   (warehouse.orders claims lake.orders_mirror: one dataset)
    a DatasetEvent of lake.files (a symlink to the metastore)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import PRODUCER, dataset, dataset_event, job_event, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store.graph import walks
from airflow_lineage_provider.consumer.store.schema import tables

pytest_plugins = ("support.consumer_fixtures",)

ADMIN, WRITE, LAKE_ADMIN = "admin-secret-1", "write-secret-2", "lake-admin-secret-3"
KEYS = (
    ApiKey("ops", Access.ADMIN, ADMIN),
    ApiKey("producer", Access.WRITE, WRITE),
    ApiKey("lake-ops", Access.ADMIN, LAKE_ADMIN, NamespaceScope(("lake",))),
)
AS_ADMIN = {"X-API-Key": ADMIN}
R1, R2 = "0190c3a2-7c3f-7e1a-9d5e-2b8f3c4d5e01", "0190c3a2-7c3f-7e1a-9d5e-2b8f3c4d5e02"
AUDIT = "airflow_lineage_provider.consumer.security.audit"


def _symlink(spec: dict[str, Any], namespace: str, name: str, kind: str) -> None:
    spec.setdefault("facets", {})["symlinks"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        "identifiers": [{"namespace": namespace, "name": name, "type": kind}],
    }


def _events() -> list[dict[str, Any]]:
    raw, files = dataset("raw", fields=["id"]), dataset("files", namespace="lake", fields=["id"])
    orders = dataset("orders", fields=["id"], columns={"id": [("warehouse", "raw", "id"), ("lake", "files", "id")]})
    compact_io = {"inputs": [dataset("files", namespace="lake")], "outputs": [dataset("compacted", namespace="lake")]}
    mirror = run_event(
        "COMPLETE", "mirror", time=90, inputs=[dataset("orders")], outputs=[dataset("orders_mirror", namespace="lake")]
    )
    _symlink(mirror["inputs"][0], "lake", "orders_mirror", "LOCATION")
    lake_files = dataset_event(dataset("files", namespace="lake", fields=["id", "path"]), time=80)
    _symlink(lake_files["dataset"], "hive://metastore:9083", "lake.files", "TABLE")
    return [
        run_event("START", "load", R1, time=0, inputs=[raw, files], outputs=[orders]),
        run_event("COMPLETE", "load", R1, time=10, inputs=[raw, files], outputs=[orders]),
        run_event("COMPLETE", "load", time=20, inputs=[raw], outputs=[dataset("orders")]),
        run_event("COMPLETE", "report", time=30, inputs=[dataset("orders")], outputs=[dataset("report")]),
        run_event("COMPLETE", "export", time=40, inputs=[dataset("report")],
                  outputs=[dataset("export", namespace="lake")]),
        run_event("COMPLETE", "blend", time=45, inputs=[dataset("report"), dataset("files", namespace="lake")],
                  outputs=[dataset("blend")]),
        run_event("START", "compact", R2, time=50, namespace="lake", **compact_io),
        run_event("COMPLETE", "compact", R2, time=60, namespace="lake", **compact_io),
        job_event("audit", [dataset("compacted", namespace="lake")], [dataset("audit")], time=70),
        lake_files,
        mirror,
    ]  # fmt: skip


#: The events every test posts (built once: the same run ids each time they are sent).
EVENTS = _events()
#: Those of them that name a node in ``lake`` (where the ingest makes a node of a name).
NAMING_LAKE = [0, 1, 4, 5, 6, 7, 8, 9, 10]


def _post(client: TestClient, events: list[dict[str, Any]]) -> None:
    answer = client.post("/api/v1/lineage/batch", json=events, headers=AS_ADMIN)
    assert answer.status_code == 200, answer.text


@contextmanager
def _app(url: str) -> Iterator[TestClient]:
    app = create_app(store_url=url, keys=KEYS)
    try:
        with TestClient(app) as client:
            yield client
    finally:
        app.state.store.dispose()


@contextmanager
def _another_store(store_url: str, tmp_path: Path) -> Iterator[str]:
    """A second, empty store on the same database kind as ``store_url``."""
    from support.environment import postgres_schema_url

    if store_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    with postgres_schema_url() as url:
        yield url


@pytest.fixture
def lake(store_url: str) -> Iterator[TestClient]:
    with _app(store_url) as client:
        _post(client, EVENTS)
        yield client


def _reset(client: TestClient, headers: dict[str, str] = AS_ADMIN, **params: Any) -> Any:
    return client.post("/api/v1/reset", params=params, headers=headers)


def _versions(client: TestClient) -> dict[tuple[str, str, str], int]:
    n = tables.nodes.c
    with client.app.state.store.read() as conn:
        rows = conn.execute(sa.select(n.kind, n.namespace, n.name, n.version))
        return {(kind, namespace, name): version for kind, namespace, name, version in rows}


def _dangling(client: TestClient) -> dict[str, int]:
    """References that point at no row (the integrity test's list of every reference the store keeps)."""
    from test_consumer_integrity import REFERENCES

    found = {}
    with client.app.state.store.read() as conn:
        for table, column, target, key in REFERENCES:
            count = conn.exec_driver_sql(
                f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM {target} r WHERE r.{key} = t.{column})"
            ).scalar()
            if count:
                found[f"{table}.{column}"] = count
    return found


def _table_lineage(client: TestClient, name: str, direction: str) -> list[tuple[str, str]]:
    """Table lineage (through io groups) from ``warehouse.name``: ``(from, to)`` names."""
    n = tables.nodes.c
    with client.app.state.store.read() as conn:
        names = {i: f"{ns}.{nm}" for i, ns, nm in conn.execute(sa.select(n.id, n.namespace, n.name))}
        root = conn.execute(sa.select(n.id).where(n.namespace == "warehouse", n.name == name)).scalar_one()
        bounds = walks.WalkBounds(hops=5, max_nodes=100)
        walked = walks.walk_edges(conn, walks.DATASET_EDGES[direction], [root], bounds)  # type: ignore[index]
    return sorted((names[a], names[b]) for a, b, _depth in walked)


def _graph(client: TestClient) -> dict[str, Any]:
    answer = client.get("/api/v1/graph", params={"limit": 10_000}, headers=AS_ADMIN)
    assert answer.status_code == 200
    return answer.json()


def test_a_namespace_reset_removes_it_and_what_refers_to_it_and_leaves_the_rest(
    lake: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT)
    tagged = "/api/v1/namespaces/{}/datasets/{}/tags/{}".format
    assert lake.post(tagged("lake", "files", "PII"), headers=AS_ADMIN).status_code == 200
    assert lake.post("/api/v1/namespaces/lake/datasets/files/fields/id/tags/PII", headers=AS_ADMIN).status_code == 200
    assert lake.post(tagged("warehouse", "raw", "GOLD"), headers=AS_ADMIN).status_code == 200
    before = _versions(lake)
    untouched = _graph(lake)

    dry = _reset(lake, namespace="lake", dryRun="true")
    assert dry.status_code == 200, dry.text
    assert _graph(lake) == untouched and _versions(lake) == before  # a dry run changes nothing
    done = _reset(lake, namespace="lake")
    assert done.status_code == 200, done.text
    assert done.json() == {**dry.json(), "dryRun": False}  # the dry run said exactly what went
    assert done.json()["namespace"] == "lake"
    assert done.json()["counts"] == {
        "events": len(NAMING_LAKE),
        "runs": 1,  # lake.compact's run R2; the runs of other jobs stay
        "jobs": 1,
        "datasets": 4,  # files, export, compacted, orders_mirror
        "edges": 7,
        "ioGroups": 5,  # compact's, export's, audit's, mirror's, and load's merged into its {raw} -> {orders}
        "ioGroupsNarrowed": 1,  # blend keeps report -> blend
        "fields": 1,
        "columnEdges": 1,
        "tags": 2,
        "symlinks": 1,
    }
    assert "lineage audit: dry-run reset by key 'ops': namespace lake; would remove 9 events" in caplog.text
    assert "lineage audit: reset by key 'ops': namespace lake; removed 9 events, 1 runs, 1 jobs, 4 datasets" in (
        caplog.text
    )

    assert _dangling(lake) == {}
    namespaces = lake.get("/api/v1/namespaces", headers=AS_ADMIN).json()["namespaces"]
    assert sorted(item["name"] for item in namespaces) == ["pipelines", "warehouse"]
    listed = _graph(lake)
    ids = [node["id"] for node in listed["nodes"]]
    assert ids == [node["id"] for node in untouched["nodes"] if ":lake:" not in node["id"]]
    assert all(":lake:" not in edge["origin"] + edge["destination"] for edge in listed["edges"])
    # mirror's output, lake.orders_mirror, is one dataset with warehouse.orders (drawn as it): that edge was
    # lake.orders_mirror's and goes with it.
    mirror_wrote = {"origin": "job:pipelines:mirror", "destination": "dataset:warehouse:orders"}
    kept_edges = [
        e
        for e in untouched["edges"]
        if ":lake:" not in e["origin"] + e["destination"]
        and {"origin": e["origin"], "destination": e["destination"]} != mirror_wrote
    ]
    assert listed["edges"] == kept_edges
    # lake.files's symlink went with it; the name warehouse.orders claims in lake stays warehouse.orders's.
    assert [link["dataset"] for link in untouched["symlinks"]] == ["dataset:lake:files", "dataset:warehouse:orders"]
    assert listed["symlinks"] == untouched["symlinks"][1:]

    # Table lineage between the surviving datasets stays, through the narrowed and merged io groups.
    assert _table_lineage(lake, "orders", "upstream") == [("warehouse.orders", "warehouse.raw")]
    assert _table_lineage(lake, "blend", "upstream") == [
        ("warehouse.blend", "warehouse.report"),
        ("warehouse.orders", "warehouse.raw"),
        ("warehouse.report", "warehouse.orders"),
    ]
    columns = lake.get(
        "/api/v1/column-lineage", params={"nodeId": "datasetField:warehouse:orders:id"}, headers=AS_ADMIN
    )
    assert sorted(node["id"] for node in columns.json()["graph"]) == [
        "datasetField:warehouse:orders:id",
        "datasetField:warehouse:raw:id",
    ]
    run = lake.get(f"/api/v1/runs/{R1}", headers=AS_ADMIN).json()
    assert [(d["namespace"], d["name"]) for d in run["inputs"]] == [("warehouse", "raw")]
    assert lake.get(f"/api/v1/runs/{R2}", headers=AS_ADMIN).status_code == 404
    kept = [event for index, event in enumerate(EVENTS) if index not in NAMING_LAKE]
    stored = lake.get("/api/v1/events", headers=AS_ADMIN).json()["events"]
    assert sorted(json.dumps(e, sort_keys=True) for e in stored) == sorted(json.dumps(e, sort_keys=True) for e in kept)
    assert [tag["name"] for tag in lake.get("/api/v1/tags", headers=AS_ADMIN).json()["tags"]] == ["GOLD", "PII"]
    raw = lake.get("/api/v1/namespaces/warehouse/datasets/raw", headers=AS_ADMIN).json()
    assert raw["tags"] == ["GOLD"]

    # Nodes that lost an edge, a pair or a group member are read afresh in every process; the others are not.
    after = _versions(lake)
    for name in ("load", "blend", "export", "audit", "mirror"):
        assert after[("job", "pipelines", name)] > before[("job", "pipelines", name)], name
    for name in ("orders", "blend", "audit"):
        assert after[("dataset", "warehouse", name)] > before[("dataset", "warehouse", name)], name
    assert after[("job", "pipelines", "report")] == before[("job", "pipelines", "report")]
    params = {"nodeId": "job:pipelines:load", "depth": 0}  # the job and its own datasets
    walk = lake.get("/api/v1/lineage", params=params, headers=AS_ADMIN).json()
    assert sorted(node["id"] for node in walk["graph"]) == [
        "dataset:warehouse:orders",
        "dataset:warehouse:raw",
        "job:pipelines:load",
    ]


def _snapshot(client: TestClient) -> dict[str, Any]:
    """Everything the API shows of the store, in an order that does not depend on arrival or row ids."""
    get = lambda path, **params: client.get(path, params=params, headers=AS_ADMIN).json()  # noqa: E731
    listed = _graph(client)
    shown: dict[str, Any] = {"graph": listed}
    for node in listed["nodes"]:
        walk = get("/api/v1/lineage", nodeId=node["id"], depth=10)
        for item in walk["graph"]:
            item["inEdges"].sort(key=repr)
            item["outEdges"].sort(key=repr)
        shown[f"walk {node['id']}"] = sorted(walk["graph"], key=lambda item: item["id"])
        if node["type"] == "DATASET":
            params = {"nodeId": node["id"], "direction": "both", "depth": 10}
            columns = client.get("/api/v1/column-lineage", params=params, headers=AS_ADMIN)
            found = columns.json()
            if columns.status_code == 200:  # in an order that does not follow row ids
                found = sorted(found["graph"], key=lambda item: item["id"])
                for item in found:
                    for listed in (item["inEdges"], item["outEdges"], item["data"]["inputFields"]):
                        listed.sort(key=lambda value: json.dumps(value, sort_keys=True))
            shown[f"columns {node['id']}"] = (columns.status_code, found)
            name = node["id"].split(":", 2)[2]
            if node["id"].startswith("dataset:warehouse:"):
                shown[f"tables {name}"] = [_table_lineage(client, name, way) for way in ("upstream", "downstream")]
        else:
            namespace, name = node["data"]["namespace"], node["data"]["name"]
            shown[f"runs {node['id']}"] = get("/api/v1/runs", jobNamespace=namespace, jobName=name)
    shown["jobs"] = get("/api/v1/jobs", limit=1000)
    shown["datasets"] = get("/api/v1/datasets", limit=1000)
    shown["namespaces"] = get("/api/v1/namespaces")
    shown["events"] = sorted(json.dumps(event, sort_keys=True) for event in get("/api/v1/events", limit=1000)["events"])
    return shown


def test_re_sending_the_events_after_a_namespace_reset_gives_what_a_fresh_store_gives(
    store_url: str, tmp_path: Path
) -> None:
    events = EVENTS  # the same events each time: run ids included
    with _app(store_url) as reset_client:
        _post(reset_client, events)
        assert _reset(reset_client, namespace="lake").status_code == 200
        _post(reset_client, events)
        again = _snapshot(reset_client)
        with _another_store(store_url, tmp_path) as fresh_url, _app(fresh_url) as fresh:
            _post(fresh, events)
            assert _snapshot(fresh) == again
    # 16 names, 15 nodes: lake.orders_mirror is shown as warehouse.orders, which claims it
    assert len(again["graph"]["nodes"]) == 15 and any(":lake:" in key for key in again)


def test_the_whole_store_needs_confirm_all_and_keeps_tag_names_and_the_prune_history(lake: TestClient) -> None:
    assert lake.post("/api/v1/namespaces/lake/datasets/files/tags/PII", headers=AS_ADMIN).status_code == 200
    assert lake.post("/api/v1/retention", params={"days": 30}, headers=AS_ADMIN).status_code == 200
    refused = _reset(lake)
    assert refused.status_code == 400
    assert refused.json()["detail"] == (
        "a reset without namespace removes the whole store (every event, run, job and dataset): add confirm=all "
        "to do that, dryRun=true to see what would go, or namespace=NS to reset one namespace"
    )
    assert _reset(lake, confirm="yes").status_code == 400
    dry = _reset(lake, dryRun="true")
    assert dry.status_code == 200 and dry.json()["namespace"] is None
    assert dry.json()["counts"]["jobs"] == 7 and dry.json()["counts"]["datasets"] == 9
    done = _reset(lake, confirm="all")
    assert done.status_code == 200 and done.json() == {**dry.json(), "dryRun": False}
    assert _graph(lake) == {"nodes": [], "edges": [], "symlinks": [], "totalCount": 0}
    assert lake.get("/api/v1/namespaces", headers=AS_ADMIN).json()["totalCount"] == 0
    with lake.app.state.store.read() as conn:
        rows = {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
            for t in tables.metadata.sorted_tables
        }
    kept = {"lineage_schema_version", "lineage_tags", "lineage_prunes", "lineage_store_settings"}
    assert {name: count for name, count in rows.items() if name not in kept and count} == {}
    assert rows["lineage_tags"] == rows["lineage_prunes"] == 1  # the tag name PII, the prune before
    assert lake.get("/api/v1/retention", headers=AS_ADMIN).json()["lastPrune"]["trigger"] == "api"
    assert len(lake.app.state.store.graph_cards) == 0  # this process's cached node data went with the nodes
    _post(lake, EVENTS)  # the store takes the same events again
    assert _graph(lake)["totalCount"] == 15  # 16 names: lake.orders_mirror is one dataset with warehouse.orders


def test_only_admin_keys_reset_and_a_limited_one_only_its_namespaces(lake: TestClient) -> None:
    assert _reset(lake, headers={}, namespace="lake").status_code == 401
    assert _reset(lake, headers={"X-API-Key": WRITE}, namespace="lake").status_code == 403
    limited = {"X-API-Key": LAKE_ADMIN}
    whole = _reset(lake, limited, confirm="all")
    assert whole.status_code == 403 and "may reset one of them (?namespace=NS), not the whole store" in whole.text
    hidden = _reset(lake, limited, namespace="warehouse")
    missing = _reset(lake, AS_ADMIN, namespace="nowhere")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"] == "no job or dataset in namespace 'warehouse'"
    # lake is shared with warehouse and pipelines (their jobs read and write it): not the limited key's to reset
    shared = _reset(lake, limited, namespace="lake")
    assert shared.status_code == 409 and "a reset needs a key without namespace limits" in shared.text
    assert _graph(lake)["totalCount"] == 15
    assert _reset(lake, AS_ADMIN, namespace="lake").json()["counts"]["datasets"] == 4
    assert _graph(lake)["totalCount"] == 11


def test_every_namespace_of_the_corpus_resets_cleanly_and_as_its_dry_run_said(client: TestClient) -> None:
    """Real producers' events (parents, dataset and job events, facets of every kind): each namespace reset in
    turn leaves no reference dangling, and removes what its dry run counted."""
    from support.environment import require_shared
    from test_consumer_integrity import _post_corpus, _post_dataset_facets

    require_shared()
    assert _post_corpus(client, reverse=False) >= 15
    _post_dataset_facets(client)
    namespaces = [
        item["name"] for item in client.get("/api/v1/namespaces", params={"limit": 1000}).json()["namespaces"]
    ]
    assert len(namespaces) >= 3
    for namespace in namespaces:
        dry = client.post("/api/v1/reset", params={"namespace": namespace, "dryRun": "true"}).json()
        done = client.post("/api/v1/reset", params={"namespace": namespace}).json()
        assert done["counts"] == dry["counts"], namespace
        assert _dangling(client) == {}, namespace
    assert client.get("/api/v1/graph").json()["totalCount"] == 0
