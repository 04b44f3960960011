"""Fixtures for the page's run history, run view and events browser tests: a consumer on real SQLite holding
:func:`support.ui_runs.runs_events`, served by uvicorn on 127.0.0.1, and its page.

Load them in a test module with ``pytest_plugins = ("support.ui_fixtures", "support.ui_runs_fixtures")`` (the
first gives the ``browser``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.consumer_helpers import LiveServer
from support.ui_fixtures import serving
from support.ui_page import LineagePage
from support.ui_runs import runs_events


@pytest.fixture(scope="module")
def runs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The consumer with the page, on uvicorn over SQLite, holding :func:`runs_events`."""
    with serving(tmp_path_factory, "ui-runs-store", runs_events()) as server:
        yield server


@pytest.fixture
def runs_page(browser: Any, runs_server: LiveServer) -> LineagePage:
    """The lineage page of :func:`runs_server`, in a light colour scheme with no saved theme."""
    from support.browser import set_color_scheme

    set_color_scheme(browser, "light")
    browser.get(f"{runs_server.url}/ui/assets/favicon.svg")  # same origin, to clear the saved theme
    browser.execute_script("window.localStorage.clear()")
    return LineagePage(browser, runs_server.url)
