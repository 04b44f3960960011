"""Walks nobody waits for any more are stopped, on SQLite and PostgreSQL, over real HTTP on 127.0.0.1: a walk whose
client disconnects leaves the queue, or has its statement cancelled in the database, and a walk past
``walk_timeout_seconds`` is stopped and answered 504 (503 when it never got a turn)."""

from __future__ import annotations

import asyncio
import random
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from starlette.requests import Request
from support.consumer_helpers import PRODUCER
from support.environment import PG_URL, postgres_schema_url
from support.uvicorn_thread import served
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.limits.walk_limits import Walk, WalkLimiter
from airflow_lineage_provider.consumer.security.access import Access

#: A column-lineage walk of seconds on the graph below: every field it can reach, both ways.
HEAVY = "/api/v1/column-lineage?nodeId=datasetField:wh:l10.t0:c0&depth=100&maxNodes=100000&direction=both"
SMALL = "/api/v1/column-lineage?nodeId=datasetField:wh:l10.t0:c0&depth=1"
#: Seconds a condition may take to come true.
DEADLINE = 20.0

SCHEMA_URL = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
COLUMNS_URL = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"


def column_graph_events(jobs: int = 2000, layers: int = 20, fields: int = 10, seed: int = 3) -> list[dict[str, Any]]:
    """COMPLETE events of ``jobs`` jobs in ``layers``: each reads two datasets of the layer before and one of any
    earlier layer, and derives each of its output's ``fields`` from one field of each input; three in ten also
    read their own output (an incremental load), deriving each field from the next one of the same dataset. The
    cycles let a deep walk reach a field at many depths: the recursion reads its whole row budget."""
    rng = random.Random(seed)
    per_layer = jobs // layers
    start = datetime(2026, 3, 1, tzinfo=timezone.utc)
    events = []
    for layer in range(layers):
        for index in range(per_layer):
            if layer == 0:
                inputs = [f"raw.s{i}" for i in rng.sample(range(per_layer), 3)]
            else:
                inputs = [f"l{layer - 1}.t{i}" for i in rng.sample(range(per_layer), 2)]
                inputs = list(dict.fromkeys([*inputs, f"l{rng.randrange(layer)}.t{rng.randrange(per_layer)}"]))
            name = f"l{layer}.t{index}"
            incremental = rng.random() < 0.3
            lineage = {}
            for field in range(fields):
                sources = [{"namespace": "wh", "name": d, "field": f"c{rng.randrange(fields)}"} for d in inputs]
                if incremental:
                    sources.append({"namespace": "wh", "name": name, "field": f"c{(field + 1) % fields}"})
                lineage[f"c{field}"] = {"inputFields": sources, "transformationType": "IDENTITY"}
            schema = [{"name": f"c{field}", "type": "INT"} for field in range(fields)]
            facets = {
                "schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_URL, "fields": schema},
                "columnLineage": {"_producer": PRODUCER, "_schemaURL": COLUMNS_URL, "fields": lineage},
            }
            events.append(
                {
                    "eventType": "COMPLETE",
                    "eventTime": (start + timedelta(seconds=len(events))).isoformat(),
                    "run": {"runId": str(uuid.UUID(int=rng.getrandbits(128), version=4))},
                    "job": {"namespace": "pipelines", "name": f"job_{layer}_{index}"},
                    "producer": PRODUCER,
                    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                    "inputs": [{"namespace": "wh", "name": d} for d in inputs],
                    "outputs": [{"namespace": "wh", "name": name, "facets": facets}],
                }
            )
    return events


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def heavy_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A store holding :func:`column_graph_events` (on PostgreSQL, connecting under an application name of its own,
    so that ``pg_stat_activity`` tells its sessions apart from other tests')."""

    def load(url: str) -> None:
        app = create_app(store_url=url, anonymous=Access.ADMIN)
        events = column_graph_events()
        with TestClient(app) as client:
            for start in range(0, len(events), 500):
                assert client.post("/api/v1/lineage/batch", json=events[start : start + 500]).status_code == 200
            assert client.get(SMALL).status_code == 200  # applied (deferred apply on PostgreSQL)
        app.state.store.dispose()

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('walks') / 'lineage.db'}"
        load(url)
        yield url
        return
    with postgres_schema_url() as schema_url:
        url = f"{schema_url}&application_name=alp_walks_{uuid.uuid4().hex[:10]}"
        load(url)
        yield url


