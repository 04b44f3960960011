"""Walks and column lineage through datasets known under several names, on SQLite and PostgreSQL.

Real events: Spark's from ``../shared/corpus`` (it writes the files ``file`` / ``/tmp/cll_test/tbl1`` and says,
in a ``symlinks`` facet, that they are the metastore table ``file:/tmp/cll_test`` / ``default.tbl1``, with
column lineage from ``cll_source1`` and ``cll_source2``) and Hive's (it names the metastore table and symlinks
its location), with what their "partial expected" form leaves out filled in; and an Airflow SQL operator's
event, built like its events, that reads the table by the metastore's name and writes a report. The graph
answers must show the table once, walk across both producers, and carry column lineage across the boundary.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import at, dataset, dataset_event, graph_edges, graph_ids, run_event
from support.environment import unavailable
from support.olschema import SHARED

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph import identity

pytest_plugins = ("support.consumer_fixtures",)

EXPECTED = SHARED / "corpus" / "openlineage" / "partial-expected"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/spark"
HIVE = "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/hive"
AIRFLOW = "https://github.com/apache/airflow/tree/providers-openlineage/2.20.3"

TABLE_NS, TABLE_NAME = "file:/tmp/cll_test", "default.tbl1"  # the metastore's name of the table Spark writes
TABLE = f"dataset:{TABLE_NS}:{TABLE_NAME}"
FILES = "dataset:file:/tmp/cll_test/tbl1"  # Spark's name of it: its files
SOURCE1, SOURCE2 = "dataset:file:/tmp/cll_test/cll_source1", "dataset:file:/tmp/cll_test/cll_source2"
SPARK_JOB = "job:testColumnLevelLineage:cll_job"
REPORT_NS, REPORT_NAME = "postgres://warehouse:5432", "public.daily_totals"
REPORT = f"dataset:{REPORT_NS}:{REPORT_NAME}"
AIRFLOW_JOB = "job:airflow:reports.daily_totals"


def field(node: str, name: str) -> str:
    """The ``datasetField:`` id of field ``name`` of the dataset ``node`` (a ``dataset:`` id)."""
    return f"datasetField:{node.removeprefix('dataset:')}:{name}"


def corpus_event(path: str, producer: str, job: str, run_id: str, time: float) -> dict[str, Any]:
    """A corpus "partial expected" event completed with what it leaves out: time, run, job name, producer.

    Skipped without ``../shared`` beside the clone; a failure under ``CI=true``, where it always is.
    """
    source = EXPECTED / path
    if not source.is_file():
        unavailable(f"the OpenLineage corpus is not at {EXPECTED} (clone the project with ../shared beside it)")
    found = copy.deepcopy(json.loads(source.read_text()))
    found["eventTime"] = at(time)
    found["run"] = {**found.get("run", {}), "runId": run_id}
    found["job"]["name"] = job
    found["producer"] = producer
    return found


def spark_events(symlinks: bool = True, time: float = 0) -> list[dict[str, Any]]:
    """Spark's START and COMPLETE of one run writing ``tbl1`` (without the symlinks facet: ``symlinks`` False)."""
    run_id = str(uuid.uuid4())
    events = [
        corpus_event("spark/pysparkCLLStart.json", SPARK, "cll_job", run_id, time),
        corpus_event("spark/pysparkCLLEnd.json", SPARK, "cll_job", run_id, time + 10),
    ]
    if not symlinks:
        for found in events:
            for output in found["outputs"]:
                output["facets"].pop("symlinks")
    return events


def airflow_report(time: float = 100, table: tuple[str, str] = (TABLE_NS, TABLE_NAME)) -> dict[str, Any]:
    """An Airflow SQL operator's COMPLETE: reads the table by the metastore's name, writes the report, with
    column lineage (``ident`` copied, ``total`` from ``agg``)."""
    columns = {"ident": [(*table, "ident")], "total": [(*table, "agg")]}
    found = run_event(
        "COMPLETE",
        "reports.daily_totals",
        time=time,
        inputs=[dataset(table[1], namespace=table[0], fields=["ident", "agg"])],
        outputs=[dataset(REPORT_NAME, namespace=REPORT_NS, fields=["ident", "total"], columns=columns)],
        namespace="airflow",
    )
    found["producer"] = AIRFLOW
    return found


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    try:
        with TestClient(app) as test_client:
            yield test_client
    finally:
        app.state.store.dispose()


