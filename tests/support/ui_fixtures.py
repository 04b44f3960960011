"""Fixtures for the lineage page's tests: a consumer on real SQLite filled through its ingest API, served by
uvicorn on 127.0.0.1, one headless Chromium per module, and the page (:class:`support.ui_page.LineagePage`).

Load them in a test module with ``pytest_plugins = ("support.ui_fixtures",)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from support.browser import headless_chromium, require_chromium
from support.consumer_helpers import LiveServer
from support.ui_graph import post_events, sales_events
from support.ui_page import LineagePage, ui_app


@contextmanager
def serving(
    tmp_path_factory: pytest.TempPathFactory, folder: str, events: list[dict[str, Any]]
) -> Iterator[LiveServer]:
    """The consumer with the page, on uvicorn over a fresh SQLite store in ``folder``, holding ``events``."""
    store = tmp_path_factory.mktemp(folder) / "lineage.db"
    app = ui_app(f"sqlite:///{store}")
    with LiveServer(app) as server:
        post_events(server.url, events)
        yield server
    app.state.store.dispose()


@pytest.fixture(scope="module")
def sales_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The consumer with the page, on uvicorn, holding :func:`support.ui_graph.sales_events`."""
    with serving(tmp_path_factory, "ui-store", sales_events()) as server:
        yield server


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
