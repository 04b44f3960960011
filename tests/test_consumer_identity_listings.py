"""Listings, search and conflicts treat the names of one dataset as one — on SQLite and PostgreSQL.

Real events: Spark's ``pysparkCLLEnd.json`` from ``../shared/corpus`` writes the table by its files (``file`` /
``/tmp/cll_test/tbl1``) with a ``symlinks`` facet naming the metastore table (``file:/tmp/cll_test`` /
``default.tbl1``, type ``TABLE``); an Airflow-like SQL task reads that table by the metastore name. The two
names are one dataset whose canonical name is the metastore's (a table wins over its files): listings and
search show it once, under that name, with the file name as its alias (and the producer that used it).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import PRODUCER, dataset, on_a_request_thread, run_event
from support.marquez_spec import assert_marquez
from support.olschema import SHARED

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.routers.graph.dataset_conflicts import AliasConflicts
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store.graph import identity

pytest_plugins = ("support.consumer_fixtures",)

SPARK_EVENT = SHARED / "corpus" / "openlineage" / "partial-expected" / "spark" / "pysparkCLLEnd.json"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/spark"
FACETS = "https://openlineage.io/spec/facets/1-0-0"
FILES, TBL1 = "file", "/tmp/cll_test/tbl1"
METASTORE, TABLE = "file:/tmp/cll_test", "default.tbl1"
SOURCES = ["/tmp/cll_test/cll_source1", "/tmp/cll_test/cll_source2"]
PG, PG_ALIAS, ORDERS = "postgres://db:5432", "postgresql://db.internal:5432", "public.orders"
DBT = "https://github.com/dbt-labs/dbt-core/tests"
HIVE = "hive://metastore:9083"

ALL = {"X-API-Key": "every-namespace-secret"}
FILES_ONLY = {"X-API-Key": "file-namespace-only-secret"}
METASTORE_ONLY = {"X-API-Key": "metastore-namespace-only-secret"}
BOTH = {"X-API-Key": "both-file-namespaces-secret"}
KEYS = (
    ApiKey("all", Access.ADMIN, ALL["X-API-Key"]),
    ApiKey("files", Access.READ, FILES_ONLY["X-API-Key"], NamespaceScope((FILES,))),
    ApiKey("metastore", Access.READ, METASTORE_ONLY["X-API-Key"], NamespaceScope((METASTORE,))),
    ApiKey("both", Access.READ, BOTH["X-API-Key"], NamespaceScope(("file*",))),
)
#: The question "has any dataset several names?" as the listings ask it, inside a statement they run anyway.
PROBE = re.compile(r"EXISTS \(SELECT lineage_dataset_members\.node_id\s+FROM lineage_dataset_members\)")
FILE_ALIAS = {"namespace": FILES, "name": TBL1, "via": "symlink", "producers": [SPARK]}


def spark_event(output: str = TBL1, seconds: int = 0) -> dict[str, Any]:
    """Spark's event from the corpus, completed where the corpus leaves parts out (time, run, job name,
    producer, the facets' ``_producer`` and ``_schemaURL``), writing ``output`` (its ``symlinks`` facet still
    naming ``default.tbl1``)."""
    if not SPARK_EVENT.is_file():
        from support.environment import unavailable

        unavailable(f"Spark's event is not at {SPARK_EVENT} (clone the project with ../shared beside it)")
    payload = json.loads(SPARK_EVENT.read_text())
    payload.update(
        eventTime=f"2026-03-01T12:00:{seconds:02d}Z",
        producer=SPARK,
        schemaURL="https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        run={"runId": str(uuid.uuid4())},
    )
    payload["job"]["name"] = "cll_test.execute_insert_into_hive_table"
    for item in payload["inputs"] + payload["outputs"]:  # the corpus keeps the facets' members, not their headers
        for key, facet in item["facets"].items():
            facet.setdefault("_producer", SPARK)
            facet.setdefault("_schemaURL", f"{FACETS}/{key[0].upper()}{key[1:]}DatasetFacet.json")
    written = payload["outputs"][0]
    assert (written["namespace"], written["name"]) == (FILES, TBL1)
    assert written["facets"]["symlinks"]["identifiers"] == [{"namespace": METASTORE, "name": TABLE, "type": "TABLE"}]
    written["name"] = output
    return payload


def airflow_event() -> dict[str, Any]:
    """An Airflow SQL task reading the table by the metastore's name."""
    return run_event(
        "COMPLETE", "daily_report", time=60, inputs=[dataset(TABLE, namespace=METASTORE)], outputs=[dataset("report")]
    )


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as test_client:
        yield test_client
    app.state.store.dispose()


