"""The standalone lineage page on a consumer that needs a key: it asks for one, keeps it in the tab's session
storage, sends it as a header (never in a URL) and asks again when the key is refused — in headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.browser import wait_for
from support.consumer_helpers import LiveServer
from support.ui_graph import CUSTOMERS, DAILY, ENRICH, ENRICHED, ORDERS, REVENUE, post_events, sales_events
from support.ui_page import LineagePage

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey

pytest_plugins = ("support.ui_fixtures",)

READ_KEY, ADMIN_KEY = "page-reader-key", "page-admin-key"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    store = tmp_path_factory.mktemp("ui-keys") / "lineage.db"
    keys = (ApiKey("page", Access.READ, READ_KEY), ApiKey("loader", Access.ADMIN, ADMIN_KEY))
    app = create_app(store_url=f"sqlite:///{store}", keys=keys)
    with LiveServer(app) as server:
        post_events(server.url, sales_events(), headers={"X-API-Key": ADMIN_KEY})
        yield server
    app.state.store.dispose()


def _enter_key(browser: Any, key: str) -> str:
    """Type ``key`` into the page's key dialog (waiting for it) and submit; returns the dialog's reason text."""
    wait_for(browser, lambda d: d.execute_script("return document.getElementById('key-dialog').open"), "the dialog")
    reason = browser.execute_script("return document.getElementById('key-reason').textContent")
    browser.execute_script(
        "const input = document.getElementById('key-input'); input.value = arguments[0];"
        "document.getElementById('key-form').requestSubmit();",
        key,
    )
    return reason


def test_the_page_asks_for_a_key_and_draws_with_it(browser: Any, keyed_server: LiveServer) -> None:
    browser.get(f"{keyed_server.url}/ui/assets/favicon.svg")  # same origin: start with no key in the tab
    browser.execute_script("window.sessionStorage.clear()")
    page = LineagePage(browser, keyed_server.url)
    browser.get(f"{keyed_server.url}/ui?nodeId={ENRICHED}")
    assert _enter_key(browser, "a-wrong-key") == "This lineage server needs a key to read."
    assert _enter_key(browser, READ_KEY) == "That key was refused: enter another one."
    page.wait_ready()
    assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
    assert page.js("return sessionStorage.getItem('lineage-api-key')") == READ_KEY
    urls = page.js("return performance.getEntriesByType('resource').map(e => e.name)")
    assert urls and not any(READ_KEY in url or "a-wrong-key" in url for url in urls)
    # The same tab keeps the key: a reload draws without asking again.
    page.open(nodeId=ENRICHED)
    assert not page.js("return document.getElementById('key-dialog').open")
    assert page.node_ids() == {ENRICHED, ENRICH, ORDERS, CUSTOMERS, DAILY, REVENUE}
