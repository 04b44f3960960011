"""Tasks contain their jobs on the lineage page, in a real headless Chromium over a consumer on SQLite fed the
events of an Airflow task with two ``lineage_run`` jobs (:mod:`support.task_jobs`): the jobs are drawn inside a
box labelled with the task, which collapses into the task's node (their edges drawn to it) and expands back, by
mouse and keyboard; inside Airflow the task links to its task instance in Airflow's UI (docs/ui.md), a mapped task's
instance by its map index (Airflow 3's ``/dags/<dag>/runs/<run>/tasks/<task>/mapped/<index>``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from support.browser import wait_for
from support.consumer_helpers import LiveServer
from support.task_jobs import (
    AGGREGATE_NODE,
    COPY_NODE,
    DAG_ID,
    JOIN_NODE,
    MAPPED_COPY_NODE,
    MAPPED_TASK_ID,
    MAPPED_TASK_NODE,
    ORPHAN_NODE,
    RUN_ID,
    TASK,
    TASK_ID,
    TASK_NODE,
    WAREHOUSE,
    mapped_task_events,
    task_job_events,
)
from support.ui_fixtures import serving
from support.ui_graph import post_events
from support.ui_page import LineagePage

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.guards import KeyGuard

pytest_plugins = ("support.ui_fixtures",)

ORDERS, CUSTOMERS = f"dataset:{WAREHOUSE}:orders", f"dataset:{WAREHOUSE}:customers"
JOINED, TOTALS = f"dataset:{WAREHOUSE}:customer_orders", f"dataset:{WAREHOUSE}:customer_totals"
TASK_INSTANCE_PATH = f"/dags/{DAG_ID}/runs/{quote(RUN_ID, safe='')}/tasks/{TASK_ID}"
MAPPED_INSTANCE_PATH = f"/dags/{DAG_ID}/runs/{quote(RUN_ID, safe='')}/tasks/{MAPPED_TASK_ID}/mapped"


@pytest.fixture(scope="module")
def task_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory, "ui-task-jobs-store", task_job_events()) as server:
        yield server


@pytest.fixture
def page(browser: Any, task_server: LiveServer) -> LineagePage:
    return LineagePage(browser, task_server.url).open(nodeId=JOIN_NODE, depth=2)


def _box(page: LineagePage, group: str) -> dict[str, float] | None:
    """The on-screen rectangle of the box of ``group`` (a task's job id), None when not drawn."""
    return page.js(
        """const box = [...document.querySelectorAll('#graph .task-box')].find(b => b.dataset.group === arguments[0]);
           if (!box) return null;
           const r = box.querySelector('.frame').getBoundingClientRect();
           return {x: r.x, y: r.y, right: r.right, bottom: r.bottom};""",
        group,
    )


def _inside(node: dict[str, Any], box: dict[str, float]) -> bool:
    return (
        box["x"] <= node["x"]
        and node["x"] + node["width"] <= box["right"]
        and box["y"] <= node["y"]
        and node["y"] + node["height"] <= box["bottom"]
    )


def _wait_collapsed(page: LineagePage, collapsed: bool) -> None:
    def drawn(_driver: Any) -> bool:
        ids = page.node_ids()
        return page.state() == "ready" and (TASK_NODE in ids) == collapsed and (JOIN_NODE in ids) != collapsed

    wait_for(page.driver, drawn, "the task collapsed" if collapsed else "the task expanded")


def test_the_tasks_two_jobs_are_drawn_inside_its_box(page: LineagePage) -> None:
    box = _box(page, TASK_NODE)
    assert box is not None
    nodes = page.nodes()
    assert _inside(nodes[JOIN_NODE], box) and _inside(nodes[AGGREGATE_NODE], box)
    assert not _inside(nodes[ORDERS], box) and not _inside(nodes[TOTALS], box)
    # Jobs inside other runs are in their own parent's box, not this one.
    assert not _inside(nodes[COPY_NODE], box) and not _inside(nodes[ORPHAN_NODE], box)
    assert {"contained"} <= set(nodes[JOIN_NODE]["classes"]) and f"In task {TASK}" in nodes[JOIN_NODE]["label"]
    header = page.js(
        "return [...document.querySelectorAll('#graph .task-toggle')].find(t => t.dataset.group === arguments[0])"
        ".getAttribute('aria-label')",
        TASK_NODE,
    )
    assert header == f"Task {TASK}: 2 jobs. Collapse them into the task's node."
    assert not page.js("return document.querySelectorAll('#graph .airflow-link').length")  # not inside Airflow


def test_the_box_collapses_into_the_task_and_expands_back(page: LineagePage) -> None:
    page.click(f'#graph .task-box[data-group="{TASK_NODE}"] .task-toggle')
    _wait_collapsed(page, True)
    assert page.query()["collapse"] == TASK_NODE
    assert _box(page, TASK_NODE) is None
    task = page.nodes()[TASK_NODE]
    assert {"task", "collapsed"} <= set(task["classes"]) and "Task containing 2 jobs, collapsed" in task["label"]
    assert page.content(f'#graph .node[data-id="{TASK_NODE}"] .tasks-badge text') == "▸ 2 jobs"
    edges = page.edges()
    assert {(ORDERS, TASK_NODE), (CUSTOMERS, TASK_NODE), (TASK_NODE, JOINED), (JOINED, TASK_NODE)} <= edges
    assert (TASK_NODE, TOTALS) in edges and not any(JOIN_NODE in edge or AGGREGATE_NODE in edge for edge in edges)
    page.click(f'#graph .node[data-id="{TASK_NODE}"] .tasks-badge')
    _wait_collapsed(page, False)
    assert "collapse" not in page.query()
    assert _inside(page.nodes()[AGGREGATE_NODE], _box(page, TASK_NODE))  # type: ignore[arg-type]


def test_the_keyboard_collapses_and_expands_the_task(page: LineagePage) -> None:
    page.click_node(AGGREGATE_NODE)
    page.press("e")  # E on a job in the box
    _wait_collapsed(page, True)
    assert page.js("return document.activeElement.dataset.id") == TASK_NODE
    page.press("e")  # E on the task's node
    _wait_collapsed(page, False)
    assert page.js("return document.activeElement.dataset.id") in (JOIN_NODE, AGGREGATE_NODE)


def test_a_collapsed_task_is_kept_in_the_address_and_stands_for_the_root(browser: Any, task_server: LiveServer) -> None:
    page = LineagePage(browser, task_server.url).open(nodeId=JOIN_NODE, depth=2, collapse=TASK_NODE)
    assert TASK_NODE in page.node_ids() and JOIN_NODE not in page.node_ids()
    # The root's task collapsed: the task's node stands for it, and its details are open.
    assert "root" in page.nodes()[TASK_NODE]["classes"] and page.details_title() == TASK


class PageInAirflow(KeyGuard):
    """The key guard, telling the page it is inside Airflow as :class:`~airflow_lineage_provider.plugins.
    airflow_guard.AirflowGuard` does (``mode``): the page then links to Airflow's UI."""

    mode = "airflow"


class MountedUnderLineage:
    """The app as Airflow's API server mounts the plugin's: under ``/lineage``, which is its ``root_path``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            scope = {**scope, "root_path": "/lineage"}
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def in_airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The page and API under ``<server>/lineage`` with the page told it runs inside Airflow, holding the task's
    events and the mapped task's; yields the server."""
    store = tmp_path_factory.mktemp("ui-task-jobs-airflow") / "lineage.db"
    app = create_app(store_url=f"sqlite:///{store}", anonymous=Access.ADMIN, guard=PageInAirflow)
    with LiveServer(MountedUnderLineage(app)) as server:
        post_events(f"{server.url}/lineage", [*task_job_events(), *mapped_task_events()])
        yield server.url
    app.state.store.dispose()


def _airflow_links(page: LineagePage) -> list[str]:
    return page.js("return [...document.querySelectorAll('#graph .airflow-link')].map(a => a.getAttribute('href'))")


def test_inside_airflow_the_task_links_to_its_task_instance(browser: Any, in_airflow: str) -> None:
    page = LineagePage(browser, f"{in_airflow}/lineage").open(nodeId=TASK_NODE)
    assert page.node_ids() == {TASK_NODE}
    assert _airflow_links(page) == [TASK_INSTANCE_PATH]
    target = page.js("return document.querySelector('#graph .airflow-link').getAttribute('target')")
    assert target == "_top"  # out of the frame Airflow embeds the page in


def test_inside_airflow_the_box_of_a_task_not_drawn_links_to_it(browser: Any, in_airflow: str) -> None:
    page = LineagePage(browser, f"{in_airflow}/lineage").open(nodeId=JOIN_NODE, depth=2)
    links = page.js(
        "return [...document.querySelectorAll('#graph .task-box')].filter(b => b.dataset.group === arguments[0])"
        ".map(b => b.querySelector('.airflow-link')?.getAttribute('href'))",
        TASK_NODE,
    )
    assert links == [TASK_INSTANCE_PATH]
    page.click(f'#graph .task-box[data-group="{TASK_NODE}"] .task-toggle')
    _wait_collapsed(page, True)
    assert _airflow_links(page) == [TASK_INSTANCE_PATH]  # on the task's node standing for its jobs


def test_inside_airflow_a_mapped_task_links_to_its_instance_by_map_index(browser: Any, in_airflow: str) -> None:
    page = LineagePage(browser, f"{in_airflow}/lineage").open(nodeId=MAPPED_TASK_NODE)
    assert page.node_ids() == {MAPPED_TASK_NODE}
    assert _airflow_links(page) == [f"{MAPPED_INSTANCE_PATH}/1"]  # its latest run's instance


def test_inside_airflow_the_box_of_a_mapped_task_links_to_the_instance_its_jobs_ran_in(
    browser: Any, in_airflow: str
) -> None:
    page = LineagePage(browser, f"{in_airflow}/lineage").open(nodeId=MAPPED_COPY_NODE, depth=2)
    assert MAPPED_TASK_NODE not in page.node_ids()  # the task's node is not drawn: its box links
    assert _airflow_links(page) == [f"{MAPPED_INSTANCE_PATH}/0"]
    page.click(f'#graph .task-box[data-group="{MAPPED_TASK_NODE}"] .task-toggle')

    def collapsed(_driver: Any) -> bool:
        return page.state() == "ready" and MAPPED_TASK_NODE in page.node_ids()

    wait_for(page.driver, collapsed, "the mapped task collapsed")
    assert _airflow_links(page) == [f"{MAPPED_INSTANCE_PATH}/0"]  # on the node standing for its jobs