def post(client: TestClient, *events: dict[str, Any]) -> None:
    for payload in events:
        answer = client.post("/api/v1/lineage", json=payload, headers=ALL)
        assert answer.status_code == 201, answer.text


def get(client: TestClient, path: str, headers: dict[str, str] = ALL, **params: Any) -> Any:
    answer = client.get(path, params=params, headers=headers)
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def marquez(client: TestClient, path: str, schema: str, headers: dict[str, str] = ALL, **params: Any) -> Any:
    """A Marquez answer, checked against Marquez's OpenAPI component ``schema``."""
    body = get(client, path, headers, **params)
    assert_marquez(schema, body)
    return body


def datasets_path(namespace: str, name: str | None = None, *rest: str) -> str:
    url = f"/api/v1/namespaces/{quote(namespace, safe='')}/datasets"
    if name is not None:
        url += f"/{quote(name, safe='')}"
    return "/".join((url, *rest))


def names(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(item["namespace"], item["name"]) for item in items]


def ours(client: TestClient, headers: dict[str, str] = ALL, **params: Any) -> dict[tuple[str, str], Any]:
    """Our dataset listing as ``(namespace, name) → dataset``, checking the total counts the listed datasets."""
    body = get(client, "/api/v1/datasets", headers, **params)
    assert body["totalCount"] == len(body["datasets"])
    return {(item["namespace"], item["name"]): item for item in body["datasets"]}


def search(client: TestClient, q: str, headers: dict[str, str] = ALL, **params: Any) -> list[tuple[str, str]]:
    body = marquez(client, "/api/v1/search", "SearchResultList", headers, q=q, **params)
    assert body["totalCount"] == len(body["results"])
    return names(body["results"])


def test_listings_show_the_table_once_under_its_metastore_name_with_the_files_as_alias(client: TestClient) -> None:
    post(client, spark_event())
    alone = ours(client)
    assert set(alone) == {(FILES, TBL1), (FILES, SOURCES[0]), (FILES, SOURCES[1])}  # the claimed name not stored
    assert alone[(FILES, TBL1)]["aliases"] == [] and alone[(FILES, TBL1)]["aliasConflicts"] == []
    post(client, airflow_event())

    listed = ours(client)
    assert set(listed) == {(METASTORE, TABLE), (FILES, SOURCES[0]), (FILES, SOURCES[1]), ("warehouse", "report")}
    table = listed[(METASTORE, TABLE)]
    assert table["aliases"] == [FILE_ALIAS] and table["aliasConflicts"] == []
    assert [field["name"] for field in table["fields"]] == ["ident", "trans", "agg"]  # Spark's schema, by its files
    assert table["symlinks"] == []  # the group's own names are its aliases, not symlinks
    assert table["createdAt"] == "2026-03-01T12:00:00.000000Z" and table["updatedAt"] == "2026-03-01T12:01:00.000000Z"
    assert listed[("warehouse", "report")]["aliases"] == []
    assert set(ours(client, namespace=FILES)) == {(FILES, SOURCES[0]), (FILES, SOURCES[1])}
    assert set(ours(client, namespace=METASTORE)) == {(METASTORE, TABLE)}
    assert set(ours(client, name_contains="cll_test/tbl")) == {(METASTORE, TABLE)}  # found by its alias' name
    assert set(ours(client, name_contains="tbl1")) == {(METASTORE, TABLE)}

    in_metastore = marquez(client, datasets_path(METASTORE), "DatasetList")
    assert in_metastore["totalCount"] == 1 and names(in_metastore["datasets"]) == [(METASTORE, TABLE)]
    assert in_metastore["datasets"][0]["aliases"] == [FILE_ALIAS]
    in_files = marquez(client, datasets_path(FILES), "DatasetList")
    assert in_files["totalCount"] == 2 and names(in_files["datasets"]) == [(FILES, SOURCES[0]), (FILES, SOURCES[1])]
    assert all(item["aliases"] == [] for item in in_files["datasets"])


