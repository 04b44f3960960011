"""A real headless Chromium for the lineage page's tests: Debian's ``chromium`` driven by Selenium through
Debian's ``chromedriver``. Nothing is downloaded: the driver path is given and Selenium Manager is offline.

On a laptop without Chromium the tests skip with the reason; with ``CI=true`` they fail instead.

Usage::

    require_chromium()
    with headless_chromium() as browser:
        browser.get(url)
        wait_for(browser, lambda b: b.find_element(By.ID, "graph"), "the graph")
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from support.environment import unavailable

CHROMIUM = Path(os.environ.get("LINEAGE_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("LINEAGE_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"))

#: Without the background-networking flags Chromium reaches out to Google's services on start.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--force-device-scale-factor=1",
    "--hide-scrollbars",
    "--font-render-hinting=none",
)

T = TypeVar("T")


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing: install Debian's {package} package (apt-get install {package})"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed: pip install -e '.[test]'"
    return None


def require_chromium() -> None:
    """Skip without Chromium on a laptop; fail in CI, where .ci/run installs it."""
    reason = missing_browser()
    if reason is not None:
        unavailable(f"the browser tests need Chromium: {reason}")


@contextmanager
def headless_chromium(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A headless Chromium session with a fresh profile and a ``width`` by ``height`` viewport, closed (and the
    profile removed) on exit."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver or a browser
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="alp-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        # The window includes the browser's frame: pin the page's own viewport to the size asked for.
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver: Any, condition: Callable[[Any], T], what: str, timeout: float = 15) -> T:
    """Poll ``condition(driver)`` until it returns something truthy; fail naming ``what`` and the page state."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition(driver)
            if value:
                return value
        except (NoSuchElementException, StaleElementReferenceException):
            pass
        if time.monotonic() > deadline:
            state = driver.execute_script("return [document.body && document.body.dataset.state, document.title]")
            logs = ""
            with contextlib.suppress(Exception):  # not every driver keeps console logs
                logs = "; ".join(entry["message"] for entry in driver.get_log("browser"))[:2000]
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (page state {state}; console: {logs})")
        time.sleep(0.05)


def set_color_scheme(driver: Any, scheme: str) -> None:
    """Emulate ``prefers-color-scheme: <scheme>`` (light or dark) through the DevTools protocol."""
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    )
