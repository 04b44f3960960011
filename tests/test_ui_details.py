"""The lineage page's details panel in a real headless Chromium: schema fields, facets (Egeria's supply chain
and governance action), latest runs with state and duration, and the column lineage of a field."""

from __future__ import annotations

from selenium.webdriver.common.by import By
from support.ui_graph import (
    CUSTOMERS,
    DAILY,
    ENRICH,
    ENRICHED,
    GOVERNANCE,
    ORDERS,
    PG,
    PUBLISH,
    REVENUE,
    SUPPLY_CHAIN,
    run_id,
)
from support.ui_page import LineagePage

pytest_plugins = ("support.ui_fixtures",)


def _rows(page: LineagePage) -> list[list[str]]:
    return page.js(
        "return [...document.querySelectorAll('#details-schema tbody tr')].map(r => [...r.cells].map(c => c.innerText))"
    )


def test_a_dataset_shows_its_latest_schema_and_its_facets(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED)
    page.click_node(ORDERS)
    assert page.details_title() == "shop.public.orders"
    assert page.text("#details .namespace") == PG
    assert page.text("#details .id") == ORDERS
    assert _rows(page) == [
        ["id", "INTEGER", "Order number"],
        ["customer_id", "INTEGER", "Who ordered"],
        ["amount", "NUMERIC(10,2)", "Order total in EUR"],
    ]
    page.wait_text("#details-facets", "columnLineage")
    assert page.texts("#details-facets summary") == ["columnLineage", "schema"]
    page.click_node(ENRICHED)
    page.wait_text("#details .description", "Orders joined with their customers, one row per order.")


def test_a_job_shows_its_latest_runs_with_state_duration_and_egeria_supply_chain(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED)
    page.click_node(ENRICH)
    assert page.details_title() == "enrich_orders"
    page.wait_text("#details-runs h3", "Latest runs (2 of 2)")
    runs = page.js(
        """return [...document.querySelectorAll('#details-runs .run')].map(r => ({
             id: r.dataset.runId, state: r.querySelector('.state').innerText,
             duration: r.querySelector('.duration').innerText,
             chain: r.querySelector('.supply-chain .value')?.innerText ?? null,
             action: r.querySelector('.governance-action dl')?.innerText ?? null,
             error: r.querySelector('.run-error')?.innerText ?? null}))"""
    )
    assert [(r["id"], r["state"], r["duration"]) for r in runs] == [
        (run_id("enrich-2"), "FAILED", "42 s"),
        (run_id("enrich-1"), "COMPLETED", "2 min 5 s"),
    ]
    assert [r["chain"] for r in runs] == [SUPPLY_CHAIN, SUPPLY_CHAIN]
    for key, value in GOVERNANCE.items():
        assert f"{key}\n{value}" in runs[0]["action"]
    assert runs[0]["error"] == "Error: division by zero"
    assert runs[1]["error"] is None
    page.wait_text("#details-io", "Outputs")
    inputs = page.texts("#details-io ul")[0].splitlines()
    assert inputs == [f"{PG} : shop.public.customers", f"{PG} : shop.public.orders"]
    assert page.texts("#details-io ul")[1] == "warehouse : analytics.orders_enriched"


def test_a_running_job_says_it_is_still_running(page: LineagePage) -> None:
    page.open(nodeId=REVENUE)
    page.click_node(PUBLISH)
    page.wait_text("#details-runs h3", "Latest runs (1 of 1)")
    assert page.text("#details-runs .state") == "RUNNING"
    assert page.text("#details-runs .duration") == "still running"
    assert page.text("#details-runs .supply-chain") is None  # no Egeria facet on this job's runs


def test_the_column_lineage_of_a_field_is_listed_and_highlighted(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED)
    page.driver.find_element(By.CSS_SELECTOR, 'button[data-field="amount"]').click()
    page.wait_text("#column-lineage", "Flows into (2)")
    lists = page.js(
        """return [...document.querySelectorAll('#column-lineage ul')].map(u =>
             [...u.children].map(li => [li.dataset.fieldId, li.innerText]))"""
    )
    assert lists == [
        [
            [f"datasetField:{PG}:shop.public.orders:amount", f"shop.public.orders.amount {PG} · DIRECT/IDENTITY"],
            ["datasetField:s3://lake:raw/orders:2026-03:cents", "raw/orders:2026-03.cents s3://lake · 2 hops"],
        ],
        [
            [
                "datasetField:warehouse:analytics.daily_revenue:revenue",
                "analytics.daily_revenue.revenue warehouse · DIRECT/AGGREGATION",
            ],
            [
                "datasetField:warehouse:reports.revenue_dashboard:revenue",
                "reports.revenue_dashboard.revenue warehouse · 2 hops",
            ],
        ],
    ]
    highlighted = {i for i, n in page.nodes().items() if "hl" in n["classes"]}
    assert highlighted == {ORDERS, ENRICH, ENRICHED, DAILY, REVENUE}  # customers feeds no amount
    assert page.edges(highlighted=True) == {(ORDERS, ENRICH), (ENRICH, ENRICHED), (ENRICHED, DAILY), (DAILY, REVENUE)}
    assert CUSTOMERS in page.node_ids()


def test_a_field_without_column_lineage_says_so(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED)
    page.click_node(CUSTOMERS)
    page.driver.find_element(By.CSS_SELECTOR, 'button[data-field="id"]').click()
    page.wait_text("#column-lineage", "No column lineage recorded for id.")
    assert not any("hl" in n["classes"] for n in page.nodes().values())
