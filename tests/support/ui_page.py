"""The lineage page in the browser, read the way a user sees it (drawn nodes and edges, texts, the URL), and
the app serving it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from airflow_lineage_provider.consumer.security.access import Access
from support.browser import wait_for


def ui_app(store_url: str) -> Any:
    """A consumer app on ``store_url``: ``create_app`` serves the lineage page at ``/ui``."""
    from airflow_lineage_provider.consumer import create_app

    return create_app(store_url=store_url, anonymous=Access.ADMIN)


class LineagePage:
    """The lineage page in the browser, read the way a user sees it."""

    def __init__(self, driver: Any, base_url: str) -> None:
        self.driver = driver
        self.base_url = base_url.rstrip("/")

    def open(self, **params: Any) -> LineagePage:
        """Load ``/ui`` with query parameters (URL-encoded here, as any link would be) and wait until drawn."""
        query = f"?{urlencode(params)}" if params else ""
        self.driver.get(f"{self.base_url}/ui{query}")
        self.wait_ready()
        return self

    def state(self) -> str | None:
        return self.driver.execute_script("return document.body.dataset.state || null")

    def wait_ready(self, timeout: float = 20) -> None:
        wait_for(self.driver, lambda d: self.state() in ("ready", "error"), "the page to finish loading", timeout)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def node_ids(self) -> set[str]:
        return set(self.js("return [...document.querySelectorAll('#graph .node')].map(n => n.dataset.id)"))

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Drawn nodes: id → classes, aria-label, on-screen box and the fill of the shape."""
        return {
            node["id"]: node
            for node in self.js(
                """return [...document.querySelectorAll('#graph .node')].map(n => {
                     const box = n.querySelector('.shape').getBoundingClientRect();
                     return {id: n.dataset.id, classes: [...n.classList], label: n.getAttribute('aria-label'),
                             x: box.x, y: box.y, width: box.width, height: box.height,
                             fill: getComputedStyle(n.querySelector('.shape')).fill,
                             rx: n.querySelector('.shape').getAttribute('rx')};
                   })"""
            )
        }

    def edges(self, highlighted: bool = False) -> set[tuple[str, str]]:
        selector = "#graph .edge.hl" if highlighted else "#graph .edge"
        pairs = self.js(f"return [...document.querySelectorAll('{selector}')].map(e => [e.dataset.from, e.dataset.to])")
        return {(a, b) for a, b in pairs}

    def node(self, node_id: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, f"#graph .node[data-id={json.dumps(node_id)}]")

    def click_node(self, node_id: str) -> None:
        self.node(node_id).click()
        wait_for(
            self.driver,
            lambda d: self.js("return document.body.dataset.selected") == node_id,
            f"the details of {node_id}",
        )

    def details_title(self) -> str:
        return self.js("return document.getElementById('details-title').textContent")

    def text(self, selector: str) -> str:
        return self.js("const el = document.querySelector(arguments[0]); return el ? el.innerText : null", selector)

    def texts(self, selector: str) -> list[str]:
        return self.js("return [...document.querySelectorAll(arguments[0])].map(el => el.innerText)", selector)

    def content(self, selector: str) -> str | None:
        """The text of the first match as written (``textContent``: no CSS capitalisation, no layout)."""
        return self.js("const el = document.querySelector(arguments[0]); return el ? el.textContent : null", selector)

    def wait_text(self, selector: str, contains: str, timeout: float = 15) -> str:
        """Wait until the first match's text (as written) contains ``contains``."""

        def found(d: Any) -> str:  # "" (falsy) until the text is there, so wait_for keeps polling
            t = self.content(selector)
            return t if t is not None and contains in t else ""

        return wait_for(self.driver, found, f"{contains!r} in {selector}", timeout)

    def select(self, element_id: str, value: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import Select

        Select(self.driver.find_element(By.ID, element_id)).select_by_value(value)

    def click(self, selector: str) -> None:
        """Click the element ``selector`` (CSS) finds."""
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.CSS_SELECTOR, selector).click()

    def press(self, *keys: str) -> None:
        """Send ``keys`` one at a time to the focused element, as a keyboard user would."""
        from selenium.webdriver.common.action_chains import ActionChains

        for key in keys:
            ActionChains(self.driver).send_keys(key).perform()

    def tab_to(self, script: str, what: str, limit: int = 60) -> None:
        """Press Tab until ``script`` (run on the focused element as ``el``) is true; fail naming ``what``."""
        from selenium.webdriver.common.keys import Keys

        for _ in range(limit):
            self.press(Keys.TAB)
            if self.js(f"const el = document.activeElement; return !!({script})"):
                return
        raise AssertionError(f"Tab never reached {what}")

    def query(self) -> dict[str, str]:
        """The page's current query parameters, decoded."""
        return self.js("return Object.fromEntries(new URLSearchParams(location.search))")

    def api_requests(self, path: str) -> list[dict[str, str]]:
        """Query parameters of every request the page made to ``path`` (from the Resource Timing API)."""
        return self.js(
            """return performance.getEntriesByType('resource').map(e => new URL(e.name))
                 .filter(u => u.pathname.endsWith(arguments[0])).map(u => Object.fromEntries(u.searchParams))""",
            path,
        )

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))