def post(client: TestClient, *events: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    answer = client.post("/api/v1/lineage/batch", json=list(events), headers=headers or {})
    assert answer.status_code == 200, answer.text


def lineage(client: TestClient, node: str, direction: str, depth: int = 5, **headers: str) -> dict[str, Any]:
    answer = client.get(
        "/api/v1/lineage", params={"nodeId": node, "depth": depth, "direction": direction}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def column_lineage(client: TestClient, node: str, direction: str = "upstream", **headers: str) -> dict[str, Any]:
    params = {"nodeId": node, "depth": 10, "direction": direction}
    answer = client.get("/api/v1/column-lineage", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def node_data(graph: dict[str, Any], node: str) -> dict[str, Any]:
    (found,) = [item["data"] for item in graph["graph"] if item["id"] == node]
    return found


def test_the_table_is_one_node_and_the_walk_crosses_from_airflow_into_spark(client: TestClient) -> None:
    post(client, *spark_events(time=200), airflow_report(time=100))  # Spark's schema of the table is the latest
    up = lineage(client, REPORT, "upstream")
    assert graph_ids(up) == {REPORT, AIRFLOW_JOB, TABLE, SPARK_JOB, SOURCE1, SOURCE2}  # the files are not a node
    assert graph_edges(up) == {
        (TABLE, AIRFLOW_JOB),
        (AIRFLOW_JOB, REPORT),
        (SPARK_JOB, TABLE),  # Spark wrote the files: drawn to the table
        (SOURCE1, SPARK_JOB),
        (SOURCE2, SPARK_JOB),
    }
    table = node_data(up, TABLE)
    assert table["aliases"] == [
        {"namespace": "file", "name": "/tmp/cll_test/tbl1", "via": "symlink", "producers": [SPARK]}
    ]
    assert table["producers"] == [AIRFLOW]
    assert [f["name"] for f in table["fields"]] == ["ident", "trans", "agg"]  # Spark's, not Airflow's (ident, agg)
    down = lineage(client, SOURCE1, "downstream")
    assert graph_ids(down) == {SOURCE1, SPARK_JOB, TABLE, AIRFLOW_JOB, REPORT}


def test_an_alias_hop_costs_no_depth(client: TestClient) -> None:
    post(client, *spark_events(), airflow_report())
    assert SOURCE1 not in graph_ids(lineage(client, REPORT, "upstream", depth=1))
    assert {SPARK_JOB, SOURCE1, SOURCE2} <= graph_ids(lineage(client, REPORT, "upstream", depth=2))


def test_a_node_id_naming_another_name_answers_with_the_table(client: TestClient) -> None:
    post(client, *spark_events(), airflow_report())
    by_files, by_table = lineage(client, FILES, "both"), lineage(client, TABLE, "both")
    assert graph_ids(by_files) == graph_ids(by_table) == {REPORT, AIRFLOW_JOB, TABLE, SPARK_JOB, SOURCE1, SOURCE2}
    assert graph_edges(by_files) == graph_edges(by_table)


def test_column_lineage_crosses_the_producer_boundary_under_the_table_name(client: TestClient) -> None:
    post(client, *spark_events(time=200), airflow_report(time=100))
    up = column_lineage(client, field(REPORT, "total"))
    ids = graph_ids(up)
    assert {field(TABLE, "agg"), field(SOURCE2, "c"), field(SOURCE1, "a"), field(SOURCE1, "b")} <= ids
    assert not [node for node in ids if node.startswith(field(FILES, ""))]  # no field under the files' name
    agg = node_data(up, field(TABLE, "agg"))
    assert agg["fieldType"] == "long"  # the type in the table's latest schema, Spark's (Airflow said VARCHAR)
    assert {(item["dataset"], item["field"]) for item in agg["inputFields"]} == {
        ("/tmp/cll_test/cll_source1", "a"),
        ("/tmp/cll_test/cll_source1", "b"),
        ("/tmp/cll_test/cll_source2", "a"),
        ("/tmp/cll_test/cll_source2", "c"),
    }
    # A field only Spark named (Airflow never read `trans`) is found by the table's name, and the other way.
    trans = column_lineage(client, field(TABLE, "trans"))
    assert {field(TABLE, "trans"), field(SOURCE1, "b")} <= graph_ids(trans)
    down = column_lineage(client, field(SOURCE2, "c"), "downstream")
    assert {field(TABLE, "agg"), field(REPORT, "total")} <= graph_ids(down)
    assert (field(TABLE, "agg"), field(REPORT, "total")) in graph_edges(down)
    whole = column_lineage(client, TABLE)  # every field of every name of the table
    assert {field(TABLE, name) for name in ("ident", "trans", "agg")} <= graph_ids(whole)


def test_a_symlink_arriving_after_the_events_it_links_joins_the_walk(client: TestClient) -> None:
    post(client, *spark_events(symlinks=False), airflow_report())
    before = lineage(client, REPORT, "upstream")  # also leaves the table's card in the cache
    assert graph_ids(before) == {REPORT, AIRFLOW_JOB, TABLE}
    assert "aliases" not in node_data(before, TABLE)
    symlink = dataset_event({"namespace": "file", "name": "/tmp/cll_test/tbl1"}, time=500)
    symlink["producer"] = SPARK
    symlink["dataset"]["facets"] = {
        "symlinks": {
            "_producer": SPARK,
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
            "identifiers": [{"namespace": TABLE_NS, "name": TABLE_NAME, "type": "TABLE"}],
        }
    }
    post(client, symlink)  # only the claim: nothing sent before is sent again
    after = lineage(client, REPORT, "upstream")
    assert graph_ids(after) == {REPORT, AIRFLOW_JOB, TABLE, SPARK_JOB, SOURCE1, SOURCE2}
    assert [alias["name"] for alias in node_data(after, TABLE)["aliases"]] == ["/tmp/cll_test/tbl1"]
    assert field(SOURCE2, "c") in graph_ids(column_lineage(client, field(REPORT, "total")))


def _spark_writes(location: str, table: tuple[str, str]) -> dict[str, Any]:
    """A Spark-like COMPLETE writing the files at ``location`` and saying they are the metastore ``table``."""
    writer = run_event(
        "COMPLETE",
        f"spark_writes{location.replace('/', '_')}",
        inputs=[dataset(f"raw{location}", namespace="s3://landing")],
        outputs=[dataset(location, namespace="file")],
        namespace="spark",
    )
    writer["outputs"][0]["facets"]["symlinks"] = {
        "_producer": SPARK,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
        "identifiers": [{"namespace": table[0], "name": table[1], "type": "TABLE"}],
    }
    return writer


def test_two_datasets_claiming_one_name_are_not_merged(client: TestClient) -> None:
    orders, customers = ("hive://metastore:9083", "default.orders"), ("hive://metastore:9083", "default.customers")
    report = airflow_report(table=orders)
    report["inputs"].append(dataset(customers[1], namespace=customers[0]))
    post(
        client,
        _spark_writes("/warehouse/a/orders", orders),
        _spark_writes("/warehouse/b/orders", orders),  # a second location claims the same table: a conflict
        _spark_writes("/warehouse/customers", customers),  # claimed once: one dataset
        report,
    )
    up = lineage(client, REPORT, "upstream")
    orders_node, customers_node = (f"dataset:{ns}:{name}" for ns, name in (orders, customers))
    assert graph_ids(up) == {
        REPORT,
        AIRFLOW_JOB,
        orders_node,  # no guess: the walk stops there
        customers_node,
        "job:spark:spark_writes_warehouse_customers",
        "dataset:s3://landing:raw/warehouse/customers",
    }
    assert "aliases" not in node_data(up, orders_node)
    assert [alias["name"] for alias in node_data(up, customers_node)["aliases"]] == ["/warehouse/customers"]
    down = lineage(client, "dataset:file:/warehouse/a/orders", "downstream")
    assert graph_ids(down) == {"dataset:file:/warehouse/a/orders"}


def test_namespace_aliases_join_the_walk_when_on_and_split_it_when_off(client: TestClient) -> None:
    loader = run_event(
        "COMPLETE",
        "load_orders",
        inputs=[dataset("orders.csv", namespace="s3://landing")],
        outputs=[dataset("public.orders", namespace="postgresql://db.internal:5432")],
        namespace="dbt",
    )
    report = run_event(
        "COMPLETE",
        "orders_report",
        inputs=[dataset("public.orders", namespace="postgres://db:5432")],
        outputs=[dataset("public.orders_report", namespace="postgres://db:5432")],
    )
    post(client, loader, report)
    canonical, alias = "dataset:postgres://db:5432:public.orders", "dataset:postgresql://db.internal:5432:public.orders"
    reporting = "dataset:postgres://db:5432:public.orders_report"
    assert "dataset:s3://landing:orders.csv" not in graph_ids(lineage(client, reporting, "upstream"))
    store: LineageStore = client.app.state.store
    with store.write() as conn:
        identity.apply_namespace_aliases(conn, {"postgresql://db.internal:5432": "postgres://db:5432"})
    up = lineage(client, reporting, "upstream")
    assert graph_ids(up) == {
        reporting,
        "job:pipelines:orders_report",
        canonical,
        "job:dbt:load_orders",
        "dataset:s3://landing:orders.csv",
    }
    assert alias not in graph_ids(up)
    [named] = node_data(up, canonical)["aliases"]
    assert (named["namespace"], named["via"]) == ("postgresql://db.internal:5432", "namespaceAlias")
    with store.write() as conn:
        identity.apply_namespace_aliases(conn, {})
    off = lineage(client, reporting, "upstream")
    assert "dataset:s3://landing:orders.csv" not in graph_ids(off)
    assert "aliases" not in node_data(off, canonical)


KEYS = (
    ApiKey("all", Access.ADMIN, "all-secret"),
    # Sees the table's and the report's namespaces and the jobs, not Spark's file namespace.
    ApiKey(
        "tables", Access.READ, "tables-secret", NamespaceScope(("file:*", "postgres://*", "airflow", "testColumn*"))
    ),
    # Sees Spark's file namespace and its job, not the table's namespace.
    ApiKey("files", Access.READ, "files-secret", NamespaceScope(("file", "testColumn*"))),
)


@pytest.fixture
def keyed(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    try:
        with TestClient(app) as test_client:
            post(test_client, *spark_events(), airflow_report(), headers={"X-API-Key": "all-secret"})
            yield test_client
    finally:
        app.state.store.dispose()


def test_a_namespace_limited_key_never_sees_nor_walks_through_a_hidden_name(keyed: TestClient) -> None:
    tables = {"X-API-Key": "tables-secret"}
    up = lineage(keyed, REPORT, "upstream", **tables)
    assert graph_ids(up) == {REPORT, AIRFLOW_JOB, TABLE}  # the files' name is hidden: not walked through
    assert node_data(up, TABLE)["aliases"] == []
    assert "/tmp/cll_test/tbl1" not in json.dumps(up)
    assert field(SOURCE2, "c") not in graph_ids(column_lineage(keyed, field(REPORT, "total"), **tables))
    files = {"X-API-Key": "files-secret"}
    down = lineage(keyed, SOURCE1, "downstream", **files)
    assert graph_ids(down) == {SOURCE1, SPARK_JOB, FILES}  # shown by the name it can see, and no further
    assert node_data(down, FILES)["aliases"] == []
    assert TABLE_NAME not in json.dumps(down)
    assert keyed.get("/api/v1/lineage", params={"nodeId": TABLE}, headers=files).status_code == 404
    everything = lineage(keyed, SOURCE1, "downstream", **{"X-API-Key": "all-secret"})
    assert graph_ids(everything) == {SOURCE1, SPARK_JOB, TABLE, AIRFLOW_JOB, REPORT}


def test_hive_tables_join_the_job_writing_their_location(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    hive = [
        corpus_event("hive/cllCtasWithJoinsStart.json", HIVE, "createtable_as_select.test.xxx", run_id, 0),
        corpus_event("hive/cllCtasWithJoinsComplete.json", HIVE, "createtable_as_select.test.xxx", run_id, 10),
    ]
    loader = run_event(
        "COMPLETE",
        "load_t1_files",
        time=-100,
        inputs=[dataset("t1.csv", namespace="s3://landing")],
        outputs=[dataset("/opt/hive/data/warehouse/test.db/t1", namespace="file")],
        namespace="spark",
    )
    post(client, loader, *hive)
    t1, output = "dataset:hive://localhost:9083:test.t1", "dataset:hive://localhost:9083:test.xxx"
    up = lineage(client, output, "upstream")
    assert {t1, "job:spark:load_t1_files", "dataset:s3://landing:t1.csv"} <= graph_ids(up)
    assert "dataset:file:/opt/hive/data/warehouse/test.db/t1" not in graph_ids(up)  # the location is an alias
    assert ("job:spark:load_t1_files", t1) in graph_edges(up)
    [location] = node_data(up, t1)["aliases"]
    assert (location["name"], location["via"], location["producers"]) == (
        "/opt/hive/data/warehouse/test.db/t1",
        "symlink",
        ["https://github.com/acme/airflow-lineage-provider/tests"],
    )
    assert node_data(up, t1)["producers"] == [HIVE]


def test_collect_lineage_walks_cross_the_boundary_by_the_table_name(client: TestClient) -> None:
    from airflow_lineage_provider.consumer.reads import LineageWalker

    post(client, *spark_events(), airflow_report())
    walker = LineageWalker(str(client.app.state.store.engine.url.render_as_string(hide_password=False)))
    try:
        report = walker.dataset_id(REPORT_NS, REPORT_NAME)
        assert report is not None
        tables = walker.table_edges(report, "upstream", None, 100, None)
        columns = walker.column_edges(report, ["total"], "column_upstream", None, 100, None)
    finally:
        walker.close()
    assert [(row["depth"], row["target_table"]) for row in tables] == [
        (1, f"{TABLE_NS}/{TABLE_NAME}"),
        (2, "file//tmp/cll_test/cll_source1"),
        (2, "file//tmp/cll_test/cll_source2"),
    ]
    assert {(row["target_table"], row["source_column"], row["target_column"]) for row in columns} >= {
        (f"{TABLE_NS}/{TABLE_NAME}", "agg", "total"),
        ("file//tmp/cll_test/cll_source2", "c", "agg"),
    }
    assert not [row for row in columns if row["target_table"] == "file//tmp/cll_test/tbl1"]


def test_a_store_without_groups_walks_with_the_statements_it_always_did(client: TestClient) -> None:
    post(client, *spark_events(symlinks=False), airflow_report())
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    engine = client.app.state.store.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        lineage(client, REPORT, "both")
        column_lineage(client, field(REPORT, "total"), "both")
    finally:
        event.remove(engine, "before_cursor_execute", record)
    touching = [statement for statement in statements if "lineage_dataset_members" in statement]
    assert len(touching) == 2  # one probe per request, and nothing else reads the groups
    assert not [statement for statement in statements if "coalesce" in statement.lower()]


def test_the_shown_card_follows_a_change_of_another_name(client: TestClient) -> None:
    post(client, *spark_events(), airflow_report())
    before = node_data(lineage(client, REPORT, "upstream"), TABLE)  # the group's card, now kept
    assert before["aliases"][0]["producers"] == [SPARK]
    other = "https://github.com/acme/compaction"
    compacted = dataset_event(
        {"namespace": "file", "name": "/tmp/cll_test/tbl1", "fields": ["ident", "agg", "day"]}, time=900
    )
    compacted["producer"] = other  # a third producer names the files, with a newer schema
    post(client, compacted)
    after = node_data(lineage(client, REPORT, "upstream"), TABLE)
    assert after["aliases"][0]["producers"] == [SPARK, other]
    assert [f["name"] for f in after["fields"]] == ["ident", "agg", "day"]
    assert after["updatedAt"] > before["updatedAt"]
