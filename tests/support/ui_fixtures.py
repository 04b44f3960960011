"""Fixtures for the lineage page's tests: a consumer on real SQLite filled through its ingest API, served by
uvicorn on 127.0.0.1, one headless Chromium per module, and the page (:class:`support.ui_page.LineagePage`).

Load them in a test module with ``pytest_plugins = ("support.ui_fixtures",)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.browser import headless_chromium, require_chromium
from support.consumer_helpers import LiveServer
from support.ui_graph import sales_events
from support.ui_page import LineagePage


def ui_app(store_url: str) -> Any:
    """A consumer app serving the lineage page, as ``airflow-lineage serve`` and the plugin build it."""
    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.ui import UI_PATH, lineage_ui_router

    app = create_app(store_url=store_url)
    if not any(getattr(route, "path", None) == UI_PATH for route in app.routes):
        app.include_router(lineage_ui_router())
    return app


def post_events(base_url: str, events: list[dict[str, Any]], chunk: int = 500) -> None:
    """Send events to the consumer's batch ingest endpoint, checking every one is stored."""
    with httpx.Client(timeout=120) as client:
        for start in range(0, len(events), chunk):
            batch = events[start : start + chunk]
            answer = client.post(f"{base_url}/api/v1/lineage/batch", json=batch)
            assert answer.status_code == 200, answer.text[:2000]
            assert answer.json()["successful"] == len(batch), answer.text[:2000]


@pytest.fixture(scope="module")
def sales_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The consumer with the page, on uvicorn, holding :func:`support.ui_graph.sales_events`."""
    store = tmp_path_factory.mktemp("ui-store") / "lineage.db"
    app = ui_app(f"sqlite:///{store}")
    with LiveServer(app) as server:
        post_events(server.url, sales_events())
        yield server
    app.state.store.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (each test opens its own page)."""
    require_chromium()
    with headless_chromium() as driver:
        yield driver


@pytest.fixture
def page(browser: Any, sales_server: LiveServer) -> LineagePage:
    """The lineage page of :func:`sales_server`, in a light colour scheme with no saved theme."""
    from support.browser import set_color_scheme

    set_color_scheme(browser, "light")
    browser.get(f"{sales_server.url}/ui/assets/favicon.svg")  # same origin, to clear the saved theme
    browser.execute_script("window.localStorage.clear()")
    return LineagePage(browser, sales_server.url)
