"""The node counts the database keeps (``lineage_node_counts``, :mod:`.schema.node_counts`), on SQLite and PostgreSQL.

Differential: after every path that writes or deletes nodes (ingest inline and deferred, duplicates and newer
events of known nodes, retention, a namespace reset, a declaration dropping a declared-only dataset, a whole-store
reset, an upgrade from version 15, two writers at once) the kept counts are what counting the nodes gives, and the
listings' totals (``/api/v1/datasets``, ``/api/v1/jobs``, Marquez's datasets of a namespace, a limited key's) answer
them — and the pages they total.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, job_event, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.ingest.service import write_events
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.read import node_totals
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)

Counts = dict[tuple[str, str], int]
ALL = {"X-API-Key": "all-namespaces-secret"}
LIMITED = {"X-API-Key": "warehouse-and-lake-secret"}
KEYS = (
    ApiKey("all", Access.ADMIN, ALL["X-API-Key"]),
    ApiKey("limited", Access.READ, LIMITED["X-API-Key"], NamespaceScope(("warehouse", "s3://*"))),
)


@pytest.fixture(params=["inline", "deferred"])
def keyed(store_url: str, request: pytest.FixtureRequest) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS, ingest_apply=request.param)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


def _counted(conn: sa.Connection) -> Counts:
    """What counting the nodes gives, by (namespace, kind)."""
    n = tables.nodes.c
    query = sa.select(n.namespace, n.kind, sa.func.count()).group_by(n.namespace, n.kind)
    return {(namespace, kind): count for namespace, kind, count in conn.execute(query)}


def _kept(conn: sa.Connection) -> Counts:
    """The kept counts, summed over shards, rows of 0 left out."""
    c = tables.node_counts.c
    query = sa.select(c.namespace, c.kind, sa.func.sum(c.nodes)).group_by(c.namespace, c.kind)
    return {(namespace, kind): int(total) for namespace, kind, total in conn.execute(query) if total}


def _assert_kept(engine: sa.Engine) -> Counts:
    with engine.connect() as conn:
        counted, kept = _counted(conn), _kept(conn)
    assert kept == counted
    return kept


def _engine(client: TestClient) -> sa.Engine:
    return client.app.state.store.engine  # type: ignore[no-any-return]


def _post(client: TestClient, *events: dict[str, Any]) -> None:
    assert client.post("/api/v1/lineage/batch", json=list(events), headers=ALL).status_code == 200
    assert client.get("/api/v1/namespaces", headers=ALL).status_code == 200  # waits until what was posted is applied


def _load(seconds: float, namespace: str, name: str, job: str = "load") -> dict[str, Any]:
    return run_event("COMPLETE", job, time=seconds, outputs=[dataset(name, namespace=namespace)])


def _total(client: TestClient, path: str, headers: dict[str, str] = ALL, **params: Any) -> tuple[int, int]:
    """A listing's totalCount, and how many items its pages of 2 hold in all."""
    body = client.get(path, params={**params, "limit": 2}, headers=headers).json()
    items = next(value for key, value in body.items() if isinstance(value, list))
    listed, offset = len(items), 2
    while offset < body["totalCount"] + 2:
        page = client.get(path, params={**params, "limit": 2, "offset": offset}, headers=headers).json()
        listed += len(next(value for key, value in page.items() if isinstance(value, list)))
        offset += 2
    return body["totalCount"], listed


def _assert_listings(client: TestClient, kept: Counts) -> None:
    """The listings' totals are the kept counts, and their pages hold that many."""

    def of(kind: str, namespaces: Any = None) -> int:
        return sum(count for (ns, k), count in kept.items() if k == kind and (namespaces is None or ns in namespaces))

    assert _total(client, "/api/v1/datasets") == (of("dataset"),) * 2
    assert _total(client, "/api/v1/jobs") == (of("job"),) * 2
    for namespace in {ns for ns, kind in kept if kind == "dataset" and "/" not in ns}:
        assert _total(client, "/api/v1/datasets", namespace=namespace) == (of("dataset", {namespace}),) * 2
        marquez = client.get(f"/api/v1/namespaces/{namespace}/datasets", headers=ALL).json()
        assert marquez["totalCount"] == of("dataset", {namespace}) == len(marquez["datasets"])
    seen = {ns for ns, _ in kept if ns == "warehouse" or ns.startswith("s3://")}
    assert _total(client, "/api/v1/datasets", LIMITED) == (of("dataset", seen),) * 2
    assert _total(client, "/api/v1/jobs", LIMITED) == (of("job", seen),) * 2


def test_the_counts_follow_ingest_retention_declarations_and_resets(keyed: TestClient) -> None:
    _post(
        keyed,
        _load(100, "warehouse", "orders"),
        _load(110, "warehouse", "customers"),
        _load(200, "s3://lake", "raw/orders", job="copy"),
        run_event("COMPLETE", "report", time=300, inputs=[dataset("orders")], outputs=[dataset("rpt", "bi")]),
    )
    kept = _assert_kept(_engine(keyed))
    assert kept[("warehouse", "dataset")] == 2 and kept[("pipelines", "job")] == 3
    _assert_listings(keyed, kept)
    _post(keyed, _load(100, "warehouse", "orders"), _load(400, "warehouse", "orders"))  # known nodes: no new count
    assert _assert_kept(_engine(keyed)) == kept
    assert keyed.post("/api/v1/retention", params={"days": 1}, headers=ALL).status_code == 200  # deletes no node
    assert _assert_kept(_engine(keyed)) == kept
    out = dataset("out")
    _post(keyed, job_event("declare", [dataset("staged", "declared_only"), dataset("src", "bi")], [out], time=0))
    assert _assert_kept(_engine(keyed))[("declared_only", "dataset")] == 1
    _post(keyed, job_event("declare", [dataset("src", "bi")], [out], time=10))  # no longer names "staged"
    kept = _assert_kept(_engine(keyed))
    assert ("declared_only", "dataset") not in kept
    _assert_listings(keyed, kept)
    assert keyed.post("/api/v1/reset", params={"namespace": "s3://lake"}, headers=ALL).status_code == 200
    kept = _assert_kept(_engine(keyed))
    assert ("s3://lake", "dataset") not in kept
    _assert_listings(keyed, kept)
    assert keyed.post("/api/v1/reset", params={"confirm": "all"}, headers=ALL).status_code == 200
    assert _assert_kept(_engine(keyed)) == {}
    with _engine(keyed).connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tables.node_counts)).scalar() == 0
    assert keyed.get("/api/v1/datasets", headers=ALL).json()["totalCount"] == 0
    _post(keyed, _load(500, "bi", "again"))
    assert _assert_kept(_engine(keyed)) == {("bi", "dataset"): 1, ("pipelines", "job"): 1}


