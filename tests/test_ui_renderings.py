"""A templated name's renderings on the lineage page, in a real headless Chromium over a consumer on SQLite fed
real events: ``summarize`` declares ``totals_{{ ds_nodash }}`` and wrote 30 daily partitions. The graph draws
them as the pattern's one node, counting them; its badge (or the page's button, or E on the node) expands them
into 30 nodes and collapses them back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openlineage.client.event_v2 import OutputDataset
from support.browser import wait_for
from support.consumer_helpers import LiveServer
from support.ui_fixtures import serving
from support.ui_page import LineagePage
from test_consumer_rendering_collapse import JOBS, PATTERN, TEMPLATE, WAREHOUSE, _pattern, declared, ran

pytest_plugins = ("support.ui_fixtures",)

SUMMARIZE = f"job:{JOBS}:summarize"
DAYS = [f"202601{day:02d}" for day in range(1, 31)]
RENDERINGS = {f"dataset:{WAREHOUSE}:totals_{day}" for day in DAYS}


def rendering_events() -> list[dict[str, Any]]:
    events = [declared("summarize", [_pattern(WAREHOUSE, TEMPLATE, OutputDataset)], days_ago=40)]
    events += [ran("summarize", 31 - n, outputs=[(WAREHOUSE, f"totals_{day}")]) for n, day in enumerate(DAYS)]
    return events


@pytest.fixture(scope="module")
def renderings_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory, "ui-renderings-store", rendering_events()) as server:
        yield server


@pytest.fixture
def page(browser: Any, renderings_server: LiveServer) -> LineagePage:
    return LineagePage(browser, renderings_server.url).open(nodeId=SUMMARIZE)


def _wait_nodes(page: LineagePage, count: int) -> set[str]:
    wait_for(page.driver, lambda d: page.state() == "ready" and len(page.node_ids()) == count, f"{count} nodes")
    return page.node_ids()


def test_thirty_renderings_are_one_node_that_says_so(page: LineagePage) -> None:
    assert page.node_ids() == {SUMMARIZE, PATTERN}
    pattern = page.nodes()[PATTERN]
    assert "pattern" in pattern["classes"]
    assert "Template of 30 renderings" in pattern["label"] and f"totals_{DAYS[-1]}" in pattern["label"]
    assert page.content(f'#graph .node[data-id="{PATTERN}"] .renderings-badge text') == "\u00d7 30 renderings"


def test_the_badge_expands_the_renderings_and_collapses_them_back(page: LineagePage) -> None:
    page.click(f'#graph .node[data-id="{PATTERN}"] .renderings-badge')
    assert _wait_nodes(page, 32) == {SUMMARIZE, PATTERN} | RENDERINGS
    assert page.query()["expand"] == PATTERN
    assert page.edges() >= {(SUMMARIZE, rendering) for rendering in RENDERINGS}
    assert "expanded" in page.nodes()[PATTERN]["classes"]
    page.click(f'#graph .node[data-id="{PATTERN}"] .renderings-badge')
    assert _wait_nodes(page, 2) == {SUMMARIZE, PATTERN}
    assert "expand" not in page.query()


def test_the_keyboard_expands_and_collapses_them(page: LineagePage) -> None:
    page.click_node(PATTERN)
    assert page.text("#renderings-toggle") == "Expand the 30 renderings"
    assert f"stands for 30 renderings, the latest totals_{DAYS[-1]}" in page.text("#renderings-latest")
    page.click("#renderings-toggle")  # the page's button, reachable by Tab
    _wait_nodes(page, 32)
    assert page.js("return document.activeElement.dataset.id") == PATTERN  # focus kept on the pattern
    assert page.text("#renderings-toggle") == f"Collapse the renderings of {TEMPLATE}"
    page.press("e")  # E on the focused pattern node
    _wait_nodes(page, 2)
    assert page.js("return document.activeElement.dataset.id") == PATTERN