def test_search_finds_the_dataset_by_any_of_its_names_and_shows_it_once(client: TestClient) -> None:
    post(client, spark_event(), airflow_event())
    assert search(client, "tbl1", filter="DATASET") == [(METASTORE, TABLE)]
    assert search(client, "tbl1") == [(METASTORE, TABLE)]
    assert search(client, "cll_test/tbl1", filter="DATASET") == [(METASTORE, TABLE)]  # only the alias matches
    assert search(client, "default.tbl1") == [(METASTORE, TABLE)]
    assert search(client, "tbl1", filter="DATASET", namespace=FILES) == []  # the dataset lives in its namespace
    assert search(client, "tbl1", sort="UPDATE_AT") == [(METASTORE, TABLE)]
    found = get(client, "/api/v1/search", q="tbl1")["results"][0]
    assert found["updatedAt"] == "2026-03-01T12:01:00.000000Z"  # the latest of its names
    assert found["nodeId"] == f"dataset:{METASTORE}:{TABLE}"
    assert get(client, "/api/v1/search", q="tbl1", after="2026-03-02")["totalCount"] == 0
    assert search(client, "cll_source") == [(FILES, SOURCES[0]), (FILES, SOURCES[1])]


def test_get_by_an_alias_answers_the_canonical_dataset_with_every_name_s_versions(client: TestClient) -> None:
    post(client, spark_event(), airflow_event())
    canonical = marquez(client, datasets_path(METASTORE, TABLE), "Dataset")
    by_alias = marquez(client, datasets_path(FILES, TBL1), "Dataset")
    assert by_alias == canonical
    assert canonical["id"] == {"namespace": METASTORE, "name": TABLE} and canonical["aliases"] == [FILE_ALIAS]
    assert [field["name"] for field in canonical["fields"]] == ["ident", "trans", "agg"]
    assert "currentVersion" in canonical  # Spark's run wrote the table, by its files

    versions = marquez(client, datasets_path(FILES, TBL1, "versions"), "DatasetVersionList")
    assert versions == marquez(client, datasets_path(METASTORE, TABLE, "versions"), "DatasetVersionList")
    assert versions["totalCount"] == 1
    version = versions["versions"][0]
    assert version["version"] == canonical["currentVersion"] and version["physicalName"] == TBL1
    assert version["id"] == {"namespace": METASTORE, "name": TABLE, "version": canonical["currentVersion"]}
    one = marquez(client, datasets_path(METASTORE, TABLE, "versions", version["version"]), "DatasetVersion")
    assert one == version


def test_two_datasets_claiming_one_name_stay_apart_and_the_conflict_is_listed(client: TestClient) -> None:
    post(client, spark_event(), spark_event(output="/tmp/cll_test/tbl1_moved", seconds=30), airflow_event())
    listed = ours(client)
    moved = (FILES, "/tmp/cll_test/tbl1_moved")
    assert {(FILES, TBL1), moved, (METASTORE, TABLE)} <= set(listed)
    assert all(item["aliases"] == [] for item in listed.values())
    claimed = [{"namespace": METASTORE, "name": TABLE}]
    assert listed[(FILES, TBL1)]["aliasConflicts"] == claimed and listed[moved]["aliasConflicts"] == claimed
    assert listed[(METASTORE, TABLE)]["aliasConflicts"] == []
    assert search(client, "default.tbl1") == [(METASTORE, TABLE)]
    assert search(client, "cll_test/tbl1", filter="DATASET") == [(FILES, TBL1), moved]

    conflicts = get(client, "/api/v1/datasets/conflicts")
    claimants = [
        {"namespace": FILES, "name": TBL1, "via": "symlink", "producer": SPARK},
        {"namespace": FILES, "name": moved[1], "via": "symlink", "producer": SPARK},
    ]
    assert conflicts == {
        "conflicts": [{"namespace": METASTORE, "name": TABLE, "claimants": claimants}],
        "totalCount": 1,
    }
    assert get(client, "/api/v1/datasets/conflicts", limit=1, offset=1) == {"conflicts": [], "totalCount": 1}
    assert get(client, "/api/v1/datasets/conflicts", BOTH)["totalCount"] == 1
    for limited in (FILES_ONLY, METASTORE_ONLY):  # the name, or both claimants, in a hidden namespace
        assert get(client, "/api/v1/datasets/conflicts", limited) == {"conflicts": [], "totalCount": 0}
    assert ours(client, FILES_ONLY)[(FILES, TBL1)]["aliasConflicts"] == []
    assert ours(client, BOTH)[(FILES, TBL1)]["aliasConflicts"] == claimed


