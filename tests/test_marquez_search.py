"""Marquez's ``GET /api/v1/search``: ``q`` with Marquez's wildcards, ``filter``, ``sort``, ``namespace``,
``before``/``after`` days and ``limit`` — every answer checked against Marquez's ``SearchResultList`` — on
SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event
from support.marquez_spec import assert_marquez

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope

pytest_plugins = ("support.consumer_fixtures",)

DAY = 86_400  # the events' times are T0 (2026-03-01T12:00Z) + days


def _search(client: TestClient, path: str = "/api/v1/search", headers: dict | None = None, **params: Any) -> dict:
    answer = client.get(path, params=params, headers=headers or {})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert_marquez("SearchResultList", body)
    return body


def _names(body: dict[str, Any]) -> list[str]:
    return [r["name"] for r in body["results"]]


@pytest.fixture
def catalog(client: TestClient) -> TestClient:
    """``load_orders`` (day 0) writes warehouse.orders and warehouse.order_items; ``Report_Orders`` (day 2)
    reads orders; ``close_books`` in ``finance`` (day 5) writes finance.orders_ledger; ``flags`` (day 1) writes
    ``100%_done``, ``a_b`` and ``axb`` (names holding Marquez's wildcards)."""
    events = [
        run_event("COMPLETE", "load_orders", time=0, outputs=[dataset("orders"), dataset("order_items")]),
        run_event("COMPLETE", "Report_Orders", time=2 * DAY, inputs=[dataset("orders")]),
        run_event(
            "COMPLETE", "close_books", time=5 * DAY, namespace="finance", outputs=[dataset("orders_ledger", "finance")]
        ),
        run_event("COMPLETE", "flags", time=DAY, outputs=[dataset("100%_done"), dataset("a_b"), dataset("axb")]),
    ]
    answer = client.post("/api/v1/lineage/batch", json=events)
    assert answer.status_code == 200 and answer.json()["successful"] == 4, answer.text
    return client


def test_names_match_in_any_case_sorted_by_name_by_default(catalog: TestClient) -> None:
    body = _search(catalog, q="ORDER")
    assert _names(body) == ["Report_Orders", "load_orders", "order_items", "orders", "orders_ledger"]  # byte order
    assert body["totalCount"] == 5
    by_name = {r["name"]: r for r in body["results"]}
    assert by_name["orders"] == {
        "type": "DATASET",
        "name": "orders",
        "updatedAt": "2026-03-03T12:00:00.000000Z",  # last named by Report_Orders on day 2
        "namespace": "warehouse",
        "nodeId": "dataset:warehouse:orders",
    }
    assert by_name["Report_Orders"]["type"] == "JOB"
    assert by_name["Report_Orders"]["nodeId"] == "job:pipelines:Report_Orders"
    assert _search(catalog, q="ORDER", sort="NAME") == body
    assert _search(catalog, q="ORDER", sort="name") == body


def test_update_at_sorts_the_most_recently_updated_first(catalog: TestClient) -> None:
    body = _search(catalog, q="order", sort="UPDATE_AT")
    times = [r["updatedAt"] for r in body["results"]]
    assert times == sorted(times, reverse=True)
    assert _names(body)[0] == "orders_ledger" and _names(body)[-1] in {"load_orders", "order_items"}
    assert _search(catalog, q="order", sort="updated_at") == body


def test_filter_keeps_jobs_or_datasets(catalog: TestClient) -> None:
    jobs = _search(catalog, q="order", filter="JOB")
    assert _names(jobs) == ["Report_Orders", "load_orders"] and jobs["totalCount"] == 2
    datasets = _search(catalog, q="order", filter="DATASET")
    assert {r["type"] for r in datasets["results"]} == {"DATASET"} and datasets["totalCount"] == 3
    assert _search(catalog, q="order", filter="job") == jobs  # the spec's lower-case words too


def test_namespace_and_days_narrow_the_matches(catalog: TestClient) -> None:
    assert _names(_search(catalog, q="order", namespace="finance")) == ["orders_ledger"]
    assert _search(catalog, q="order", namespace="nowhere") == {"totalCount": 0, "results": []}
    # updated strictly after 2026-03-03T00:00Z / strictly before 2026-03-03T00:00Z
    assert set(_names(_search(catalog, q="order", after="2026-03-03"))) == {"orders", "Report_Orders", "orders_ledger"}
    assert set(_names(_search(catalog, q="order", before="2026-03-03"))) == {"load_orders", "order_items"}
    window = _search(catalog, q="order", after="2026-03-02", before="2026-03-04")
    assert set(_names(window)) == {"orders", "Report_Orders"} and window["totalCount"] == 2


def test_percent_and_underscore_are_wildcards_and_a_backslash_escapes_them(catalog: TestClient) -> None:
    everything = _search(catalog, q="%")
    assert everything["totalCount"] == 10  # 4 jobs and 6 datasets
    assert set(_names(_search(catalog, q="a_b"))) == {"a_b", "axb"}
    assert _names(_search(catalog, q="a\\_b")) == ["a_b"]
    assert _names(_search(catalog, q="100\\%")) == ["100%_done"]
    assert _names(_search(catalog, q="o%_l")) == ["orders_ledger"]


def test_limit_and_offset_page_with_the_whole_total(catalog: TestClient) -> None:
    whole = _search(catalog, q="o")
    pages = [_search(catalog, q="o", limit=2, offset=start) for start in range(0, whole["totalCount"], 2)]
    assert [r for page in pages for r in page["results"]] == whole["results"]
    assert {page["totalCount"] for page in pages} == {whole["totalCount"]}
    assert _search(catalog, q="o", offset=1000) == {"totalCount": whole["totalCount"], "results": []}


def test_a_blank_query_matches_nothing_and_the_web_ui_path_answers(catalog: TestClient) -> None:
    assert _search(catalog, q="   ") == {"totalCount": 0, "results": []}
    # Marquez's web UI asks /api/v1/search/?q=...&sort=NAME&limit=100 (with a slash)
    slash = _search(catalog, "/api/v1/search/", q="orders", sort="NAME", limit=100)
    assert slash == _search(catalog, q="orders", sort="NAME", limit=100)


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"q": "x", "filter": "RUN"}, "filter: 'RUN'"),
        ({"q": "x", "sort": "size"}, "sort: 'size'"),
        ({"q": "x", "before": "15/09/2022"}, "before: '15/09/2022'"),
        ({"q": "x", "after": "2022-09-15T07:47:19Z"}, "after: '2022-09-15T07:47:19Z'"),
        ({"q": "x", "after": "2022-02-30"}, "after: '2022-02-30'"),
        ({"q": "x", "limit": 0}, "limit"),
        ({"q": "a\x00b"}, "q"),
        ({}, "q"),
    ],
)
def test_bad_parameters_answer_400_naming_the_value(client: TestClient, params: dict, named: str) -> None:
    answer = client.get("/api/v1/search", params=params)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["detail"]


