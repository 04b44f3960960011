"""The lineage page without a mouse and in both colour schemes, in a real headless Chromium: keyboard
navigation along the graph, visible focus, ARIA names, the theme toggle, and WCAG AA contrast of every
text and of the graph's shapes in the light and dark themes."""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from support.browser import set_color_scheme, wait_for
from support.ui_graph import CUSTOMERS, DAILY, ENRICH, ENRICHED, ORDERS, REVENUE
from support.ui_page import LineagePage

pytest_plugins = ("support.ui_fixtures",)


def _press(page: LineagePage, *keys: str) -> None:
    for key in keys:
        ActionChains(page.driver).send_keys(key).perform()


def _focused(page: LineagePage) -> str | None:
    return page.js("return document.activeElement?.dataset?.id ?? document.activeElement?.id ?? null")


def test_the_graph_is_reached_with_tab_and_walked_with_the_arrow_keys(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED)
    page.js("document.activeElement.blur()")
    for _ in range(20):
        _press(page, Keys.TAB)
        if _focused(page) == ENRICHED:
            break
    assert _focused(page) == ENRICHED, "Tab never reached the graph's starting node"
    assert page.js("return document.querySelectorAll('#graph .node[tabindex=\"0\"]').length") == 1  # one Tab stop
    ring = "return getComputedStyle(document.activeElement.querySelector('.focus-ring')).visibility"
    assert page.js(ring) == "visible"
    _press(page, Keys.ARROW_LEFT)
    assert _focused(page) == ENRICH  # upstream
    _press(page, Keys.ARROW_LEFT)
    first = _focused(page)
    assert first in {ORDERS, CUSTOMERS}
    _press(page, Keys.ARROW_DOWN if first == ORDERS else Keys.ARROW_UP)
    assert _focused(page) == ({ORDERS, CUSTOMERS} - {first}).pop()  # within the column
    _press(page, Keys.ENTER)
    wait_for(page.driver, lambda d: page.details_title() == "shop.public.customers", "Enter opens the details")
    assert page.js(ring) == "visible"
    _press(page, Keys.HOME)
    assert _focused(page) == ENRICHED
    _press(page, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert _focused(page) == REVENUE
    _press(page, Keys.ARROW_LEFT, " ")
    wait_for(page.driver, lambda d: page.details_title() == "daily_revenue", "Space opens the details")
    assert page.js("return document.body.dataset.selected") == DAILY


def test_nodes_controls_and_regions_have_accessible_names(page: LineagePage) -> None:
    page.open(nodeId=ENRICHED)
    labels = {node: info["label"] for node, info in page.nodes().items()}
    assert labels[ENRICHED] == (
        "Dataset analytics.orders_enriched in namespace warehouse. 1 upstream, 1 downstream. Starting node."
    )
    assert labels[ENRICH] == (
        "Job enrich_orders in namespace airflow://prod. Latest run FAILED. 2 upstream, 1 downstream."
    )
    roles = page.js("return [...document.querySelectorAll('#graph .node')].map(n => n.getAttribute('role'))")
    assert roles == ["button"] * 6
    graph_label = page.driver.find_element(By.ID, "graph").get_attribute("aria-label")
    assert graph_label == "Lineage graph around analytics.orders_enriched: 6 nodes, 5 edges"
    unnamed = page.js(
        """return [...document.querySelectorAll('button, select, input, [role=button]')]
             .filter(el => !el.closest('[hidden]'))
             .filter(el => !(el.getAttribute('aria-label') || el.labels?.length || el.textContent.trim()))
             .map(el => el.outerHTML.slice(0, 80))"""
    )
    assert unnamed == []
    assert page.js("return document.documentElement.lang") == "en"


def test_the_theme_follows_the_system_and_the_toggle_wins_and_is_remembered(page: LineagePage) -> None:
    set_color_scheme(page.driver, "dark")
    page.open(nodeId=ENRICHED)
    toggle = page.driver.find_element(By.ID, "theme-toggle")
    dark_bg = page.js("return getComputedStyle(document.body).backgroundColor")
    assert toggle.get_attribute("aria-pressed") == "true"
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "false"
    assert page.js("return document.documentElement.dataset.theme") == "light"
    light_bg = page.js("return getComputedStyle(document.body).backgroundColor")
    assert (dark_bg, light_bg) == ("rgb(18, 20, 24)", "rgb(255, 255, 255)")
    page.open(nodeId=ENRICHED)  # the choice outlives the page
    assert page.js("return getComputedStyle(document.body).backgroundColor") == light_bg
    assert page.driver.find_element(By.ID, "theme-toggle").get_attribute("aria-pressed") == "false"


def _rgb(css: str) -> tuple[float, float, float]:
    values = [float(v) for v in re.findall(r"[\d.]+", css)[:3]]
    assert len(values) == 3, css
    return values[0], values[1], values[2]


def contrast(a: str, b: str) -> float:
    """The WCAG 2 contrast ratio of two CSS colours."""

    def luminance(css: str) -> float:
        def channel(v: float) -> float:
            v /= 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        r, g, b = (channel(v) for v in _rgb(css))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


#: Every visible text of the page with its colour and the colour behind it.
TEXTS = """
const behind = (el) => {
  for (let e = el; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (c && c !== 'transparent' && !/rgba\\(.*,\\s*0\\)$/.test(c)) return c;
  }
  return getComputedStyle(document.body).backgroundColor;
};
const html = [...document.querySelectorAll('body *:not(svg *)')].filter(el =>
  [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()) && el.getClientRects().length &&
  getComputedStyle(el).visibility === 'visible' && !el.closest('.visually-hidden'));
const svgText = [...document.querySelectorAll('#graph .node text')].map(t => [
  'svg ' + t.closest('.node').classList[1] + ' ' + t.getAttribute('class'),
  getComputedStyle(t).fill, getComputedStyle(t.closest('.node').querySelector('.shape')).fill]);
return html.map(el => [el.tagName + '.' + el.className + ' ' + el.textContent.trim().slice(0, 30),
                       getComputedStyle(el).color, behind(el)]).concat(svgText);
"""

#: Shapes that must stand out from the page (WCAG 1.4.11, 3:1): node borders, edges, the focus ring, the
#: highlight of a column's lineage.
SHAPES = """
const bg = getComputedStyle(document.body).backgroundColor;
const style = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
const found = [
  ['dataset border', style('#graph .node.dataset:not(.hl) .shape', 'stroke'), bg],
  ['edge', style('#graph .edge:not(.hl)', 'stroke'), bg],
  ['focus ring', style('#graph .node .focus-ring', 'stroke'), bg],
  ['search box border', style('#search-input', 'borderTopColor'), bg],
];
if (document.querySelector('#graph .node.job:not(.hl)')) found.push(
  ['job border', style('#graph .node.job:not(.hl) .shape', 'stroke'), bg],
  ['run state dot', style('#graph .node.job .state-dot', 'fill'), style('#graph .node.job .shape', 'fill')]);
if (document.querySelector('#graph .hl')) found.push(
  ['highlighted node border', style('#graph .node.hl .shape', 'stroke'), bg],
  ['highlighted edge', style('#graph .edge.hl', 'stroke'), bg]);
return found;
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_and_shape_meets_wcag_aa_contrast(page: LineagePage, scheme: str) -> None:
    set_color_scheme(page.driver, scheme)
    page.open(nodeId=ENRICHED)
    shapes = page.js(SHAPES)
    page.driver.find_element(By.CSS_SELECTOR, 'button[data-field="amount"]').click()
    page.wait_text("#column-lineage", "Flows into")
    # Notices are shown for real elsewhere; here they only need their text set to be measured.
    page.js("for (const id of ['cut-notice', 'error']) document.getElementById(id).hidden = false;")
    page.js("document.getElementById('cut-text').textContent = 'cut';")
    page.js("document.getElementById('error').textContent = 'failed';")
    samples = page.js(TEXTS)
    shapes += page.js(SHAPES)
    page.click_node(ENRICH)
    page.wait_text("#details-runs", "FAILED")
    page.wait_text("#details-runs", "COMPLETED")
    samples += page.js(TEXTS)
    assert len(samples) > 60
    assert len(shapes) == 6 + 6
    low = [(what, fg, bg, round(contrast(fg, bg), 2)) for what, fg, bg in samples if contrast(fg, bg) < 4.5]
    assert low == [], f"text below 4.5:1 in the {scheme} theme"
    weak = [(what, fg, bg, round(contrast(fg, bg), 2)) for what, fg, bg in shapes if contrast(fg, bg) < 3]
    assert weak == [], f"shapes below 3:1 in the {scheme} theme"