def _orders_events() -> list[dict[str, Any]]:
    """A load writing ``postgres://db:5432`` / ``public.orders``; dbt reading it by another host name."""
    load = run_event("COMPLETE", "load", outputs=[dataset(ORDERS, namespace=PG, fields=["id", "amount"])])
    read = run_event("COMPLETE", "dbt_model", time=120, inputs=[dataset(ORDERS, namespace=PG_ALIAS)])
    read["producer"] = DBT
    return [load, read]


def _namespace_aliases(client: TestClient, aliases: dict[str, str]) -> None:
    with client.app.state.store.write() as conn:
        identity.apply_namespace_aliases(conn, aliases)


def test_namespace_aliases_join_the_two_host_names_when_on_and_part_them_when_off(client: TestClient) -> None:
    post(client, *_orders_events())
    assert {(PG, ORDERS), (PG_ALIAS, ORDERS)} <= set(ours(client))
    assert search(client, "orders") == [(PG, ORDERS), (PG_ALIAS, ORDERS)]

    _namespace_aliases(client, {PG_ALIAS: PG})
    listed = ours(client)
    assert (PG_ALIAS, ORDERS) not in listed
    alias = {"namespace": PG_ALIAS, "name": ORDERS, "via": "namespaceAlias", "producers": [DBT]}
    assert listed[(PG, ORDERS)]["aliases"] == [alias]
    assert search(client, "orders") == [(PG, ORDERS)]
    assert marquez(client, datasets_path(PG_ALIAS, ORDERS), "Dataset")["id"] == {"namespace": PG, "name": ORDERS}
    assert marquez(client, datasets_path(PG_ALIAS), "DatasetList")["totalCount"] == 0

    _namespace_aliases(client, {})
    assert {(PG, ORDERS), (PG_ALIAS, ORDERS)} <= set(ours(client))
    assert ours(client)[(PG, ORDERS)]["aliases"] == []
    assert search(client, "orders") == [(PG, ORDERS), (PG_ALIAS, ORDERS)]
    assert marquez(client, datasets_path(PG_ALIAS, ORDERS), "Dataset")["id"] == {"namespace": PG_ALIAS, "name": ORDERS}


def _writes_claiming(job: str, namespace: str, producer: str, seconds: int) -> dict[str, Any]:
    """``job`` writing ``public.orders`` in ``namespace``, its ``symlinks`` facet naming the metastore table."""
    payload = run_event("COMPLETE", job, time=seconds, outputs=[dataset(ORDERS, namespace=namespace)])
    payload["producer"] = producer
    payload["outputs"][0]["facets"] = {
        "symlinks": {
            "_producer": producer,
            "_schemaURL": f"{FACETS}/SymlinksDatasetFacet.json",
            "identifiers": [{"namespace": HIVE, "name": "shop.orders", "type": "TABLE"}],
        }
    }
    return payload


def test_a_name_claimed_under_two_spellings_of_one_namespace_is_a_conflict_only_while_they_are_apart(
    client: TestClient,
) -> None:
    post(client, _writes_claiming("load", PG, PRODUCER, 0), _writes_claiming("dbt_model", PG_ALIAS, DBT, 60))
    conflict = get(client, "/api/v1/datasets/conflicts")
    assert [(item["namespace"], item["name"]) for item in conflict["conflicts"]] == [(HIVE, "shop.orders")]
    claimed = [{"namespace": HIVE, "name": "shop.orders"}]
    assert ours(client)[(PG, ORDERS)]["aliasConflicts"] == claimed

    _namespace_aliases(client, {PG_ALIAS: PG})  # the two claimants are one dataset: no conflict
    assert get(client, "/api/v1/datasets/conflicts") == {"conflicts": [], "totalCount": 0}
    listed = ours(client)
    assert (PG_ALIAS, ORDERS) not in listed and listed[(PG, ORDERS)]["aliasConflicts"] == []


