"""Dataset identity in the store (``store/identity.py``): which stored datasets are one, and under which name.

Real events: Spark's (it names a table by its files and symlinks the metastore table) and Hive's (it names
the metastore table and symlinks its location) from ``../shared/corpus``, with what their "partial expected"
form leaves out filled in; the Airflow SQL operator's side is built like its events. On SQLite and
PostgreSQL.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import at, dataset, run_event
from support.environment import require_shared
from support.olschema import SHARED

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph import identity
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate
from airflow_lineage_provider.consumer.store.schema.store_settings import new_store_id
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events, node_key
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)

EXPECTED = SHARED / "corpus" / "openlineage" / "partial-expected"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/spark"
HIVE = "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/hive"
AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"
TABLE = ("file:/tmp/cll_test", "default.tbl1")  # the metastore's name of the table Spark writes
FILES = ("file", "/tmp/cll_test/tbl1")  # Spark's name of it: its files


def corpus_event(path: str, producer: str, job: str, time: float = 0) -> dict[str, Any]:
    """A corpus "partial expected" event completed with what it leaves out: time, run, job name, producer."""
    require_shared()
    event = copy.deepcopy(json.loads((EXPECTED / path).read_text()))
    event["eventTime"] = at(time)
    event["run"] = {"runId": str(uuid.uuid4()), "facets": {}}
    event["job"]["name"] = job
    event["producer"] = producer
    event.setdefault("eventType", "COMPLETE")
    return event


def airflow_reads_table(time: float = 100, table: tuple[str, str] = TABLE) -> dict[str, Any]:
    """An Airflow SQL operator's COMPLETE: reads the table by the metastore's name, writes a report."""
    event = run_event(
        "COMPLETE",
        "reports.daily_totals",
        str(uuid.uuid4()),
        time=time,
        inputs=[dataset(table[1], namespace=table[0])],
        outputs=[dataset("public.daily_totals", namespace="postgres://warehouse:5432")],
        namespace="airflow",
    )
    event["producer"] = AIRFLOW
    return event


@pytest.fixture
def store(store_url: str) -> Iterator[LineageStore]:
    found = LineageStore(store_url)
    yield found
    found.dispose()


def ingest(store: LineageStore, *events: dict[str, Any]) -> None:
    with store.write() as conn:
        ingest_events(conn, [parse_event(event) for event in events])


def node(conn: sa.Connection, namespace: str, name: str) -> int:
    found = conn.execute(
        sa.select(tables.nodes.c.id).where(tables.nodes.c.node_key == node_key("dataset", namespace, name))
    )
    return found.scalar_one()


def group_of(store: LineageStore, namespace: str, name: str) -> tuple[tuple[str, str], set[tuple[str, str]]] | None:
    """``(canonical name, names of the group)`` of a dataset, or None when it is alone."""
    m, n = tables.dataset_members.c, tables.nodes.c
    with store.read() as conn:
        rows = conn.execute(
            sa.select(m.member_id, m.canonical_id).where(m.node_id == node(conn, namespace, name))
        ).all()
        if not rows:
            return None
        names = {
            (ns, nm) for ns, nm in conn.execute(sa.select(n.namespace, n.name).where(n.id.in_([r[0] for r in rows])))
        }
        canonical = conn.execute(sa.select(n.namespace, n.name).where(n.id == rows[0][1])).one()
    return (canonical[0], canonical[1]), names


def test_spark_files_and_the_metastore_table_are_one_dataset_named_by_the_table(store: LineageStore) -> None:
    ingest(store, corpus_event("spark/pysparkCLLEnd.json", SPARK, "spark_job"), airflow_reads_table())
    assert group_of(store, *FILES) == (TABLE, {TABLE, FILES})  # the table's name, not its files
    assert group_of(store, *TABLE) == group_of(store, *FILES)
    assert group_of(store, "file", "/tmp/cll_test/cll_source1") is None  # no symlink: alone
    with store.read() as conn:
        producers = conn.execute(sa.select(tables.node_producers.c.node_id, tables.node_producers.c.producer)).all()
        claims = conn.execute(
            sa.select(tables.symlinks.c.via, tables.symlinks.c.producer, tables.symlinks.c.type)
        ).all()
        files, table = node(conn, *FILES), node(conn, *TABLE)
    assert {(files, SPARK), (table, AIRFLOW)} <= set(producers)  # which producer used which name
    assert claims == [("symlink", SPARK, "TABLE")]


def test_hive_names_the_table_and_its_location_is_the_alias(store: LineageStore) -> None:
    hive = corpus_event("hive/cllCtasWithJoinsComplete.json", HIVE, "hive_ctas")
    location = ("file", "/opt/hive/data/warehouse/test.db/t1")
    spark_on_files = run_event(
        "COMPLETE", "spark_reads_files", str(uuid.uuid4()), inputs=[dataset(location[1], namespace="file")]
    )
    ingest(store, hive, spark_on_files)
    assert group_of(store, *location) == (
        ("hive://localhost:9083", "test.t1"),
        {("hive://localhost:9083", "test.t1"), location},
    )


def test_a_symlink_arriving_after_the_events_it_links_merges_the_stored_datasets(store: LineageStore) -> None:
    spark = corpus_event("spark/pysparkCLLEnd.json", SPARK, "spark_job", time=200)
    without = copy.deepcopy(spark)
    for output in without["outputs"]:
        output["facets"].pop("symlinks")
    ingest(store, without, airflow_reads_table())
    assert group_of(store, *FILES) is None and group_of(store, *TABLE) is None
    with store.read() as conn:
        versions = dict(conn.execute(sa.select(tables.nodes.c.id, tables.nodes.c.version)).all())
        table = node(conn, *TABLE)
    spark["eventTime"] = at(300)  # a later run of the job says the symlink
    spark["run"]["runId"] = str(uuid.uuid4())
    ingest(store, spark)
    assert group_of(store, *FILES) == (TABLE, {TABLE, FILES})
    with store.read() as conn:
        now = dict(conn.execute(sa.select(tables.nodes.c.id, tables.nodes.c.version)).all())
    assert now[table] > versions[table]  # cached answers about the table are stale: its group changed


def test_two_datasets_claiming_one_name_are_a_conflict_and_link_nothing(store: LineageStore) -> None:
    first = corpus_event("spark/pysparkCLLEnd.json", SPARK, "spark_job")
    moved = copy.deepcopy(first)  # another location claims the same table
    moved["run"]["runId"], moved["job"]["name"] = str(uuid.uuid4()), "spark_job_v2"
    moved["outputs"][0]["name"] = "/tmp/cll_test_v2/tbl1"
    ingest(store, first, airflow_reads_table())
    assert group_of(store, *FILES) is not None  # one claimant: grouped
    ingest(store, moved)
    assert group_of(store, *FILES) is None and group_of(store, *TABLE) is None  # two: no guess
    with store.read() as conn:
        found, total = identity.conflicts(conn, 10, 0)
    assert total == 1 and (found[0].namespace, found[0].name) == TABLE
    assert {(ns, name) for ns, name, _via, _producer in found[0].claimants} == {
        FILES,
        ("file", "/tmp/cll_test_v2/tbl1"),
    }


def test_namespace_aliases_join_the_same_name_in_two_namespaces_and_can_be_turned_off(store: LineageStore) -> None:
    dbt = run_event(
        "COMPLETE",
        "dbt.orders",
        str(uuid.uuid4()),
        outputs=[dataset("analytics.public.orders", namespace="postgresql://db.internal:5432")],
        namespace="dbt",
    )
    airflow = run_event(
        "COMPLETE",
        "export_orders",
        str(uuid.uuid4()),
        inputs=[dataset("analytics.public.orders", namespace="postgres://db:5432")],
        namespace="airflow",
    )
    ingest(store, dbt, airflow)
    assert group_of(store, "postgres://db:5432", "analytics.public.orders") is None
    mapping = {"postgresql://db.internal:5432": "postgres://db:5432"}
    with store.write() as conn:
        assert identity.apply_namespace_aliases(conn, mapping)
    both = {
        ("postgres://db:5432", "analytics.public.orders"),
        ("postgresql://db.internal:5432", "analytics.public.orders"),
    }
    assert group_of(store, "postgresql://db.internal:5432", "analytics.public.orders") == (
        ("postgres://db:5432", "analytics.public.orders"),
        both,
    )
    later = run_event(  # a dataset first stored after the mapping joins its group at ingest
        "COMPLETE",
        "dbt.customers",
        str(uuid.uuid4()),
        outputs=[dataset("analytics.public.customers", namespace="postgresql://db.internal:5432")],
        namespace="dbt",
    )
    reader = run_event(
        "COMPLETE",
        "export_customers",
        str(uuid.uuid4()),
        inputs=[dataset("analytics.public.customers", namespace="postgres://db:5432")],
        namespace="airflow",
    )
    ingest(store, later, reader)
    assert group_of(store, "postgres://db:5432", "analytics.public.customers") is not None
    with store.write() as conn:
        assert identity.apply_namespace_aliases(conn, mapping) == set()  # unchanged: nothing to do
        assert identity.apply_namespace_aliases(conn, {})
    assert group_of(store, "postgres://db:5432", "analytics.public.orders") is None
    with store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tables.dataset_members)).scalar() == 0


def test_a_data_source_uri_naming_the_database_otherwise_is_an_alias(store: LineageStore) -> None:
    spelled = run_event(
        "COMPLETE",
        "load",
        str(uuid.uuid4()),
        outputs=[dataset("shop.orders", namespace="mysql://db:3306")],
        namespace="etl",
    )
    spelled["outputs"][0]["facets"]["dataSource"] = {
        "_producer": AIRFLOW,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
        "name": "shop",
        "uri": "mysql://mysql.internal:3306",
    }
    reader = run_event(
        "COMPLETE",
        "read",
        str(uuid.uuid4()),
        inputs=[dataset("shop.orders", namespace="mysql://mysql.internal:3306")],
        namespace="etl",
    )
    ingest(store, spelled, reader)
    group = group_of(store, "mysql://db:3306", "shop.orders")
    assert group is not None and group[1] == {
        ("mysql://db:3306", "shop.orders"),
        ("mysql://mysql.internal:3306", "shop.orders"),
    }
    with store.read() as conn:
        assert conn.execute(sa.select(tables.symlinks.c.via)).scalars().all() == ["dataSource"]


@pytest.mark.parametrize(
    ("uri", "alias"),
    [
        ("postgres://pg.internal:5432/analytics", "postgres://pg.internal:5432"),  # the path is the database
        ("postgres://etl:s3cret-pw@pg.internal:5432/analytics?sslmode=require", "postgres://pg.internal:5432"),
    ],
)
def test_a_data_source_uri_with_a_database_path_is_an_alias_without_its_credentials(
    store: LineageStore, uri: str, alias: str
) -> None:
    spelled = run_event(
        "COMPLETE",
        "load",
        str(uuid.uuid4()),
        outputs=[dataset("analytics.public.orders", namespace="postgres://db:5432")],
    )
    spelled["outputs"][0]["facets"]["dataSource"] = {
        "_producer": AIRFLOW,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet",
        "name": "analytics",
        "uri": uri,
    }
    reader = run_event(
        "COMPLETE", "read", str(uuid.uuid4()), inputs=[dataset("analytics.public.orders", namespace=alias)]
    )
    ingest(store, spelled, reader)
    group = group_of(store, "postgres://db:5432", "analytics.public.orders")
    assert group is not None and group[1] == {
        ("postgres://db:5432", "analytics.public.orders"),
        (alias, "analytics.public.orders"),
    }
    with store.read() as conn:
        stored = conn.execute(sa.select(tables.symlinks.c.namespace, tables.symlinks.c.name)).all()
    assert stored == [(alias, "analytics.public.orders")]  # no user, password, database path or query


def test_a_version_7_store_gets_its_stored_symlinks_grouped_on_upgrade(store_url: str) -> None:
    from test_consumer_store import _to_version_7

    store = LineageStore(store_url)
    try:
        ingest(store, corpus_event("spark/pysparkCLLEnd.json", SPARK, "spark_job"), airflow_reads_table())
        with store.engine.begin() as conn:
            conn.execute(tables.schema_version.delete())
            _to_version_7(conn)
            conn.execute(tables.schema_version.insert().values(version=7, applied_at=sa.func.now()))
        assert migrate(store.engine) == LATEST
        assert group_of(store, *FILES) == (TABLE, {TABLE, FILES})
    finally:
        store.dispose()


def test_a_store_opened_with_namespace_aliases_applies_them_once(store_url: str) -> None:
    writer = LineageStore(store_url)
    events = [
        run_event("COMPLETE", "dbt.orders", str(uuid.uuid4()), outputs=[dataset("orders", namespace="pg://a")]),
        run_event("COMPLETE", "export", str(uuid.uuid4()), inputs=[dataset("orders", namespace="pg://b")]),
    ]
    try:
        ingest(writer, *events)
        assert group_of(writer, "pg://a", "orders") is None
    finally:
        writer.dispose()
    opened = LineageStore(store_url, namespace_aliases={"pg://a": "pg://b"})
    try:
        assert group_of(opened, "pg://a", "orders") == (
            ("pg://b", "orders"),
            {("pg://a", "orders"), ("pg://b", "orders")},
        )
        with opened.read() as conn:
            assert identity.stored_namespace_aliases(conn) == {"pg://a": "pg://b"}
    finally:
        opened.dispose()
    plain = LineageStore(store_url, namespace_aliases={})  # a process configured without them takes them off
    try:
        assert group_of(plain, "pg://a", "orders") is None
    finally:
        plain.dispose()


def test_producers_of_a_rolled_back_batch_are_recorded_when_it_is_sent_again(store: LineageStore) -> None:
    event = airflow_reads_table()

    def producers() -> set[str]:
        with store.read() as conn:
            return set(conn.execute(sa.select(tables.node_producers.c.producer)).scalars())

    with pytest.raises(RuntimeError), store.write() as conn:
        ingest_events(conn, [parse_event(event)])
        raise RuntimeError("the transaction fails after the ingest")
    assert producers() == set()
    ingest(store, event)
    assert producers() == {AIRFLOW}
    with store.write() as conn:  # emptied behind this process's back, under a new store id (as a reset does)
        conn.execute(tables.node_producers.delete())
        conn.execute(tables.events.delete())
        new_store_id(conn)
    ingest(store, event)
    assert producers() == {AIRFLOW}


def test_the_consumer_configured_with_namespace_aliases_lists_one_dataset_for_both_spellings(store_url: str) -> None:
    from fastapi.testclient import TestClient

    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access

    dbt = run_event(
        "COMPLETE", "dbt.orders", str(uuid.uuid4()), outputs=[dataset("orders", namespace="pg://db.internal")]
    )
    airflow = run_event("COMPLETE", "export", str(uuid.uuid4()), inputs=[dataset("orders", namespace="pg://db")])

    def listed(**options: Any) -> list[tuple[str, str, list[tuple[str, str]]]]:
        app = create_app(store_url=store_url, anonymous=Access.ADMIN, **options)
        try:
            with TestClient(app) as client:
                for event in (dbt, airflow):
                    assert client.post("/api/v1/lineage", json=event).status_code == 201
                found = client.get("/api/v1/datasets").json()["datasets"]
        finally:
            app.state.store.dispose()
        return [(d["namespace"], d["name"], [(a["namespace"], a["via"]) for a in d["aliases"]]) for d in found]

    assert listed(namespace_aliases="pg://db.internal=pg://db") == [
        ("pg://db", "orders", [("pg://db.internal", "namespaceAlias")])
    ]
    assert sorted(listed()) == [("pg://db", "orders", []), ("pg://db.internal", "orders", [])]  # configured off again


@pytest.mark.parametrize("limit", [1, 3, 100])
def test_the_whole_graph_listing_shows_one_node_per_dataset_and_each_edge_once(store_url: str, limit: int) -> None:
    from fastapi.testclient import TestClient

    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access

    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    spark, airflow = corpus_event("spark/pysparkCLLEnd.json", SPARK, "spark_job"), airflow_reads_table()
    try:
        with TestClient(app) as client:
            for event in (spark, airflow):
                assert client.post("/api/v1/lineage", json=event).status_code == 201
            nodes, edges, symlinks, offset, total = {}, [], [], 0, None
            while total is None or offset < total:
                page = client.get("/api/v1/graph", params={"limit": limit, "offset": offset}).json()
                total = page["totalCount"]
                nodes.update((node["id"], node) for node in page["nodes"])
                edges += [(edge["origin"], edge["destination"]) for edge in page["edges"]]
                symlinks += [(link["dataset"], link["namespace"], link["name"]) for link in page["symlinks"]]
                offset += limit
            walked = client.get(
                "/api/v1/lineage", params={"nodeId": "dataset:file:/tmp/cll_test:default.tbl1", "depth": 1}
            ).json()
    finally:
        app.state.store.dispose()
    table, files = "dataset:file:/tmp/cll_test:default.tbl1", "dataset:file:/tmp/cll_test/tbl1"
    assert table in nodes and files not in nodes and len(nodes) == total
    assert [(alias["namespace"], alias["name"]) for alias in nodes[table]["data"]["aliases"]] == [FILES]
    assert len(edges) == len(set(edges))  # each edge once, whatever page its origin is on
    assert ("job:testColumnLevelLineage:spark_job", table) in edges  # Spark wrote the files: drawn to the table
    assert (table, "job:airflow:reports.daily_totals") in edges
    assert not [edge for edge in edges if files in edge]
    # The files' symlinks facet named the table: listed under the node the files are shown as, not left out.
    assert (table, "file:/tmp/cll_test", "default.tbl1") in symlinks and len(symlinks) == len(set(symlinks))
    shown = {node["id"]: node for node in walked["graph"]}[table]
    assert nodes[table]["data"] == shown["data"]  # the node the walks show
