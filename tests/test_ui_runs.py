"""The lineage page's run history and run view in a real headless Chromium, over a consumer on SQLite holding
:func:`support.ui_runs.runs_events`: a job's 12 runs five a page (states RUNNING, COMPLETED, FAILED, ABORTED),
a run's state, times, inputs and outputs, error message and stack trace and Egeria facets, the links between
these views, the details panel and the graph, the keyboard, and contrast in both themes."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.keys import Keys
from support.browser import set_color_scheme, wait_for
from support.environment import doc_image
from support.ui_graph import JOBS, PG, WAREHOUSE
from support.ui_page import LineagePage
from support.ui_runs import (
    GOVERNANCE,
    MARQUEZ_STATE,
    NIGHTLY,
    STATES,
    SUPPLY_CHAIN,
    duration,
    end_of,
    error_text,
    nightly_run,
    start_of,
    utc_text,
)
from test_ui_accessibility import TEXTS, contrast

pytest_plugins = ("support.ui_fixtures", "support.ui_runs_fixtures")

DASH = "\u2013"  # the en dash the page writes in ranges of items
HISTORY = {"view": "runs", "jobNamespace": JOBS, "jobName": NIGHTLY}


def _duration_text(seconds: int) -> str:
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def _expected_row(i: int) -> dict[str, Any]:
    """Run ``i`` of nightly_load as the history table shows it."""
    end = end_of(i)
    return {
        "id": nightly_run(i),
        "cells": [
            MARQUEZ_STATE[STATES[i]],
            utc_text(start_of(i)),
            utc_text(end) if end else "—",
            _duration_text(duration(i)) if end else "still running",
            nightly_run(i),
        ],
    }


def _rows(page: LineagePage) -> list[dict[str, Any]]:
    return page.js(
        """return [...document.querySelectorAll('#runs-table tbody tr')].map(r => ({
             id: r.dataset.runId, cells: [...r.cells].map(c => c.innerText)}))"""
    )


def test_the_run_history_pages_through_twelve_runs_five_at_a_time(runs_page: LineagePage) -> None:
    page = runs_page.open(**HISTORY, limit=5)
    assert page.details_title() == "Details"  # the graph's panel is hidden, not replaced
    assert page.content("#page-title") == f"Run history of {NIGHTLY}"
    assert page.content("#runs-table caption") == f"Runs 1{DASH}5 of 12, newest first"
    assert _rows(page) == [_expected_row(i) for i in (11, 10, 9, 8, 7)]
    assert page.text("#runs-table .state.FAILED") == "FAILED"
    assert page.texts(".pager .disabled") == ["Previous page"]
    assert page.js("return document.getElementById('graph-layout').hidden") is True
    page.screenshot(doc_image("lineage-ui-runs.png"))

    page.click(".pager a.next")
    page.wait_text("#runs-table caption", f"Runs 6{DASH}10 of 12")
    assert page.query() == {**HISTORY, "offset": "5", "limit": "5"}
    assert _rows(page) == [_expected_row(i) for i in (6, 5, 4, 3, 2)]
    assert [r["cells"][0] for r in _rows(page)] == ["FAILED", "COMPLETED", "ABORTED", "COMPLETED", "FAILED"]

    page.click(".pager a.next")
    page.wait_text("#runs-table caption", f"Runs 11{DASH}12 of 12")
    assert _rows(page) == [_expected_row(i) for i in (1, 0)]
    assert page.texts(".pager .disabled") == ["Next page"]

    page.click(".pager a.prev")
    page.wait_text("#runs-table caption", f"Runs 6{DASH}10 of 12")
    page.driver.back()
    page.wait_text("#runs-table caption", f"Runs 11{DASH}12 of 12")
    asked = [(r["limit"], r.get("offset")) for r in page.api_requests(f"/jobs/{NIGHTLY}/runs")]
    assert asked and all(limit == "5" for limit, _ in asked)


def test_the_page_size_is_chosen_and_kept_in_the_address(runs_page: LineagePage) -> None:
    page = runs_page.open(**HISTORY, limit=5, offset=5)
    page.select("runs-page-size", "10")
    page.wait_text("#runs-table caption", f"Runs 1{DASH}10 of 12")
    assert page.query() == {**HISTORY, "limit": "10"}
    assert len(_rows(page)) == 10


def test_a_failed_run_shows_its_inputs_outputs_error_stack_trace_and_egeria_facets(runs_page: LineagePage) -> None:
    page = runs_page.open(**HISTORY, limit=5)
    page.click(f'#runs-table tr[data-run-id="{nightly_run(10)}"] a.run-link')
    page.wait_text("#page-title", f"Run of {NIGHTLY}")
    page.wait_ready()
    assert page.query() == {"view": "run", "runId": nightly_run(10)}
    summary = page.js(
        """return Object.fromEntries([...document.querySelectorAll('#run-summary dt')]
             .map(dt => [dt.innerText, dt.nextElementSibling.innerText]))"""
    )
    assert summary["State"] == "FAILED"
    assert summary["Started"] == utc_text(start_of(10))
    assert summary["Ended"] == utc_text(end_of(10))
    assert summary["Duration"] == "2 min 10 s"
    assert summary["Run id"] == nightly_run(10)
    message, trace = error_text(10)
    assert page.content("#run-error .run-error") == f"Error: {message}"
    assert page.content("#run-error .stack-trace") == trace
    assert "Language: python" in page.text("#run-error")
    assert page.js("return document.querySelectorAll('#pages b, #pages script').length") == 0  # shown as text
    assert page.content("#run-egeria .supply-chain .value") == SUPPLY_CHAIN
    action = page.text("#run-egeria .governance-action dl")
    for key, value in GOVERNANCE.items():
        assert f"{key}\n{value}" in action
    links = page.js(
        """return [...document.querySelectorAll('#run-io ul')].map(u => [...u.querySelectorAll('li')].map(li => [
             li.querySelector('a').innerText, li.querySelector('.ns').innerText,
             new URL(li.querySelector('a').href).searchParams.get('nodeId')]))"""
    )
    assert links == [
        [
            ["shop.public.orders", PG, f"dataset:{PG}:shop.public.orders"],
            ["shop.public.refunds", PG, f"dataset:{PG}:shop.public.refunds"],
        ],
        [["staging.orders", WAREHOUSE, f"dataset:{WAREHOUSE}:staging.orders"]],
    ]
    assert page.texts("#run-facets summary") == [
        "egeria_governanceAction",
        "egeria_informationSupplyChain",
        "errorMessage",
    ]
    assert page.content("#run-job-facets") == "Job facetsNo job facets received."
    assert page.texts("#run-events tbody tr.event td.type") == ["FAIL", "START"]
    page.screenshot(doc_image("lineage-ui-run.png"))

    page.click('a.dataset-link[href*="refunds"]')
    wait_for(page.driver, lambda d: f"job:{JOBS}:{NIGHTLY}" in page.node_ids(), "the graph of shop.public.refunds")
    assert page.query() == {"nodeId": f"dataset:{PG}:shop.public.refunds"}
    assert page.js("return document.getElementById('pages').hidden") is True


def test_each_run_shows_its_own_inputs_and_a_completed_run_no_error(runs_page: LineagePage) -> None:
    page = runs_page.open(view="run", runId=nightly_run(9))
    page.wait_text("#run-io", "Outputs (1)")
    assert page.texts("#run-io ul")[0] == f"shop.public.orders {PG}"  # run 10 read refunds too; run 9 did not
    assert page.text("#run-error") is None  # no error section for a run that did not fail
    assert page.text("#run-egeria") is None
    assert page.text("#run-summary .state") == "COMPLETED"
    page.open(view="run", runId=nightly_run(11))
    assert page.text("#run-summary .state") == "RUNNING"
    assert page.text("#run-summary .duration") == "still running"
    assert page.text("#run-summary .ended") == "—"


def test_the_details_panel_links_to_the_run_history_and_to_each_run(runs_page: LineagePage) -> None:
    job = f"job:{JOBS}:{NIGHTLY}"
    page = runs_page.open(nodeId=job)
    page.wait_text("#details-runs h3", "Latest runs (5 of 12)")
    page.click("#details-history-link")
    page.wait_text("#runs-table caption", f"Runs 1{DASH}12 of 12, newest first")  # 20 a page by default
    assert page.query() == HISTORY
    assert len(_rows(page)) == 12
    page.driver.back()
    page.wait_ready()
    page.wait_text("#details-runs h3", "Latest runs (5 of 12)")
    assert page.query() == {"nodeId": job}
    page.click(f'#details-runs .run[data-run-id="{nightly_run(10)}"] a.run-link')
    page.wait_text("#run-error", "disk full")
    page.click("#run-history-link")
    page.wait_text("#runs-table caption", f"Runs 1{DASH}12 of 12")


def test_an_unknown_run_or_job_says_so(runs_page: LineagePage) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    page = runs_page.open(view="run", runId=missing)
    assert page.state() == "error"
    assert page.content("#error") == f"No run {missing} in this lineage store."
    page.open(view="runs", jobNamespace=JOBS, jobName="no_such_job")
    assert page.state() == "error"
    assert page.content("#error") == f"No job no_such_job in namespace {JOBS}: Job 'no_such_job' not found."
    page.open(view="runs", jobName=NIGHTLY)
    assert page.content("#error") == "The run history needs jobNamespace and jobName."


def _wait_title_focused(page: LineagePage) -> None:
    wait_for(
        page.driver,
        lambda d: page.js("return document.activeElement.id") == "page-title",
        "the focus on the new view's title",
    )


def test_the_history_and_a_run_work_from_the_keyboard(runs_page: LineagePage) -> None:
    page = runs_page.open(**HISTORY, limit=5)
    page.js("document.activeElement.blur()")
    page.tab_to("el.matches('.pager a.next')", "the next page link")
    page.press(Keys.ENTER)
    page.wait_text("#runs-table caption", f"Runs 6{DASH}10 of 12")
    _wait_title_focused(page)  # a new view takes the focus to its title once it has loaded
    page.tab_to(f"el.matches('a.run-link') && el.textContent === {nightly_run(6)!r}", "the link of run 6")
    assert page.js("return getComputedStyle(document.activeElement).outlineStyle") == "solid"  # visible focus
    page.press(Keys.ENTER)
    page.wait_text("#run-error", "disk full")
    _wait_title_focused(page)  # the error section fills before the rest of the run view: focus comes at the end
    page.tab_to("el.matches('#run-error .stack-trace')", "the stack trace (scrollable, so focusable)")
    page.tab_to("el.matches('a.dataset-link')", "the first input")
    page.press(Keys.ENTER)
    wait_for(page.driver, lambda d: page.query().get("nodeId") == f"dataset:{PG}:shop.public.orders", "the graph")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_history_and_a_run_meet_wcag_aa_contrast(runs_page: LineagePage, scheme: str) -> None:
    set_color_scheme(runs_page.driver, scheme)
    page = runs_page.open(**HISTORY, limit=5, offset=5)
    samples = page.js(TEXTS)
    page.open(view="run", runId=nightly_run(10))
    page.js("for (const d of document.querySelectorAll('#pages details')) d.open = true;")
    samples += page.js(TEXTS)
    assert len(samples) > 60
    low = [(what, fg, bg, round(contrast(fg, bg), 2)) for what, fg, bg in samples if contrast(fg, bg) < 4.5]
    assert low == [], f"text below 4.5:1 in the {scheme} theme"
