"""An ASGI app on a real uvicorn in a thread of the test process, on 127.0.0.1, with ``serve``'s uvicorn settings."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from airflow_lineage_provider.cli.serve_command import KEEP_ALIVE_SECONDS, LIMIT_CONCURRENCY, uvicorn_options
from support.feast_consumer import free_port
from support.waiting import wait_until


@contextmanager
def served(
    app: Any, keep_alive_seconds: float = KEEP_ALIVE_SECONDS, limit_concurrency: int | None = LIMIT_CONCURRENCY
) -> Iterator[str]:
    """``app`` on a real uvicorn on 127.0.0.1 with ``serve``'s settings (:func:`uvicorn_options`, these values);
    yields the base URL."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        **uvicorn_options(keep_alive_seconds, limit_concurrency),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive(), "uvicorn ended before it started"
        return server.started

    wait_until(started, "uvicorn did not start", timeout=20)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
