"""A poison event (one the consumer fails a whole batch for) is isolated and dead-lettered; the rest is delivered.

The consumer here is a real HTTP server on 127.0.0.1 written for these tests: it answers 500 (or drops the
connection) to any request whose body holds a NUL character, as a consumer does whose store fails the
whole batch on it, and 200/201 to the others. The last tests ship to this package's own consumer on
SQLite and PostgreSQL, which refuses the NUL event with a 400 of its own.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import attr
import pytest
import requests
from support.consumer_helpers import LiveServer
from support.outbox_helpers import pg_url, run_pairs, sqlite_url

from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport, store
from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
from airflow_lineage_provider.outbox.database import dispose_engines
from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper, ShipReport
from airflow_lineage_provider.outbox.writer import OutboxWriter

pytest_plugins = ("support.consumer_fixtures",)

#: A NUL character as it stands in the JSON of an event.
POISON_MARK = b"\\u0000"
API_KEY = "s3cret-key-never-logged"
DESTINATION = "consumer"


@pytest.fixture(autouse=True)
def _fresh_engines() -> Iterator[None]:
    yield
    dispose_engines()


@dataclass
class Request:
    """One request the poisoned consumer answered."""

    path: str
    events: int
    poisoned: bool
    status: int | None


class PoisonedConsumer:
    """An OpenLineage consumer on 127.0.0.1 whose store fails any request holding a NUL character.

    ``fault`` is what such a request gets: ``"500"`` (an error page that echoes the request's
    ``Authorization`` header, as careless error pages do) or ``"drop"`` (the connection is closed without an
    answer). ``fail_everything`` makes every request fail that way (a consumer that is down behind a
    proxy); ``spare_poison_after = n`` accepts poisoned requests after the first ``n`` (a transient fault).
    """

    def __init__(self, fault: str = "500") -> None:
        self.fault = fault
        self.fail_everything = False
        self.spare_poison_after: int | None = None
        self.events: list[dict[str, Any]] = []
        self.requests: list[Request] = []
        self._poisoned_seen = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> PoisonedConsumer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def lone_poison_requests(self) -> int:
        return sum(1 for r in self.requests if r.poisoned and r.events == 1)

    def _fails(self, body: bytes) -> bool:
        with self._lock:
            if self.fail_everything:
                return True
            if POISON_MARK not in body:
                return False
            self._poisoned_seen += 1
            return self.spare_poison_after is None or self._poisoned_seen <= self.spare_poison_after

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        consumer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                document = json.loads(body)
                events = document if self.path.endswith("/batch") else [document]
                request = Request(self.path, len(events), POISON_MARK in body, None)
                with consumer._lock:
                    consumer.requests.append(request)
                if consumer._fails(body):
                    if consumer.fault == "drop":
                        self.close_connection = True
                        return
                    request.status = 500
                    self._answer(500, f"store failed; request headers: {dict(self.headers)}".encode())
                    return
                with consumer._lock:
                    consumer.events.extend(events)
                request.status = 200 if self.path.endswith("/batch") else 201
                self._answer(request.status, json.dumps({"received": len(events)}).encode())

            def _answer(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def runs_with_poison(count: int, poisoned: set[int], event_type: str = "START") -> list[Any]:
    """``count`` runs (START then COMPLETE); the ``event_type`` event of the runs numbered in ``poisoned``
    has a NUL character in its ``producer``."""
    events = run_pairs(count)
    return [
        attr.evolve(e, producer=e.producer + "\x00") if i // 2 in poisoned and e.eventType.value == event_type else e
        for i, e in enumerate(events)
    ]


def fill(url: str, events: list[Any]) -> None:
    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    for event in events:
        outbox.emit(event)


def ship(url: str, consumer_url: str, backoff_base: float = 0.05, api_key: str | None = API_KEY) -> ShipReport:
    policy = DeliveryPolicy(batch_size=50, lease_seconds=60, backoff_base=backoff_base)
    consumer = ConsumerConfig.from_dict({"url": consumer_url, "api_key": api_key})
    return Shipper(OutboxWriter(url), DESTINATION, consumer, policy).ship()


def dead_letters(url: str) -> list[dict[str, Any]]:
    with OutboxWriter(url).engine().begin() as conn:
        return store.dead_letters(conn, store.destination_id(conn, DESTINATION))


def assert_each_once_and_start_first(received: list[dict[str, Any]]) -> None:
    assert max(Counter(e["run"]["runId"] + e["eventType"] for e in received).values()) == 1
    position = {(e["run"]["runId"], e["eventType"]): i for i, e in enumerate(received)}
    for (run_id, event_type), at in position.items():
        assert position.get((run_id, "START"), -1) < at or event_type == "START", "a run's end came before its START"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def outbox_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An outbox on SQLite or on PostgreSQL (a private schema)."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    return pg_url(request.getfixturevalue("pg_engine"))


@contextmanager
def warnings_of(logger: str) -> Iterator[list[str]]:
    """The WARNING lines ``logger`` logs meanwhile (Airflow's logging set-up may replace pytest's handlers)."""
    lines: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    recorder = Recorder(logging.WARNING)
    logging.getLogger(logger).addHandler(recorder)
    try:
        yield lines
    finally:
        logging.getLogger(logger).removeHandler(recorder)


def test_a_poison_event_failing_its_batch_is_dead_lettered_and_the_rest_delivered(outbox_url: str) -> None:
    events = runs_with_poison(10, poisoned={6})
    poison_run = str(events[12].run.runId)
    fill(outbox_url, events)
    with PoisonedConsumer("500") as consumer, warnings_of("airflow_lineage_provider.outbox") as logged:
        report = ship(outbox_url, consumer.url)
    assert (report.delivered, report.dead, report.pending, report.failed) == (19, 1, 0, False)
    assert len(consumer.events) == 19
    assert [e["eventType"] for e in consumer.events if e["run"]["runId"] == poison_run] == ["COMPLETE"]
    assert_each_once_and_start_first(consumer.events)
    assert consumer.lone_poison_requests() == DeliveryPolicy().poison_attempts
    [dead] = dead_letters(outbox_url)
    assert (dead["run_id"], dead["event_type"], dead["status_code"]) == (poison_run, "START", 500)
    assert "store failed" in dead["last_error"] and "failed alone 3 times" in dead["last_error"]
    assert report.dead_letters == [f"START {poison_run}: {dead['last_error']}"]
    [line] = [line for line in logged if "dead-lettered" in line]
    assert poison_run in line and "store failed" in line and "START" in line
    assert "Bearer ***" in line and API_KEY not in "".join(logged) + dead["last_error"], "the API key was echoed"


@pytest.mark.parametrize(("fault", "position"), [("500", 0), ("500", 9), ("drop", 4), ("drop", 0)])
def test_the_poison_is_found_wherever_it_sits_and_whatever_the_failure(
    tmp_path: Path, fault: str, position: int
) -> None:
    url = sqlite_url(tmp_path)
    events = runs_with_poison(10, poisoned={position})
    fill(url, events)
    with PoisonedConsumer(fault) as consumer:
        report = ship(url, consumer.url)
    assert (report.delivered, report.dead, report.pending) == (19, 1, 0)
    [dead] = dead_letters(url)
    assert dead["run_id"] == str(events[2 * position].run.runId)
    assert dead["status_code"] == (500 if fault == "500" else None)
    assert_each_once_and_start_first(consumer.events)


def test_both_events_of_a_poisoned_run_are_dead_lettered(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    events = runs_with_poison(10, poisoned={3})
    events = [attr.evolve(e, producer=e.producer + "\x00") if i == 7 else e for i, e in enumerate(events)]
    fill(url, events)
    with PoisonedConsumer() as consumer:
        report = ship(url, consumer.url)
    assert (report.delivered, report.dead, report.pending) == (18, 2, 0)
    assert {(d["run_id"], d["event_type"]) for d in dead_letters(url)} == {
        (str(events[6].run.runId), "START"),
        (str(events[6].run.runId), "COMPLETE"),
    }


def test_a_consumer_failing_every_request_dead_letters_nothing(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, runs_with_poison(10, poisoned={4}))
    with PoisonedConsumer() as consumer:
        consumer.fail_everything = True
        report = ship(url, consumer.url, backoff_base=30)
        assert (report.delivered, report.dead, report.pending, report.failed) == (0, 0, 20, True)
        # Down is told from poisoned after a few requests: the batch, halves down to one event, three singles.
        assert report.requests <= 8
        assert ship(url, consumer.url).requests == 0, "events in backoff were sent again at once"
    assert dead_letters(url) == []


def test_an_unreachable_consumer_dead_letters_nothing(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, runs_with_poison(10, poisoned={4}))
    with PoisonedConsumer() as consumer:
        unreachable = consumer.url
    report = ship(url, unreachable)  # the port now refuses connections
    assert (report.delivered, report.dead, report.pending, report.failed) == (0, 0, 20, True)
    assert report.requests == 1 and "ConnectionError" in report.last_error
    assert dead_letters(url) == []


def test_an_event_failing_alone_only_for_a_while_is_delivered(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, runs_with_poison(10, poisoned={5}))
    with PoisonedConsumer() as consumer:
        consumer.spare_poison_after = 5  # the batch, a half, a quarter, the event alone twice; the third time it passes
        report = ship(url, consumer.url)
    assert (report.delivered, report.dead, report.pending) == (20, 0, 0)
    assert_each_once_and_start_first(consumer.events)


def test_a_run_of_poison_events_at_the_head_is_passed_on_a_later_attempt(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    fill(url, runs_with_poison(10, poisoned={0, 1, 2, 3}))
    with PoisonedConsumer() as consumer:
        first = ship(url, consumer.url, backoff_base=1.0)
        assert (first.delivered, first.dead, first.pending) == (0, 0, 20), "three failing in a row looked like down"
        time.sleep(1.3)  # the backoff (1 s, +20 % at most) runs out; the batch failed once before
        later = ship(url, consumer.url)
    assert (later.delivered, later.dead, later.pending) == (16, 4, 0)
    assert_each_once_and_start_first(consumer.events)


def test_the_real_consumer_refuses_the_nul_event_which_is_dead_lettered_with_its_reason(
    store_url: str, tmp_path: Path
) -> None:
    from airflow_lineage_provider.consumer import create_app

    url = sqlite_url(tmp_path)
    events = runs_with_poison(10, poisoned={2})
    fill(url, events)
    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    try:
        with LiveServer(app) as server:
            report = ship(url, server.url, api_key=None)
            stored = requests.get(f"{server.url}/api/v1/events", params={"limit": 100}, timeout=10).json()
    finally:
        app.state.store.dispose()
    assert (report.delivered, report.dead, report.pending) == (19, 1, 0)
    [dead] = dead_letters(url)
    assert (dead["run_id"], dead["event_type"], dead["status_code"]) == (str(events[4].run.runId), "START", 400)
    assert "producer contains a NUL character" in dead["last_error"]
    assert stored["totalCount"] == 19
    assert Counter(e["eventType"] for e in stored["events"]) == {"START": 9, "COMPLETE": 10}