def test_a_dataset_known_under_two_names_is_counted_once(keyed: TestClient) -> None:
    """A symlink joins two names into one dataset: the listing counts it once, as it lists it (not the kept
    counts, which count nodes)."""
    event = _load(0, "warehouse", "orders")
    event["outputs"][0]["facets"]["symlinks"] = {
        "_producer": "https://example.com",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        "identifiers": [{"namespace": "s3://lake", "name": "orders", "type": "TABLE"}],
    }
    _post(keyed, event, _load(10, "s3://lake", "orders", job="copy"))
    body = keyed.get("/api/v1/datasets", headers=ALL).json()
    assert body["totalCount"] == len(body["datasets"]) == 1
    assert _assert_kept(_engine(keyed))[("warehouse", "dataset")] == 1  # the nodes are still counted as nodes


def test_a_version_15_store_is_backfilled_from_its_nodes(store_url: str) -> None:
    from test_consumer_store import back_to_version

    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    try:
        with TestClient(app) as client:
            events = [_load(0, "warehouse", "a"), _load(10, "s3://lake", "b", job="copy"), _load(5, "bi", "c")]
            assert client.post("/api/v1/lineage/batch", json=events).status_code == 200
            assert client.get("/api/v1/namespaces").status_code == 200  # waits until they are applied
            engine = _engine(client)
            expected = _assert_kept(engine)
            with engine.begin() as conn:
                back_to_version(conn, 15)
    finally:
        app.state.store.dispose()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == LATEST
        assert _assert_kept(engine) == expected
        with engine.begin() as conn:  # and the upgraded store's triggers keep them from then on
            conn.execute(tables.nodes.delete().where(tables.nodes.c.namespace == "bi"))
        assert ("bi", "dataset") not in _assert_kept(engine)
    finally:
        engine.dispose()


def test_two_writers_at_once_keep_exact_counts(store_url: str) -> None:
    """Two threads, each on its own connection, ingest new datasets of the same namespaces at once (on PostgreSQL
    into their connections' shards): the sums are exact."""
    store = LineageStore(store_url, ingest_apply="inline")
    try:
        failures: list[BaseException] = []

        def write(writer: int) -> None:
            try:
                for batch in range(10):
                    events = [
                        _load(batch, namespace, f"w{writer}_b{batch}_{i}", job=f"job{writer}")
                        for i, namespace in enumerate(("warehouse", "bi", "warehouse"))
                    ]
                    write_events(store, [parse_event(event) for event in events])
            except BaseException as error:  # reported below
                failures.append(error)

        writers = [threading.Thread(target=write, args=(n,)) for n in range(2)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        assert not failures, failures
        kept = _assert_kept(store.engine)
        assert kept[("warehouse", "dataset")] == 40 and kept[("bi", "dataset")] == 20
        with store.engine.connect() as conn:
            assert node_totals.total(conn, "dataset") == 60
            assert node_totals.total(conn, "dataset", "bi") == 20
            assert node_totals.total(conn, "dataset", visible=["bi", "nowhere"]) == 20
    finally:
        store.dispose()


def test_listings_without_a_name_filter_total_the_kept_counts(keyed: TestClient) -> None:
    """White box: what the listings answer as totalCount is read from the kept counts (a count made 1,000 larger
    shows in every unfiltered total of its namespace and kind), and a listing filtered by name counts its matches."""
    _post(keyed, _load(0, "warehouse", "orders"), _load(10, "warehouse", "order_lines"), _load(20, "bi", "report"))
    with _engine(keyed).begin() as conn:
        c = tables.node_counts.c
        shard = conn.execute(sa.select(sa.func.min(c.shard)).where(c.namespace == "warehouse")).scalar_one()
        conn.execute(
            tables.node_counts.update()
            .where(c.namespace == "warehouse", c.kind == "dataset", c.shard == shard)
            .values(nodes=c.nodes + 1000)
        )
    assert keyed.get("/api/v1/datasets", headers=ALL).json()["totalCount"] == 1003
    assert keyed.get("/api/v1/datasets", params={"namespace": "bi"}, headers=ALL).json()["totalCount"] == 1
    assert keyed.get("/api/v1/datasets", headers=LIMITED).json()["totalCount"] == 1002
    assert keyed.get("/api/v1/namespaces/warehouse/datasets", headers=ALL).json()["totalCount"] == 1002
    assert keyed.get("/api/v1/jobs", headers=ALL).json()["totalCount"] == 1
    filtered = keyed.get("/api/v1/datasets", params={"name_contains": "order"}, headers=ALL).json()
    assert filtered["totalCount"] == len(filtered["datasets"]) == 2