def test_a_limited_key_sees_only_visible_names_and_its_first_visible_name_stands_for_the_group(
    client: TestClient,
) -> None:
    post(client, spark_event(), airflow_event())
    files = ours(client, FILES_ONLY)  # the canonical name is hidden: the files stand for the table
    assert set(files) == {(FILES, TBL1), (FILES, SOURCES[0]), (FILES, SOURCES[1])}
    assert files[(FILES, TBL1)]["aliases"] == [] and files[(FILES, TBL1)]["symlinks"] == []
    assert search(client, "tbl1", FILES_ONLY) == [(FILES, TBL1)]
    assert search(client, "default", FILES_ONLY) == []  # never found by a hidden name
    assert set(ours(client, FILES_ONLY, name_contains="default")) == set()
    shown = marquez(client, datasets_path(FILES, TBL1), "Dataset", FILES_ONLY)
    assert shown["id"] == {"namespace": FILES, "name": TBL1} and shown["aliases"] == []
    assert client.get(datasets_path(METASTORE, TABLE), headers=FILES_ONLY).status_code == 404

    metastore = ours(client, METASTORE_ONLY)
    assert set(metastore) == {(METASTORE, TABLE)}
    assert metastore[(METASTORE, TABLE)]["aliases"] == []
    assert metastore[(METASTORE, TABLE)]["fields"] == []  # the hidden name's schema is not shown
    assert search(client, "cll_test/tbl1", METASTORE_ONLY) == []
    hidden_writer = marquez(client, datasets_path(METASTORE, TABLE), "Dataset", METASTORE_ONLY)
    assert hidden_writer["aliases"] == [] and "currentVersion" not in hidden_writer

    both = ours(client, BOTH)
    assert set(both) == {(METASTORE, TABLE), (FILES, SOURCES[0]), (FILES, SOURCES[1])}
    assert both[(METASTORE, TABLE)]["aliases"] == [FILE_ALIAS]


def test_dataset_stats_count_a_group_once(client: TestClient) -> None:
    post(client, spark_event(), airflow_event())
    counts = get(client, "/api/v1/stats/datasets", period="DAY")
    assert counts[-1]["count"] == 4  # two sources, the table under two names, the report
    assert get(client, "/api/v1/stats/datasets", FILES_ONLY, period="DAY")[-1]["count"] == 3


def test_a_store_without_groups_lists_and_searches_without_reading_the_groups(client: TestClient) -> None:
    """Listings cost what they cost before on a store where no dataset has two names: the one question "are
    there groups?" rides along with a statement the listing runs anyway, and no group is looked up or joined."""
    post(client, *_orders_events(), spark_event())
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if on_a_request_thread():
            statements.append(statement)

    def group_reads() -> tuple[int, list[str]]:
        """After a listing, a search and a Marquez page: how many statements asked the probe, and the statements
        reading the groups otherwise."""
        statements.clear()
        ours(client)
        search(client, "orders")
        marquez(client, datasets_path(PG), "DatasetList")
        probed = sum(bool(PROBE.search(s)) for s in statements)
        return probed, [s for s in statements if "lineage_dataset_members" in PROBE.sub("", s)]

    engine = client.app.state.store.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        without_groups = group_reads()
        _namespace_aliases(client, {PG_ALIAS: PG})
        with_groups = group_reads()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert without_groups == (3, [])  # one probe per read, inside a statement it runs anyway
    assert len(with_groups[1]) >= 3  # what the groups cost once there are some


def test_the_conflicts_answer_is_the_documented_model_and_needs_a_read_key(client: TestClient) -> None:
    post(client, spark_event(), spark_event(output="/tmp/cll_test/tbl1_moved"), airflow_event())
    body = get(client, "/api/v1/datasets/conflicts")
    assert body["totalCount"] == 1
    assert AliasConflicts.model_validate(body).model_dump() == body
    assert client.get("/api/v1/datasets/conflicts").status_code == 401
    assert "/api/v1/datasets/conflicts" in get(client, "/openapi.json")["paths"]
