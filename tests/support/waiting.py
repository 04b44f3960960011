"""Waiting in tests: on a condition, never for a fixed time.

A test that sleeps and then asserts guesses how long the thing takes: too short and it fails on a loaded machine,
too long and every run pays for it. :func:`wait_until` polls the condition instead and fails, naming what never
happened, only after a deadline far above what the thing needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: How long a test waits for a condition before failing: far above what any awaited thing needs.
DEADLINE_SECONDS = 30.0


def wait_until(
    condition: Callable[[], T],
    message: str,
    timeout: float = DEADLINE_SECONDS,
    interval: float = 0.02,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``condition`` every ``interval`` seconds until it answers something true, and answer that; fail the
    test with ``message`` (what never happened), and ``detail()`` when given (what was seen instead), when
    ``timeout`` seconds pass first.

    Example: ``wait_until(lambda: app.state.walks.held_bytes, "the unread answer was never held")``.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() >= deadline:
            seen = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"{message} (not within {timeout:g} s){seen}")
        time.sleep(interval)
