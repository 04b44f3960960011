"""The lineage page on a graph of a few thousand nodes, in a real headless Chromium: it asks only for the
bounded subgraph, says when the walk was cut at ``maxNodes``, shows the nearest nodes, and stays responsive.

How long each of these takes is measured by ``bench/ui_big_graph.py`` (docs/benchmarks.md), not asserted here:
a time bound fails on a loaded machine and says nothing on a fast one."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

import httpx
import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from support.browser import wait_for
from support.consumer_helpers import LiveServer
from support.ui_graph import layered_events, post_events
from support.ui_page import LineagePage, ui_app

pytest_plugins = ("support.ui_fixtures",)

LAYERS, WIDTH = 20, 80  # 1,600 jobs and 1,680 datasets
START = "dataset:big:ds.10.40"
REACHABLE = 2000  # nodes within depth 20 of START, both ways


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    app = ui_app(f"sqlite:///{tmp_path_factory.mktemp('ui-big') / 'lineage.db'}")
    with LiveServer(app) as server:
        post_events(server.url, layered_events(LAYERS, WIDTH))
        yield server
    app.state.store.dispose()


@pytest.fixture
def big_page(browser, big_server: LiveServer) -> LineagePage:
    return LineagePage(browser, big_server.url)


def _hops_from_start(base_url: str) -> dict[str, int]:
    """Hops from START to every reachable node (downstream along edges, upstream against them)."""
    graph = httpx.get(
        f"{base_url}/api/v1/lineage", params={"nodeId": START, "depth": 20, "maxNodes": 100_000}, timeout=60
    ).json()["graph"]
    hops = {START: 0}
    for key, end in (("outEdges", "destination"), ("inEdges", "origin")):
        edges = {n["id"]: [e[end] for e in n[key]] for n in graph}
        seen, queue = {START: 0}, deque([START])
        while queue:
            node = queue.popleft()
            for nxt in edges.get(node, []):
                if nxt not in seen:
                    seen[nxt] = seen[node] + 1
                    queue.append(nxt)
        for node, n in seen.items():
            hops[node] = min(hops.get(node, n), n)
    return hops


def test_the_store_holds_a_few_thousand_nodes(big_server: LiveServer) -> None:
    jobs = httpx.get(f"{big_server.url}/api/v1/jobs", params={"limit": 1}).json()["totalCount"]
    datasets = httpx.get(f"{big_server.url}/api/v1/datasets", params={"limit": 1}).json()["totalCount"]
    assert (jobs, datasets) == (LAYERS * WIDTH, (LAYERS + 1) * WIDTH)
    assert len(_hops_from_start(big_server.url)) == REACHABLE


def test_a_walk_cut_at_max_nodes_is_reported_with_the_nearest_nodes_drawn(big_page: LineagePage, big_server) -> None:
    big_page.open(nodeId=START, depth=20, maxNodes=500)
    assert big_page.api_requests("/api/v1/lineage") == [
        {"nodeId": START, "depth": "20", "direction": "both", "maxNodes": "501"}
    ]
    assert big_page.js("return document.getElementById('cut-notice').hidden") is False
    assert big_page.text("#cut-text") == (
        "The walk was cut at maxNodes = 500: showing the 500 nearest nodes. "
        "Lower the depth or raise the limit to see more."
    )
    drawn = big_page.node_ids()
    assert len(drawn) == 500 and START in drawn
    hops = _hops_from_start(big_server.url)
    assert max(hops[n] for n in drawn) <= min(hops[n] for n in set(hops) - drawn)  # nearest first

    big_page.driver.find_element(By.ID, "cut-more").click()
    wait_for(big_page.driver, lambda d: big_page.state() == "ready" and len(big_page.node_ids()) == 1000, "1000 nodes")
    assert big_page.query()["maxNodes"] == "1000"
    assert "cut at maxNodes = 1000" in big_page.text("#cut-text")


#: Resolves (Selenium's async script callback) with the order in which a task queued now, and the animation
#: frame after it, ran: only a main thread that is free again runs them.
NEXT_TASK_AND_FRAME = """
const done = arguments[arguments.length - 1];
const order = ["queued"];
setTimeout(() => {
  order.push("task");
  requestAnimationFrame(() => { order.push("frame"); done(order); });
}, 0);
"""


def test_the_whole_walk_of_two_thousand_nodes_draws_and_stays_responsive(big_page: LineagePage) -> None:
    big_page.open(nodeId=START, depth=20, maxNodes=5000)
    assert len(big_page.node_ids()) == REACHABLE
    assert big_page.js("return document.getElementById('cut-notice').hidden") is True  # nothing was cut
    render_ms = big_page.driver.find_element(By.ID, "graph").get_attribute("data-render-ms")
    assert render_ms is not None and int(render_ms) >= 0  # the page times its drawing (the benchmark reads it)

    big_page.js("document.querySelector('#graph .node.root').focus()")
    ActionChains(big_page.driver).send_keys(Keys.ARROW_RIGHT).perform()
    moved = big_page.js("return document.activeElement.dataset.id")
    assert moved.startswith("job:big:job.11.")
    ActionChains(big_page.driver).send_keys(Keys.ENTER).perform()
    wait_for(big_page.driver, lambda d: big_page.js("return document.body.dataset.selected") == moved, "details")

    before = big_page.js("return document.querySelector('#graph g.viewport').getAttribute('transform')")
    big_page.driver.find_element(By.ID, "zoom-fit").click()
    big_page.driver.find_element(By.ID, "zoom-in").click()
    # After both zooms the main thread goes on: a task queued behind them runs, then a frame is drawn, and
    # the drawing's transform has changed.
    assert big_page.driver.execute_async_script(NEXT_TASK_AND_FRAME) == ["queued", "task", "frame"]
    assert big_page.js("return document.querySelector('#graph g.viewport').getAttribute('transform')") != before
