"""An ASGI app on a real uvicorn in a thread of the test process, on 127.0.0.1, with ``serve``'s protocol."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from airflow_lineage_provider.consumer.http_protocol import guarded_protocol
from support.feast_consumer import free_port


@contextmanager
def served(app: Any, head_seconds: float = 10.0, stall_seconds: float = 30.0, protocol: Any = None) -> Iterator[str]:
    """``app`` on a real uvicorn on 127.0.0.1 with ``serve``'s protocol (or ``protocol``); yields the base URL."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        http=protocol or guarded_protocol(head_seconds, stall_seconds),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
