"""A real OpenLineage HTTP consumer on 127.0.0.1 with faults that tests switch on and off.

It serves ``POST /<endpoint>`` (one event) and ``POST /<endpoint>/batch`` (a JSON array) and records what
it accepted, in order. Faults, all plain attributes changed while it runs:

* ``down_status = 503`` (or any code): every request answers that status;
* ``fail_next = n`` with ``fail_status``: the next ``n`` requests answer ``fail_status``;
* ``delay = s``: every answer waits ``s`` seconds (slow consumer; longer than the client's timeout gives a
  timeout);
* ``reject = predicate``: events for which ``predicate(event)`` is true get a 400; a batch containing one
  is rejected as a whole (400), unless ``partial_results`` is on, which answers 207 with per-event results;
* ``batch_endpoint = False``: the batch URL answers 404 (a consumer with single-event ingestion only);
* ``api_key = "k"``: requests without ``Authorization: Bearer k`` get a 401;
* ``accept_gzip = False``: gzip bodies get a 415.

Usage::

    with ConsumerServer() as consumer:
        consumer.fail_next = 2
        ship_to(consumer.url)
        assert [e["run"]["runId"] for e in consumer.events] == [...]
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Request:
    """One request the consumer answered."""

    path: str
    events: int
    status: int
    headers: dict[str, str] = field(default_factory=dict)


class ConsumerServer:
    """See the module docstring."""

    def __init__(self, endpoint: str = "api/v1/lineage") -> None:
        self.endpoint = endpoint.strip("/")
        self.events: list[dict[str, Any]] = []
        self.requests: list[Request] = []
        #: Requests whose body arrived, answered or not yet (``requests`` holds the answered ones).
        self.arrived = 0
        self.down_status: int | None = None
        self.fail_next = 0
        self.fail_status = 503
        self.delay = 0.0
        self.reject: Callable[[dict[str, Any]], bool] | None = None
        self.partial_results = False
        #: Where a 207 puts its per-event results (``results``, as documented; anything else: a shape to refuse).
        self.partial_key = "results"
        self.batch_endpoint = True
        self.api_key: str | None = None
        self.accept_gzip = True
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="consumer-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConsumerServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering; the port then refuses connections (a consumer that is down)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ConsumerServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def run_ids(self, event_type: str | None = None) -> list[str]:
        with self._lock:
            return [e["run"]["runId"] for e in self.events if event_type in (None, e.get("eventType"))]

    def _answer(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
        """The status and JSON answer for one request, recording accepted events."""
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                return self.fail_status, {"error": "injected failure"}
            down = self.down_status
        if down is not None:
            return down, {"error": "consumer down"}
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": "missing or wrong API key"}
        if headers.get("content-encoding") == "gzip":
            if not self.accept_gzip:
                return 415, {"error": "gzip not supported"}
            body = gzip.decompress(body)
        single = f"/{self.endpoint}"
        if path not in (single, f"{single}/batch"):
            return 404, {"error": f"no route {path}"}
        is_batch = path.endswith("/batch")
        if is_batch and not self.batch_endpoint:
            return 404, {"error": "no batch endpoint"}
        try:
            document = json.loads(body)
        except ValueError:
            return 400, {"error": "invalid JSON"}
        events = document if is_batch else [document]
        if is_batch and not isinstance(document, list):
            return 400, {"error": "expected an array"}
        rejected = [self.reject is not None and self.reject(event) for event in events]
        if any(rejected) and not (is_batch and self.partial_results):
            return 400, {"error": "event rejected: invalid run facet"}
        with self._lock:
            self.events.extend(e for e, bad in zip(events, rejected, strict=True) if not bad)
        if any(rejected):
            results = [
                {"index": i, "status": 400 if bad else 201, "error": "event rejected" if bad else None}
                for i, bad in enumerate(rejected)
            ]
            return 207, {self.partial_key: results}
        return (200, {"received": len(events)}) if is_batch else (201, {"status": "created"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.arrived += 1
                if server.delay:
                    time.sleep(server.delay)
                status, answer = server._answer(self.path, body, headers)
                try:
                    count = len(
                        json.loads(gzip.decompress(body) if headers.get("content-encoding") == "gzip" else body)
                    )
                    count = count if self.path.endswith("/batch") else 1
                except Exception:
                    count = 0
                with server._lock:
                    server.requests.append(Request(self.path, count, status, headers))
                payload = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        return Handler