def walk_statements(url: str) -> int | None:
    """How many walk statements the store's sessions run now (None for SQLite)."""
    if not url.startswith("postgresql"):
        return None
    name = url.rsplit("application_name=", 1)[1]
    engine = create_engine(PG_URL)
    try:
        with engine.connect() as conn:
            query = text(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name AND state = 'active' "
                "AND query LIKE 'WITH RECURSIVE%'"
            )
            return int(conn.execute(query, {"name": name}).scalar_one())
    finally:
        engine.dispose()


def send(port: int, path: str) -> socket.socket:
    """A client that sends ``GET path`` and reads nothing."""
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return client


def test_walks_whose_clients_disconnect_are_stopped_and_the_queue_serves_a_new_walk(heavy_store: str) -> None:
    app = create_app(store_url=heavy_store, anonymous=Access.ADMIN)
    walks: WalkLimiter = app.state.walks
    on_postgres = walk_statements(heavy_store) is not None
    with served(app) as url:
        port = int(url.rsplit(":", 1)[1])
        assert requests.get(url + SMALL, timeout=30).status_code == 200
        clients = [send(port, HEAVY) for _ in range(walks.concurrent + walks.waiting)]
        wait_until(lambda: walks.admitted == len(clients) and walks.running == walks.concurrent, "every walk admitted")
        if on_postgres:
            wait_until(lambda: walk_statements(heavy_store) == walks.concurrent, "the running walks' statements")
        for client in clients:
            client.close()
        # The waiting walks leave the queue, the running ones' statements are cancelled in the database.
        wait_until(lambda: walks.admitted == 0 and walks.running == 0, "the abandoned walks stopped")
        if on_postgres:
            wait_until(lambda: walk_statements(heavy_store) == 0, "no walk statement left in the database")
        assert walks.stopped == len(clients)  # none was computed to its end
        assert requests.get(url + SMALL, timeout=30).status_code == 200
        # The cancelled walks' connections are back in the pool, and every one of them serves walks again.
        assert app.state.store.engine.pool.checkedout() == 0
        answers = []
        threads = [
            threading.Thread(target=lambda: answers.append(requests.get(url + SMALL, timeout=60).status_code))
            for _ in range(walks.concurrent * 2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert answers == [200] * len(threads)
    app.state.store.dispose()


def test_a_walk_past_its_time_is_stopped_and_answered_504(heavy_store: str) -> None:
    app = create_app(store_url=heavy_store, anonymous=Access.ADMIN, walk_timeout_seconds=0.5)
    walks: WalkLimiter = app.state.walks
    with served(app) as url:
        assert requests.get(url + SMALL, timeout=30).status_code == 200
        answer = requests.get(url + HEAVY, timeout=60)
        assert answer.status_code == 504, answer.text[:300]
        detail = answer.json()["detail"]
        assert "walk_timeout_seconds (0.5 s)" in detail and "depth" in detail and "maxNodes" in detail
        assert walks.running == 0 and walks.stopped == 1  # answered once its thread ended
        if walk_statements(heavy_store) is not None:
            wait_until(lambda: walk_statements(heavy_store) == 0, "no walk statement left in the database")
        assert requests.get(url + SMALL, timeout=30).status_code == 200
    app.state.store.dispose()


def _request() -> Request:
    """A GET whose client stays connected (its ``receive`` never answers ``http.disconnect``)."""

    async def connected() -> Any:
        await asyncio.Event().wait()

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/lineage",
        "query_string": b"",
        "headers": [],
        "scheme": "http",
        "server": ("127.0.0.1", 80),
    }
    return Request(scope, connected)


def test_a_walk_that_waits_past_its_time_for_a_turn_is_answered_503() -> None:
    limiter = WalkLimiter(concurrent=1, waiting=1, answer_bytes=1 << 20, timeout=0.3)
    release = threading.Event()

    def holding(walk: Walk) -> bytes:  # keeps the only turn: nothing to interrupt
        release.wait(30)
        return b"{}"

    async def scenario() -> tuple[int, int, str | None, str]:
        first = asyncio.ensure_future(limiter.answer(_request(), holding))

        async def first_running() -> None:
            while limiter.running == 0:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(first_running(), DEADLINE)  # the first walk holds the only turn
        second = await limiter.answer(_request(), holding)  # waits for the turn until its time is up
        release.set()
        return (await first).status_code, second.status_code, second.headers.get("retry-after"), second.body.decode()

    first, second, retry_after, body = asyncio.run(scenario())
    assert (first, second, retry_after) == (504, 503, "5")
    assert "waited" in body and "walk_timeout_seconds = 0.3" in body
    assert limiter.admitted == 0 and limiter.running == 0 and limiter.stopped == 2


def test_the_walk_timeout_and_answer_limit_are_checked() -> None:
    for bad in ({"walk_timeout_seconds": 0}, {"max_answer_bytes": 10}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            create_app(store_url=f"sqlite:///{Path('/nonexistent/never-opened.db')}", anonymous=Access.ADMIN, **bad)


@pytest.mark.postgres
def test_a_walk_waiting_for_deferred_apply_is_stopped_at_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk's read first waits until what was logged before it is applied (deferred apply); a walk stopped
    meanwhile ends there, answered 504 at its time, instead of holding its turn and a connection for as long as
    the read would wait (an hour here)."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "READ_WAIT_SECONDS", 3600.0)
    with postgres_schema_url() as url:
        app = create_app(store_url=url, anonymous=Access.ADMIN, ingest_apply="deferred", walk_timeout_seconds=1.0)
        walks: WalkLimiter = app.state.walks
        with TestClient(app) as client:
            event = {
                "eventType": "COMPLETE",
                "eventTime": datetime.now(timezone.utc).isoformat(),
                "run": {"runId": str(uuid.uuid4())},
                "job": {"namespace": "wh", "name": "first"},
                "outputs": [{"namespace": "wh", "name": "t"}],
                "producer": PRODUCER,
            }
            assert client.post("/api/v1/lineage", json=event).status_code == 201
            assert client.get("/api/v1/lineage", params={"nodeId": "dataset:wh:t", "depth": 1}).status_code == 200
            locker = create_engine(url)
            with locker.connect() as held:  # the applier cannot write the graph while this lock is held
                held.execute(text("LOCK TABLE lineage_nodes IN ACCESS EXCLUSIVE MODE"))
                event = {**event, "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "wh", "name": "second"}}
                assert client.post("/api/v1/lineage", json=event).status_code == 201
                answers: list[Any] = []
                walker = threading.Thread(
                    target=lambda: answers.append(
                        client.get("/api/v1/lineage", params={"nodeId": "dataset:wh:t", "depth": 1})
                    ),
                    daemon=True,
                )
                walker.start()
                walker.join(DEADLINE)
                assert answers, "the walk was still waiting for deferred apply long after its time"
                answer = answers[0]
                assert answer.status_code == 504, answer.text[:300]
                assert "walk_timeout_seconds (1 s)" in answer.json()["detail"]
                assert walks.running == 0 and walks.stopped == 1
                held.rollback()
            locker.dispose()
            wait_until(
                lambda: client.get("/api/v1/lineage", params={"nodeId": "dataset:wh:t", "depth": 1}).status_code == 200,
                "the walk answered once the lock was gone",
            )
        app.state.store.dispose()
