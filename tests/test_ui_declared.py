"""Declared and observed lineage on the lineage page, in a real headless Chromium over a consumer on SQLite fed
real events: job ``load`` is declared (a JobEvent) reading ``src`` and writing ``planned`` and ``kept``, and a
run of it reads ``src`` and writes ``kept`` and ``extra``; job ``publish`` is declared reading ``kept`` and
writing ``report`` and never ran. The graph draws the edges only declared dashed and marks the nodes no run
named, the "Declared-only edges" control leaves them out, and the drift view lists both directions per job."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from support.browser import set_color_scheme, wait_for
from support.consumer_helpers import T0, LiveServer, dataset, job_event, run_event
from support.environment import doc_image
from support.ui_fixtures import serving
from support.ui_page import LineagePage
from test_ui_accessibility import TEXTS, contrast

pytest_plugins = ("support.ui_fixtures",)

NS = "pipelines"
LOAD = f"job:{NS}:load"
PUBLISH = f"job:{NS}:publish"
SRC, PLANNED, KEPT, EXTRA, REPORT = (f"dataset:warehouse:{n}" for n in ("src", "planned", "kept", "extra", "report"))
DASH = "\u2013"


def _recent(hours_ago: float) -> float:
    """Seconds after the helpers' T0 of an instant ``hours_ago`` hours before now (drift's window is by event
    time, counted back from now)."""
    return (datetime.now(timezone.utc) - T0).total_seconds() - hours_ago * 3600


def declared_events() -> list[dict[str, Any]]:
    src, planned, kept, extra, report = (dataset(n) for n in ("src", "planned", "kept", "extra", "report"))
    run = "0b6f3c1e-6f0a-4d1e-9a57-3c2b1a0d9e01"
    return [
        job_event("load", [src], [planned, kept], time=_recent(3)),
        job_event("publish", [kept], [report], time=_recent(3)),
        run_event("START", "load", run, time=_recent(2), inputs=[src], outputs=[kept, extra]),
        run_event("COMPLETE", "load", run, time=_recent(1.9), inputs=[src], outputs=[kept, extra]),
    ]


@pytest.fixture(scope="module")
def declared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The consumer with the page, on uvicorn over SQLite, holding :func:`declared_events`."""
    with serving(tmp_path_factory, "ui-declared-store", declared_events()) as server:
        yield server


@pytest.fixture
def declared_page(browser: Any, declared_server: LiveServer) -> LineagePage:
    set_color_scheme(browser, "light")
    browser.get(f"{declared_server.url}/ui/assets/favicon.svg")  # same origin, to clear the saved theme
    browser.execute_script("window.localStorage.clear()")
    return LineagePage(browser, declared_server.url)


def _edge_styles(page: LineagePage) -> dict[tuple[str, str], dict[str, Any]]:
    drawn = page.js(
        """return [...document.querySelectorAll('#graph .edge')].map(e => ({from: e.dataset.from, to: e.dataset.to,
             declaredOnly: e.classList.contains('declared-only'), dash: getComputedStyle(e).strokeDasharray}))"""
    )
    return {(e["from"], e["to"]): e for e in drawn}


def test_edges_only_declared_are_dashed_and_nodes_no_run_named_are_marked(declared_page: LineagePage) -> None:
    page = declared_page.open(nodeId=LOAD)
    edges = _edge_styles(page)
    observed = {(SRC, LOAD), (LOAD, KEPT), (LOAD, EXTRA)}
    declared_only = {(LOAD, PLANNED), (KEPT, PUBLISH), (PUBLISH, REPORT)}  # depth 1 from a job reaches publish
    assert set(edges) == observed | declared_only
    assert {pair for pair, e in edges.items() if e["declaredOnly"]} == declared_only
    assert edges[(LOAD, PLANNED)]["dash"] not in ("none", "")  # drawn dashed
    for pair in observed:  # observed (declared too or not): solid
        assert edges[pair]["dash"] == "none", pair
    nodes = page.nodes()
    assert {n for n, info in nodes.items() if "declared-only" in info["classes"]} == {PLANNED, PUBLISH, REPORT}
    assert nodes[PLANNED]["label"].endswith("Declared only: no run has named it.")
    node_dash = "return getComputedStyle(document.querySelector(arguments[0] + ' .shape')).strokeDasharray"
    assert page.js(node_dash, f'#graph .node[data-id="{PLANNED}"]') not in ("none", "")
    assert page.js(node_dash, f'#graph .node[data-id="{KEPT}"]') == "none"
    assert page.texts("#graph-legend li") == ["Observed by a run", "Declared only, never run", "Node declared only"]
    page.click_node(PLANNED)
    page.wait_text("#details-title", "planned")
    page.screenshot(doc_image("lineage-ui-declared.png"))
    assert page.content("#details-declared-only") == "Declared only: a JobEvent declared it, no run has named it yet."
    page.click_node(KEPT)
    page.wait_text("#details-title", "kept")
    assert page.content("#details-declared-only") is None