def test_a_namespace_limited_key_finds_and_counts_only_its_namespaces(store_url: str) -> None:
    keys = (
        ApiKey("all", Access.ADMIN, "all-secret"),
        ApiKey("wh", Access.READ, "wh-secret", NamespaceScope(("warehouse",))),
    )
    app = create_app(store_url=store_url, keys=keys)
    everyone, limited = {"X-API-Key": "all-secret"}, {"X-API-Key": "wh-secret"}
    try:
        with TestClient(app) as client:
            events = [
                run_event("COMPLETE", "load_orders", outputs=[dataset("orders")]),
                run_event("COMPLETE", "ledger", namespace="finance", outputs=[dataset("orders_ledger", "finance")]),
            ]
            assert client.post("/api/v1/lineage/batch", json=events, headers=everyone).status_code == 200
            assert _search(client, headers=everyone, q="order")["totalCount"] == 3
            seen = _search(client, headers=limited, q="order")
            assert seen == {
                "totalCount": 1,
                "results": [
                    {
                        "type": "DATASET",
                        "name": "orders",
                        "updatedAt": "2026-03-01T12:00:00.000000Z",
                        "namespace": "warehouse",
                        "nodeId": "dataset:warehouse:orders",
                    }
                ],
            }
            assert _search(client, headers=limited, q="order", namespace="finance")["totalCount"] == 0
    finally:
        app.state.store.dispose()
