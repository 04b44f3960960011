"""The lineage page in a real headless Chromium: what it draws for a known graph, search, depth, direction,
namespaces (with ``/`` and ``:``), and the screenshot the docs show."""

from __future__ import annotations

import httpx
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from support.browser import wait_for
from support.environment import doc_image
from support.ui_graph import (
    AUDIT,
    AUDIT_LOG,
    CLICKS,
    CUSTOMERS,
    DAILY,
    DASHBOARD,
    DEDUPE,
    ENRICH,
    ENRICHED,
    LAKE,
    LOAD,
    ORDERS,
    PG,
    PUBLISH,
    RAW,
    REVENUE,
)
from support.ui_page import LineagePage

pytest_plugins = ("support.ui_fixtures",)

SCREENSHOT = doc_image("lineage-ui.png")

ONE_HOP = {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
ONE_HOP_EDGES = {(ORDERS, ENRICH), (CUSTOMERS, ENRICH), (ENRICH, ENRICHED), (ENRICHED, DAILY), (DAILY, REVENUE)}
TWO_HOPS = ONE_HOP | {LOAD, RAW, PUBLISH, DASHBOARD}


def _server_graph(base_url: str, **params: object) -> tuple[set[str], set[tuple[str, str]]]:
    graph = httpx.get(f"{base_url}/api/v1/lineage", params=params).json()["graph"]
    return {n["id"] for n in graph}, {(e["origin"], e["destination"]) for n in graph for e in n["outEdges"]}


def test_a_node_opens_with_one_hop_each_way_drawn_as_the_server_answers(page: LineagePage, sales_server) -> None:
    page.open(nodeId=ENRICHED)
    assert page.node_ids() == ONE_HOP
    assert page.edges() == ONE_HOP_EDGES
    assert (page.node_ids(), page.edges()) == _server_graph(sales_server.url, nodeId=ENRICHED, depth=1)
    assert page.js("return document.getElementById('depth').value") == "1"
    assert page.js("return document.getElementById('direction').value") == "both"
    assert page.text("#status") == "analytics.orders_enriched: 6 nodes, 5 edges, depth 1 both ways."
    assert "root" in page.nodes()[ENRICHED]["classes"]
    assert page.details_title() == "analytics.orders_enriched"  # the starting node's details open with it


def test_the_graph_is_a_left_to_right_layered_dag_with_jobs_and_datasets_styled_apart(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED, depth=2)
    nodes = page.nodes()
    for origin, destination in page.edges():
        assert nodes[origin]["x"] + nodes[origin]["width"] < nodes[destination]["x"], (origin, destination)
    columns = sorted({round(n["x"]) for n in nodes.values()})
    assert len(columns) == 9  # raw → load → orders → enrich → enriched → daily → revenue → publish → dashboard
    boxes = list(nodes.values())
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
            assert apart or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"], (a["id"], b["id"])
    job, dataset = nodes[ENRICH], nodes[ENRICHED]
    assert "job" in job["classes"] and "dataset" in dataset["classes"]
    assert job["fill"] != dataset["fill"] and job["rx"] != dataset["rx"]  # colour and shape
    assert job["label"].startswith("Job enrich_orders in namespace airflow://prod. Latest run FAILED.")
    assert dataset["label"].startswith("Dataset analytics.orders_enriched in namespace warehouse.")


def test_a_cycle_is_drawn_with_its_closing_edge_dashed(page: LineagePage) -> None:
    page.open(nodeId=CLICKS)
    assert page.node_ids() == {CLICKS, DEDUPE}
    assert page.edges() == {(CLICKS, DEDUPE), (DEDUPE, CLICKS)}
    back = page.js(
        "return [...document.querySelectorAll('#graph .edge.back')].map(e => [e.dataset.from, e.dataset.to])"
    )
    assert len(back) == 1


def test_search_by_name_and_choose_a_result_with_the_keyboard(page: LineagePage) -> None:
    page.open()
    assert page.node_ids() == set()
    assert "enrich_orders" in page.text("#browse-jobs")  # the landing page lists what the store holds
    box = page.driver.find_element(By.ID, "search-input")
    box.send_keys("revenue")
    wait_for(page.driver, lambda d: len(page.texts("#search-results [role=option][data-node-id]")) == 3, "3 results")
    options = page.js(
        "return [...document.querySelectorAll('#search-results [data-node-id]')].map(o => o.dataset.nodeId)"
    )
    assert set(options) == {DAILY, REVENUE, DASHBOARD}
    assert box.get_attribute("aria-expanded") == "true"
    position = options.index(REVENUE)
    for _ in range(position + 1):
        box.send_keys(Keys.ARROW_DOWN)
    assert box.get_attribute("aria-activedescendant") == f"search-option-{position}"
    box.send_keys(Keys.ENTER)
    wait_for(page.driver, lambda d: page.state() == "ready" and REVENUE in page.node_ids(), "the chosen node's graph")
    assert page.query()["nodeId"] == REVENUE
    assert page.node_ids() == {REVENUE, DAILY, ENRICHED, PUBLISH, DASHBOARD}


def test_the_depth_selector_and_direction_ask_for_a_bigger_or_one_sided_walk(page: LineagePage, sales_server) -> None:
    page.open(nodeId=ENRICHED)
    page.select("depth", "2")
    wait_for(page.driver, lambda d: page.state() == "ready" and page.node_ids() == TWO_HOPS, "the depth-2 graph")
    assert page.query()["depth"] == "2"
    assert (page.node_ids(), page.edges()) == _server_graph(sales_server.url, nodeId=ENRICHED, depth=2)
    page.select("direction", "upstream")
    wait_for(page.driver, lambda d: page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, LOAD, RAW}, "upstream")
    assert page.api_requests("/api/v1/lineage")[-1] == {
        "nodeId": ENRICHED,
        "depth": "2",
        "direction": "upstream",
        "maxNodes": "501",  # the limit shown plus one: getting that one back means the walk was cut
    }
    assert page.js("return document.getElementById('cut-notice').hidden") is True


