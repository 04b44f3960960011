"""Search pages of a common word read in name order from an index, with a total counted up to a bound
(:data:`queries.SEARCH_TOTAL_BOUND`), on SQLite and PostgreSQL: the same pages as sorting every match, the
``Lineage-Total-Count: at-least`` header when counting stopped, an exact total otherwise."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from airflow_lineage_provider.consumer.routers.search import TOTAL_HEADER
from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.read import queries
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate
from airflow_lineage_provider.consumer.store.write.ingest import node_key

pytest_plugins = ("support.consumer_fixtures",)

BOUND = queries.SEARCH_TOTAL_BOUND
#: More matches of "orders" than the bound, in two namespaces and both kinds, names in mixed case.
MATCHING = BOUND + 300
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _nodes(count: int, seed: int = 7) -> list[dict[str, Any]]:
    chance = random.Random(seed)
    rows = []
    for number in range(count):
        word = chance.choice(["orders", "ORDERS", "Orders", "order_lines", "customers"])
        name = f"{chance.choice('abcXYZ')}{chance.randrange(10**6):06d}_{word}_{number}"
        kind = chance.choice(["dataset", "dataset", "job"])
        namespace = chance.choice(["warehouse", "Bi"])
        when = T0 + timedelta(seconds=chance.randrange(10**7))
        rows.append(
            {"node_key": node_key(kind, namespace, name), "kind": kind, "namespace": namespace, "name": name}
            | {"created_at": when, "updated_at": when}
        )
    return rows


def _fill(engine: sa.Engine, rows: list[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        conn.execute(tables.nodes.insert(), rows)


def _codepoints(text: str) -> list[int]:
    return [ord(c) for c in text]


def _expected(rows: list[dict[str, Any]], sort: str = "name", **narrow: str) -> list[tuple[str, str, str]]:
    """Every match of "orders" in the order the search answers, computed here."""
    matches = [
        r for r in rows if "orders" in r["name"].lower() and all(r[key] == value for key, value in narrow.items())
    ]
    if sort == "name":
        matches.sort(key=lambda r: (_codepoints(r["name"]), _codepoints(r["namespace"]), r["kind"]))
    else:
        matches.sort(key=lambda r: (-r["updated_at"].timestamp(), _codepoints(r["name"]), _codepoints(r["namespace"])))
    return [(r["kind"].upper(), r["namespace"], r["name"]) for r in matches]


def _found(client: TestClient, **params: Any) -> tuple[list[tuple[str, str, str]], int, str | None]:
    answer = client.get("/api/v1/search", params={"q": "orders", **params})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    results = [(r["type"], r["namespace"], r["name"]) for r in body["results"]]
    return results, body["totalCount"], answer.headers.get(TOTAL_HEADER)


@pytest.fixture
def filled(store_url: str, client: TestClient) -> Iterator[tuple[TestClient, list[dict[str, Any]]]]:
    rows = _nodes(MATCHING * 5 // 3)  # 3 of 5 names contain "orders" in some case
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        _fill(engine, rows)
    finally:
        engine.dispose()
    assert len(_expected(rows)) > BOUND + 100, "the names must match more often than the bound"
    yield client, rows


def test_pages_of_a_common_word_are_the_sorted_matches_with_a_total_that_stops_at_the_bound(
    filled: tuple[TestClient, list[dict[str, Any]]],
) -> None:
    client, rows = filled
    every = _expected(rows)
    for offset in (0, 50, 900):
        assert _found(client, limit=50, offset=offset) == (every[offset : offset + 50], BOUND, "at-least")
    # a page ending past the bound counts to its end and one more: still a lower bound, one the pages go on from
    deep = len(every) - 120
    assert _found(client, limit=50, offset=deep) == (every[deep : deep + 50], deep + 51, "at-least")
    assert _found(client, limit=50, offset=len(every) - 60) == (every[-60:-10], len(every) - 9, "at-least")
    # the last page and past it: the total is exact
    assert _found(client, limit=50, offset=len(every) - 20) == (every[-20:], len(every), None)
    assert _found(client, limit=50, offset=len(every) + 5) == ([], len(every), None)


def test_narrowed_and_recency_ordered_pages_agree_with_sorting_every_match(
    filled: tuple[TestClient, list[dict[str, Any]]],
) -> None:
    client, rows = filled
    jobs = _expected(rows, kind="job")
    assert len(jobs) < BOUND, "jobs are a third of the nodes: fewer than the bound"
    assert _found(client, filter="JOB", limit=100, offset=30) == (jobs[30:130], len(jobs), None)
    in_bi = _expected(rows, namespace="Bi")
    many = len(in_bi) >= BOUND
    assert _found(client, namespace="Bi", limit=40) == (
        in_bi[:40],
        BOUND if many else len(in_bi),
        "at-least" if many else None,
    )
    recent = _expected(rows, sort="updated_at")
    # most recently updated first reads every match anyway: its total is exact
    assert _found(client, sort="UPDATE_AT", limit=25, offset=10) == (recent[10:35], len(recent), None)
    assert _found(client, sort="UPDATE_AT", limit=25, offset=len(recent) + 1) == ([], len(recent), None)


def test_a_rare_word_is_counted_exactly(filled: tuple[TestClient, list[dict[str, Any]]]) -> None:
    client, rows = filled
    name = sorted(r["name"] for r in rows if "customers" in r["name"])[3]
    answer = client.get("/api/v1/search", params={"q": name})
    assert answer.json()["totalCount"] == 1 and TOTAL_HEADER not in answer.headers
    assert [r["name"] for r in answer.json()["results"]] == [name]


def _page_statement(conn: sa.Connection, text: str) -> tuple[str, Any]:
    ran: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        ran.append((statement, parameters))

    sa.event.listen(conn, "before_cursor_execute", record)
    try:
        queries.search(conn, text, None, None, 100, 0)
    finally:
        sa.event.remove(conn, "before_cursor_execute", record)
    return next(statement for statement in ran if "ORDER BY" in statement[0])


def test_on_postgresql_a_common_word_s_page_is_read_in_order_from_the_name_index(pg_store_url: str) -> None:
    """White box: with a common word (a third of 30,000 names) the planner reads the page from
    :data:`tables.NAME_ORDER_INDEX` in order, and a rare one from the trigram index."""
    engine = create_store_engine(pg_store_url)
    try:
        migrate(engine)
        chance = random.Random(3)
        rows = []
        for number in range(30_000):
            name = f"{chance.randrange(10**8):08d}_{'orders' if number % 3 == 0 else 'lines'}_{number}"
            rows.append(
                {"node_key": node_key("dataset", "db", name), "kind": "dataset", "namespace": "db", "name": name}
                | {"created_at": T0, "updated_at": T0}
            )
        _fill(engine, rows)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE lineage_nodes")  # the machine's autovacuum may be off
        with engine.begin() as conn:
            for text, index in (("orders", tables.NAME_ORDER_INDEX), ("_lines_2999", tables.NAME_SEARCH_INDEX)):
                statement, parameters = _page_statement(conn, text)
                plan = "\n".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {statement}", parameters))
                assert index in plan, (text, plan)
    finally:
        engine.dispose()


def test_a_version_16_store_gains_the_name_index(store_url: str) -> None:
    from test_consumer_name_search_index import _index_names
    from test_consumer_store import back_to_version

    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        _fill(engine, _nodes(50))
        with engine.begin() as conn:
            back_to_version(conn, 16)
        with engine.connect() as conn:
            assert tables.NAME_ORDER_INDEX not in _index_names(conn)
        assert migrate(engine) == LATEST == 18
        with engine.connect() as conn:
            assert tables.NAME_ORDER_INDEX in _index_names(conn)
            results, total = queries.search(conn, "orders", None, None, 10, 0)
        assert total == (len(_expected(_nodes(50))), False) and len(results) == 10
    finally:
        engine.dispose()
