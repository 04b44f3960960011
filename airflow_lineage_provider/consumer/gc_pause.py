"""Pause Python's cyclic garbage collector while a large response is built.

A graph response allocates tens of thousands of small dicts and lists in one burst; each allocation
threshold crossed runs a collection that scans every live object of the server (measured: median
80 ms -> 50 ms for a 3,000-node graph). These objects hold no reference cycles, so nothing is lost by
collecting after the burst instead. Nested and concurrent uses are counted: collection resumes when the
last one ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_active = 0


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable automatic collection for the block (restored when no block is active)."""
    global _active
    with _lock:
        if _active == 0 and not gc.isenabled():
            owner = False  # someone else turned it off: leave it as it is
        else:
            owner = True
            _active += 1
            gc.disable()
    try:
        yield
    finally:
        if owner:
            with _lock:
                _active -= 1
                if _active == 0:
                    gc.enable()
