"""The lineage page on a graph of a few thousand nodes: how long it takes to show and to answer.

``tests/test_ui_big_graph.py`` checks what the page does on this graph (the bounded walk, the cut notice, the
nearest nodes drawn, keyboard navigation, the main thread going on after zooming); this benchmark measures the
time, in the same set-up: the consumer on uvicorn in this process over a fresh SQLite store holding
``layered_events(20, 80)`` (1,600 jobs, 1,680 datasets), one headless Chromium (``/usr/bin/chromium``),
1400x900. Per repeat, each from a fresh page load:

* ``cut walk shown``: ``/ui`` with ``depth=20, maxNodes=500`` from navigation to the page saying ``ready``
  (the request, the answer, layout and drawing of 500 nodes);
* ``whole walk shown``: the same with ``maxNodes=5000`` (2,000 nodes), and ``drawing`` the page's own
  ``data-render-ms`` (layout and drawing, without the request);
* ``key press to details``: arrow right then Enter on the drawn root, until the details panel shows the node;
* ``zoom to next frame``: clicking "fit" then "zoom in", until a task queued behind them and the animation
  frame after it have run (the main thread is free again).

    .venv/bin/python bench/ui_big_graph.py --repeat 7          # ~1 minute
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from support.browser import headless_chromium, require_chromium, wait_for  # noqa: E402
from support.consumer_helpers import LiveServer  # noqa: E402
from support.ui_graph import layered_events, post_events  # noqa: E402
from support.ui_page import LineagePage, ui_app  # noqa: E402

LAYERS, WIDTH = 20, 80
START = "dataset:big:ds.10.40"
#: See tests/test_ui_big_graph.py: resolves once a task queued now and the frame after it have run.
NEXT_TASK_AND_FRAME = """
const done = arguments[arguments.length - 1];
setTimeout(() => requestAnimationFrame(() => done(true)), 0);
"""


def _ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def one_repeat(page: LineagePage) -> dict[str, float]:
    """The figures of one repeat (see the module), in milliseconds."""
    found = {"cut walk shown": _ms(lambda: page.open(nodeId=START, depth=20, maxNodes=500))}
    assert len(page.node_ids()) == 500
    found["whole walk shown"] = _ms(lambda: page.open(nodeId=START, depth=20, maxNodes=5000))
    assert len(page.node_ids()) == 2000
    found["drawing (data-render-ms)"] = float(
        page.driver.find_element(By.ID, "graph").get_attribute("data-render-ms") or "nan"
    )
    page.js("document.querySelector('#graph .node.root').focus()")

    def open_details() -> None:
        ActionChains(page.driver).send_keys(Keys.ARROW_RIGHT).send_keys(Keys.ENTER).perform()
        moved = page.js("return document.activeElement.dataset.id")
        wait_for(page.driver, lambda d: page.js("return document.body.dataset.selected") == moved, "details")

    found["key press to details"] = _ms(open_details)

    def zoom() -> None:
        page.driver.find_element(By.ID, "zoom-fit").click()
        page.driver.find_element(By.ID, "zoom-in").click()
        page.driver.execute_async_script(NEXT_TASK_AND_FRAME)

    found["zoom to next frame"] = _ms(zoom)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    require_chromium()
    with tempfile.TemporaryDirectory(prefix="alp-ui-big-") as tmp:
        app = ui_app(f"sqlite:///{Path(tmp) / 'lineage.db'}")
        with LiveServer(app) as server, headless_chromium() as driver:
            post_events(server.url, layered_events(LAYERS, WIDTH))
            page = LineagePage(driver, server.url)
            one_repeat(page)  # warm-up: the browser's caches, the consumer's first walk
            rows = [one_repeat(page) for _ in range(args.repeat)]
        app.state.store.dispose()
    print(f"{args.repeat} repeats after one warm-up")
    print()
    print("| step | median | min - max |")
    print("|---|---:|---:|")
    for name in rows[0]:
        values = [row[name] for row in rows]
        print(f"| {name} | {statistics.median(values):.0f} ms | {min(values):.0f} - {max(values):.0f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