def test_the_control_leaves_out_the_edges_only_declared_and_keeps_it_in_the_address(
    declared_page: LineagePage,
) -> None:
    page = declared_page.open(nodeId=LOAD)
    assert page.js("return document.getElementById('declared').value") == "include"
    page.select("declared", "exclude")
    wait_for(page.driver, lambda d: PLANNED not in page.node_ids(), "the declared-only edge to go")
    page.wait_ready()
    assert set(_edge_styles(page)) == {(SRC, LOAD), (LOAD, KEPT), (LOAD, EXTRA)}
    assert PUBLISH not in page.node_ids()
    assert page.query() == {"nodeId": LOAD, "declared": "exclude"}
    assert page.api_requests("/api/v1/lineage")[-1]["declared"] == "exclude"
    page.open(nodeId=LOAD, declared="exclude")  # a bookmark keeps the choice
    assert page.js("return document.getElementById('declared').value") == "exclude"
    assert PLANNED not in page.node_ids()
    page.select("declared", "include")
    wait_for(page.driver, lambda d: PLANNED in page.node_ids(), "the declared-only edge to come back")
    assert page.query() == {"nodeId": LOAD}


def _drift(page: LineagePage) -> dict[str, dict[str, list[str]]]:
    return page.js(
        """return Object.fromEntries([...document.querySelectorAll('#drift-jobs .drift-job')].map(s => [s.dataset.job,
             Object.fromEntries(['declared-not-observed', 'observed-not-declared'].map(k =>
               [k, [...s.querySelectorAll('li.' + k)]
                     .map(li => li.dataset.direction + ' ' + li.dataset.dataset)]))]))"""
    )


def test_the_drift_view_lists_both_directions_per_job_and_links_to_the_graph(declared_page: LineagePage) -> None:
    page = declared_page.open(nodeId=LOAD)
    page.click("#drift-link")
    page.wait_text("#drift-range", "with drift")
    page.wait_ready()
    assert page.query() == {"view": "drift"}
    assert page.js("return document.getElementById('drift-link').getAttribute('aria-current')") == "page"
    assert page.content("#drift-range") == f"Jobs 1{DASH}2 of 2 with drift over the last 30 days"
    assert _drift(page) == {
        "pipelines:load": {
            "declared-not-observed": ["output warehouse:planned"],
            "observed-not-declared": ["output warehouse:extra"],
        },
        "pipelines:publish": {
            "declared-not-observed": ["input warehouse:kept", "output warehouse:report"],
            "observed-not-declared": [],
        },
    }
    load = page.text('.drift-job[data-job="pipelines:load"]')
    assert "Declared, not observed in the last 30 days (1)" in load
    assert "Observed, not declared (1)" in load
    assert "never observed" in page.text("li.declared-not-observed")
    assert "not declared" in page.text("li.observed-not-declared")
    page.screenshot(doc_image("lineage-ui-drift.png"))

    page.select("drift-days", "7")
    page.wait_text("#drift-range", "the last 7 days")
    assert page.query() == {"view": "drift", "days": "7"}
    assert page.api_requests("/api/v1/drift")[-1]["days"] == "7"

    page.click('.drift-job[data-job="pipelines:publish"] a.job-link')
    wait_for(page.driver, lambda d: REPORT in page.node_ids(), "the graph of publish")
    assert page.query() == {"nodeId": PUBLISH}
    edges = _edge_styles(page)
    assert edges[(KEPT, PUBLISH)]["declaredOnly"] and edges[(PUBLISH, REPORT)]["declaredOnly"]  # it never ran


def test_the_drift_view_pages_through_jobs(declared_page: LineagePage) -> None:
    page = declared_page.open(view="drift", limit=1)
    assert page.content("#drift-range") == f"Jobs 1{DASH}1 of 2 with drift over the last 30 days"
    assert list(_drift(page)) == ["pipelines:load"]
    assert page.texts(".pager .disabled") == ["Previous page"]
    page.click(".pager a.next")
    page.wait_text("#drift-range", f"Jobs 2{DASH}2 of 2")
    assert list(_drift(page)) == ["pipelines:publish"]
    assert page.query() == {"view": "drift", "offset": "1", "limit": "1"}
    assert page.texts(".pager .disabled") == ["Next page"]
    assert {r["limit"] for r in page.api_requests("/api/v1/drift")} == {"1"}


def test_drift_and_the_declared_control_are_reachable_named_and_legible(declared_page: LineagePage) -> None:
    page = declared_page.open(view="drift")
    page.js("document.activeElement.blur()")
    page.tab_to("el.id === 'drift-days'", "the window select")
    assert page.js("return document.activeElement.labels.length") == 1
    page.tab_to("el.matches('a.job-link')", "the first job's link")
    assert page.js("return getComputedStyle(document.activeElement).outlineStyle") == "solid"  # visible focus
    for scheme in ("light", "dark"):
        set_color_scheme(page.driver, scheme)
        samples = page.js(TEXTS)
        page.open(nodeId=LOAD)
        samples += page.js(TEXTS)
        unnamed = page.js(
            """return [...document.querySelectorAll('button, select, input, [role=button]')]
                 .filter(el => !el.closest('[hidden]'))
                 .filter(el => !(el.getAttribute('aria-label') || el.labels?.length || el.textContent.trim()))
                 .map(el => el.outerHTML.slice(0, 80))"""
        )
        assert unnamed == []
        edge = "return getComputedStyle(document.querySelector('#graph .edge.declared-only')).stroke"
        bg = page.js("return getComputedStyle(document.body).backgroundColor")
        assert contrast(page.js(edge), bg) >= 3
        low = [(what, fg, bg, round(contrast(fg, bg), 2)) for what, fg, bg in samples if contrast(fg, bg) < 4.5]
        assert low == [], f"text below 4.5:1 in the {scheme} theme"
        page.open(view="drift")
