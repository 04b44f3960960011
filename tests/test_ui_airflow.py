"""The lineage page inside Airflow: the real Airflow 3 API server app (``airflow.api_fastapi.app.create_app``,
plugins loaded from the installed provider) served by uvicorn on 127.0.0.1 in a subprocess with its own
AIRFLOW_HOME, driven by a real headless Chromium: the page under ``/lineage/ui``, Airflow's navigation
entry that embeds it, and a task's link from the page to its task instance in Airflow's UI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from selenium.webdriver.common.by import By
from support.airflow_run import airflow_env, api_server, migrate
from support.browser import wait_for
from support.environment import doc_image
from support.task_jobs import DAG_ID, RUN_ID, TASK_ID, TASK_NODE, task_job_events
from support.ui_graph import CUSTOMERS, DAILY, ENRICH, ENRICHED, LOAD, ORDERS, RAW, REVENUE, post_events, sales_events
from support.ui_page import LineagePage

pytest_plugins = ("support.ui_fixtures",)
pytestmark = pytest.mark.airflow

SCREENSHOT = doc_image("lineage-ui-airflow.png")
#: ``[lineage_provider] consumer_api_key``: the events are sent as a producer sends them.
API_KEY = "ui-airflow-producer-7d2e94b1c0"


@pytest.fixture(scope="module")
def airflow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Airflow's API server with the provider's plugin, the consumer store in ``[lineage_provider]``."""
    root = tmp_path_factory.mktemp("ui-airflow")
    home = root / "airflow"
    migrate(home)
    env = airflow_env(
        home,
        home / "dags",
        {
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL": f"sqlite:///{root / 'lineage.db'}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",  # the UI without a login page
            "AIRFLOW__LINEAGE_PROVIDER__CONSUMER_API_KEY": API_KEY,
        },
    )
    with api_server(env, root / "api-server.log") as url:
        post_events(f"{url}/lineage", sales_events(), headers={"X-API-Key": API_KEY})
        yield url


def log_in(browser: Any, airflow_url: str) -> None:
    """What opening Airflow's UI does in SimpleAuthManager's all-admins mode: ``/auth/token/login`` sets the session
    cookie (Airflow 3.2+ also adds an admin token to every request; 3.1 relies on the cookie alone)."""
    browser.get(f"{airflow_url}/auth/token/login")
    wait_for(browser, lambda d: d.get_cookie("_token") is not None, "Airflow's session cookie")


def _paths(page: LineagePage) -> list[str]:
    """Paths of every request the page made (Resource Timing API)."""
    return page.js("return performance.getEntriesByType('resource').map(e => new URL(e.name).pathname)")


def test_the_page_is_served_and_works_through_the_plugin_route(browser, airflow_url: str) -> None:
    log_in(browser, airflow_url)
    page = LineagePage(browser, f"{airflow_url}/lineage")
    page.open(nodeId=ENRICHED)
    assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
    page.click_node(ENRICH)
    page.wait_text("#details-runs", "FAILED")
    # Chromium adds a fetch's Resource Timing entry in a task of its own, after the page has used the answer.
    wanted = {"/lineage/api/v1/lineage", "/lineage/api/v1/runs"}
    wait_for(page.driver, lambda d: wanted <= set(_paths(page)), "the API calls' timing entries")
    paths = _paths(page)
    assert "/lineage/ui/assets/app.js" in paths
    assert all(p.startswith("/lineage/") for p in paths), paths


def test_airflow_lists_the_page_in_its_navigation(airflow_url: str) -> None:
    token = httpx.get(f"{airflow_url}/auth/token", timeout=10).json()["access_token"]  # all admins: no password
    plugins = httpx.get(f"{airflow_url}/api/v2/plugins", headers={"Authorization": f"Bearer {token}"}).json()["plugins"]
    (ours,) = [p for p in plugins if p["name"] == "lineage_consumer"]
    (view,) = ours["external_views"]
    assert (view["href"], view["destination"], view["url_route"]) == ("/lineage/ui", "nav", "lineage")


def test_the_airflow_ui_embeds_the_page_and_the_page_works_inside(browser, airflow_url: str) -> None:
    log_in(browser, airflow_url)
    browser.get(f"{airflow_url}/plugin/lineage")
    frame = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "iframe[title='Lineage']"), "the frame")[0]
    # The navigation's link to the page: labelled by aria-label (Airflow 3.2+) or by title (3.1).
    links = "a[href$='/plugin/lineage']"
    entry = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, links), "the nav entry")[0]
    assert "Lineage" in (entry.get_attribute("aria-label"), entry.get_attribute("title"))
    assert entry.get_attribute("href") == f"{airflow_url}/plugin/lineage"
    assert entry.find_element(By.TAG_NAME, "img").get_attribute("src") == f"{airflow_url}/lineage/ui/assets/favicon.svg"
    browser.switch_to.frame(frame)
    try:
        page = LineagePage(browser, f"{airflow_url}/lineage")
        page.wait_ready()
        wait_for(browser, lambda d: "enrich_orders" in (page.text("#browse-jobs") or ""), "the job list")
        browser.find_element(By.LINK_TEXT, "enrich_orders").click()
        wait_for(browser, lambda d: page.state() == "ready" and ENRICH in page.node_ids(), "the job's graph")
        assert page.node_ids() == {ENRICH, ORDERS, CUSTOMERS, LOAD, RAW, ENRICHED, DAILY, REVENUE}
    finally:
        browser.switch_to.default_content()
    # A link into Airflow's UI that opens the page on a node: /plugin/lineage/<path of the page>?nodeId=...
    browser.get(f"{airflow_url}/plugin/lineage/lineage/ui?{urlencode({'nodeId': ENRICHED})}")
    frame = wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "iframe[title='Lineage']"), "the frame")[0]
    if "nodeId" not in (frame.get_attribute("src") or ""):
        # Airflow 3.1's and 3.2's UI frame a plugin's page at its own URL, whatever follows /plugin/<route>/ (the
        # sub-path and query reach the frame in 3.3): no deep link there; the page itself works, as checked above.
        assert frame.get_attribute("src") == f"{airflow_url}/lineage/ui"
        return
    browser.switch_to.frame(frame)
    try:
        wait_for(browser, lambda d: page.state() == "ready" and ENRICHED in page.node_ids(), "the linked node")
        assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
    finally:
        browser.switch_to.default_content()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOT))


def test_a_task_links_to_its_task_instance_in_airflows_ui(browser, airflow_url: str) -> None:
    """Inside Airflow, the node of an Airflow task links to its task instance in Airflow's own UI."""
    post_events(f"{airflow_url}/lineage", task_job_events(), headers={"X-API-Key": API_KEY})
    log_in(browser, airflow_url)
    page = LineagePage(browser, f"{airflow_url}/lineage").open(nodeId=TASK_NODE)
    instance = f"/dags/{DAG_ID}/runs/{quote(RUN_ID, safe='')}/tasks/{TASK_ID}"
    assert page.js("return document.querySelector('#graph .airflow-link').getAttribute('href')") == instance
    page.click("#graph .airflow-link")
    wait_for(browser, lambda d: d.current_url == f"{airflow_url}{instance}", "Airflow's task instance page")
