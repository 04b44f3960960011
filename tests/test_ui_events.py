"""The lineage page's events browser in a real headless Chromium, over a consumer on SQLite holding
:func:`support.ui_runs.runs_events` (29 run events of two jobs in two namespaces): the time range (start
included, end excluded) from the address and from the form, paging, the namespace and job filters (applied
by the page: Marquez's events listing filters by time only), each event's raw JSON on demand, links to the
run history and run views, the keyboard, and contrast in both themes."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from support.browser import set_color_scheme, wait_for
from support.environment import doc_image
from support.ui_graph import JOBS
from support.ui_page import LineagePage
from support.ui_runs import (
    AUDIT,
    CHECK,
    NIGHTLY,
    T0,
    check_run,
    end_of,
    nightly_run,
    runs_events,
    start_of,
    utc_text,
)
from test_ui_accessibility import TEXTS, contrast

pytest_plugins = ("support.ui_fixtures", "support.ui_runs_fixtures")

DASH = "\u2013"  # the en dash the page writes in ranges of items
TOTAL = 29


def _rows(page: LineagePage) -> list[list[str]]:
    """Each listed event as [time, type, job name, job namespace, run id]."""
    return page.js(
        """return [...document.querySelectorAll('#pages table.events tbody tr.event')].map(r => [
             r.querySelector('.time').innerText, r.querySelector('.type').innerText,
             r.querySelector('.job a')?.innerText ?? '', r.querySelector('.job .ns')?.innerText ?? '',
             r.querySelector('.id').innerText])"""
    )


def _caption(page: LineagePage) -> str:
    return page.content("#pages .pager .range")


def _nightly(i: int, state: str) -> list[str]:
    when = start_of(i) if state == "START" else end_of(i)
    assert when is not None
    return [utc_text(when), state, NIGHTLY, JOBS, nightly_run(i)]


def _check(k: int, state: str) -> list[str]:
    when = T0 + 4 * k * timedelta(days=1) + timedelta(hours=1, seconds=30 if state == "COMPLETE" else 0)
    return [utc_text(when), state, CHECK, AUDIT, check_run(k)]


def test_the_time_range_in_the_address_lists_its_events_newest_first(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events", after="2026-04-03T00:00", before="2026-04-05T00:00")
    assert page.content("#page-title") == "Events"
    assert _rows(page) == [_nightly(3, "COMPLETE"), _nightly(3, "START"), _nightly(2, "FAIL"), _nightly(2, "START")]
    assert _caption(page) == f"Events 1{DASH}4 of 4"
    assert page.content("#events-filters") == "Events from 2026-04-03 00:00:00 UTC, until 2026-04-05 00:00:00 UTC."
    asked = page.api_requests("/api/v1/events/lineage")
    assert {(r["after"], r["before"]) for r in asked} == {("2026-04-03T00:00:00+00:00", "2026-04-05T00:00:00+00:00")}
    assert page.js("return document.getElementById('events-after').value") == "2026-04-03T00:00"


def test_the_time_range_chosen_in_the_form_includes_its_start_and_excludes_its_end(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events")
    assert _caption(page) == f"Events 1{DASH}{TOTAL} of {TOTAL}"
    page.js(
        """document.getElementById('events-after').value = '2026-04-09T02:00:00';
           document.getElementById('events-before').value = '2026-04-09T03:00:30';"""
    )
    page.click("#events-apply")
    page.wait_text("#pages .pager .range", f"Events 1{DASH}3 of 3")
    query = page.query()
    assert query.pop("after") in {"2026-04-09T02:00", "2026-04-09T02:00:00"}  # as the input writes it
    assert query == {"view": "events", "before": "2026-04-09T03:00:30"}
    # 02:00:00 is the start (listed); check_orders' COMPLETE at 03:00:30 is the end (not listed)
    assert _rows(page) == [_check(2, "START"), _nightly(8, "COMPLETE"), _nightly(8, "START")]
    page.driver.back()
    page.wait_text("#pages .pager .range", f"of {TOTAL}")


def test_an_events_raw_json_is_shown_on_demand(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events", after="2026-04-11T00:00", before="2026-04-12T00:00")
    assert _rows(page) == [_nightly(10, "FAIL"), _nightly(10, "START")]
    toggle = page.driver.find_element(By.CSS_SELECTOR, "#pages tr.event .json-toggle")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert page.js("return document.querySelector('#pages tr.event-json').hidden") is True
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    assert toggle.text == "Hide JSON"
    pre = page.driver.find_element(By.CSS_SELECTOR, f"#{toggle.get_attribute('aria-controls')} pre")
    assert pre.is_displayed()
    sent = next(
        e for e in runs_events() if e["run"]["runId"] == nightly_run(10) and e["eventType"] == "FAIL"
    )  # the event as posted
    assert json.loads(pre.get_attribute("textContent")) == sent
    assert "<script>" in pre.get_attribute("textContent")  # the error text, shown as text
    assert page.js("return document.querySelectorAll('#pages script, #pages b').length") == 0
    page.screenshot(doc_image("lineage-ui-events.png"))
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not pre.is_displayed()


def test_pages_of_events_move_forward_and_back(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events", limit=10)
    assert _caption(page) == f"Events 1{DASH}10 of {TOTAL}"
    first = _rows(page)
    assert first[0] == _nightly(11, "START")
    page.click(".pager a.next")
    page.wait_text("#pages .pager .range", f"Events 11{DASH}20 of {TOTAL}")
    assert page.query() == {"view": "events", "offset": "10", "limit": "10"}
    page.click(".pager a.next")
    page.wait_text("#pages .pager .range", f"Events 21{DASH}29 of {TOTAL}")
    assert len(_rows(page)) == 9
    assert _rows(page)[-1] == _nightly(0, "START")  # the oldest
    assert page.texts(".pager .disabled") == ["Next page"]
    page.click(".pager a.prev")
    page.wait_text("#pages .pager .range", f"Events 11{DASH}20 of {TOTAL}")
    page.click(".pager a.prev")
    page.wait_text("#pages .pager .range", f"Events 1{DASH}10 of {TOTAL}")
    assert _rows(page) == first


def test_the_namespace_and_job_filters_page_through_matching_events(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events", namespace=AUDIT, limit=2)
    assert _rows(page) == [_check(2, "COMPLETE"), _check(2, "START")]
    assert page.content("#events-filters") == f"Events naming namespace {AUDIT}."
    assert page.js("return document.getElementById('events-namespace').value") == AUDIT
    page.click(".pager a.next")
    wait_for(page.driver, lambda d: page.query().get("offset"), "the second page")
    page.wait_ready()
    assert _rows(page) == [_check(1, "COMPLETE"), _check(1, "START")]
    page.click(".pager a.next")
    wait_for(page.driver, lambda d: _rows(page) == [_check(0, "COMPLETE"), _check(0, "START")], "the third page")
    page.wait_ready()
    page.click(".pager a.prev")  # found by looking back from where the third page starts
    wait_for(page.driver, lambda d: _rows(page) == [_check(1, "COMPLETE"), _check(1, "START")], "the second again")
    page.wait_ready()
    page.click(".pager a.prev")
    wait_for(page.driver, lambda d: _rows(page) == [_check(2, "COMPLETE"), _check(2, "START")], "the first again")
    limits = [int(r["limit"]) for r in page.api_requests("/api/v1/events/lineage")]
    assert 200 in limits and max(limits) == 200 and 2 not in limits  # read in chunks, not a page at a time

    page.open(view="events", job="CHECK")  # the job's name contains the text, in any case
    assert [row[2] for row in _rows(page)] == [CHECK] * 6
    assert _caption(page) == f"6 matching events among events 1{DASH}{TOTAL} of {TOTAL}"
    page.open(view="events", job="nightly", namespace=AUDIT)
    assert _rows(page) == []
    assert page.content("#events-empty") == f"0 matching events among events 1{DASH}{TOTAL} of {TOTAL}"
    page.open(view="events", namespace=JOBS, after="2026-04-05T00:00", before="2026-04-06T00:00")
    assert _rows(page) == [_nightly(4, "ABORT"), _nightly(4, "START")]  # not check_orders' run of that day


def test_events_link_to_the_run_history_and_the_run(runs_page: LineagePage) -> None:
    page = runs_page.open(nodeId=f"job:{JOBS}:{NIGHTLY}")
    page.click("#events-link")
    page.wait_text("#pages .pager .range", f"of {TOTAL}")
    assert page.query() == {"view": "events"}
    assert page.driver.find_element(By.ID, "events-link").get_attribute("aria-current") == "page"
    assert page.js("return [...document.querySelectorAll('.graph-only')].every(el => el.hidden)") is True
    page.click(f'#pages tr.event[data-run-id="{check_run(2)}"] a.job-link')
    page.wait_text("#page-title", f"Run history of {CHECK}")
    assert page.query() == {"view": "runs", "jobNamespace": AUDIT, "jobName": CHECK}
    page.click("#job-events-link")
    page.wait_text("#events-filters", f"Events naming namespace {AUDIT}, of jobs whose name contains")
    page.click(f'#pages tr.event[data-run-id="{check_run(1)}"] a.run-link')
    page.wait_text("#page-title", f"Run of {CHECK}")
    assert page.query() == {"view": "run", "runId": check_run(1)}


def test_a_bad_time_is_explained(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events", after="yesterday")
    assert page.state() == "error"
    assert page.content("#error").startswith("The events could not be loaded: after: 'yesterday' is not")


def test_the_events_browser_works_from_the_keyboard(runs_page: LineagePage) -> None:
    page = runs_page.open(view="events", limit=10)
    page.js("document.activeElement.blur()")
    page.tab_to("el.id === 'events-job'", "the job filter")
    page.press("check", Keys.ENTER)  # Enter submits the filter form
    wait_for(page.driver, lambda d: page.query().get("job") == "check", "the job filter in the address")
    page.wait_ready()
    assert [row[2] for row in _rows(page)] == [CHECK] * 6
    page.tab_to("el.classList.contains('json-toggle')", "the first Show JSON button")
    assert page.js("return getComputedStyle(document.activeElement).outlineStyle") == "solid"  # visible focus
    page.press(Keys.ENTER)
    assert page.js("return document.activeElement.getAttribute('aria-expanded')") == "true"
    page.press(Keys.TAB)
    assert page.js("return document.activeElement.tagName") == "PRE"  # the JSON scrolls: focusable
    ActionChains(page.driver).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
    assert page.js("return document.activeElement.textContent") == "Hide JSON"
    page.press(" ")
    assert page.js("return document.activeElement.getAttribute('aria-expanded')") == "false"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_events_browser_meets_wcag_aa_contrast(runs_page: LineagePage, scheme: str) -> None:
    set_color_scheme(runs_page.driver, scheme)
    page = runs_page.open(view="events", limit=10, offset=10)
    page.click("#pages .json-toggle")
    samples: list[Any] = page.js(TEXTS)
    assert len(samples) > 60
    low = [(what, fg, bg, round(contrast(fg, bg), 2)) for what, fg, bg in samples if contrast(fg, bg) < 4.5]
    assert low == [], f"text below 4.5:1 in the {scheme} theme"