def test_namespaces_with_slash_and_colon_work_in_links_ids_and_details(page: LineagePage) -> None:
    page.open(nodeId=RAW)
    assert page.node_ids() == {RAW, LOAD, ORDERS}
    assert page.details_title() == "raw/orders:2026-03"
    assert page.text("#details .namespace") == LAKE
    page.click_node(ORDERS)
    assert page.text("#details .namespace") == PG
    page.driver.find_element(By.ID, "recenter").click()
    wait_for(page.driver, lambda d: page.query().get("nodeId") == ORDERS and page.state() == "ready", "recentred")
    assert "nodeId=dataset%3Apostgres%3A%2F%2Fpg.example%3A5432%3Ashop.public.orders" in page.driver.current_url
    assert page.node_ids() == {ORDERS, LOAD, RAW, ENRICH, ENRICHED, AUDIT, AUDIT_LOG}  # datasets one job away
    page.driver.back()
    wait_for(page.driver, lambda d: page.state() == "ready" and page.node_ids() == {RAW, LOAD, ORDERS}, "history")


def test_the_namespace_filter_narrows_search_and_listings(page: LineagePage) -> None:
    page.open()
    options = page.js("return [...document.querySelectorAll('#namespace option')].map(o => o.value)")
    assert options == ["", "airflow://prod", "audit", PG, LAKE, "warehouse"]
    box = page.driver.find_element(By.ID, "search-input")
    box.send_keys("orders")
    wait_for(page.driver, lambda d: len(page.texts("#search-results [data-node-id]")) == 7, "7 results for orders")
    page.select("namespace", PG)
    wait_for(
        page.driver,
        lambda d: (
            page.js(
                "return [...document.querySelectorAll('#search-results [data-node-id]')].map(o => o.dataset.nodeId)"
            )
            == [ORDERS]
        ),
        "only the PostgreSQL table",
    )
    assert page.query() == {"namespace": PG}
    assert page.texts("#browse-datasets li a") == ["shop.public.customers", "shop.public.orders"]
    assert page.texts("#browse-jobs li") == ["None yet."]
    page.select("namespace", "audit")
    wait_for(page.driver, lambda d: page.texts("#browse-jobs li a") == ["audit_orders"], "the audit job")
    assert page.texts("#browse-datasets li a") == ["orders_audit_log"]


def test_an_unknown_node_says_so(page: LineagePage) -> None:
    page.open(nodeId="dataset:warehouse:no_such_table")
    assert page.state() == "error"
    assert page.text("#error") == "No job or dataset dataset:warehouse:no_such_table in this lineage store."
    assert page.node_ids() == set()


def test_screenshot_for_the_docs(page: LineagePage) -> None:
    """The picture in docs/ui.md: the first view of a dataset, with a column's lineage highlighted."""
    page.open(nodeId=ENRICHED)
    page.driver.find_element(By.CSS_SELECTOR, 'button[data-field="amount"]').click()
    page.wait_text("#column-lineage", "Flows into (2)")
    ActionChains(page.driver).move_to_element(page.driver.find_element(By.ID, "status")).perform()
    page.screenshot(SCREENSHOT)
    header = SCREENSHOT.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")) == (1400, 900)
    assert AUDIT_LOG not in page.node_ids()
