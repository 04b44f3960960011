"""Hostile input that must cost the consumer no more than linear work, nor a 4xx for an overloaded store:
node ids with very many ``:`` and an exhausted connection pool, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import dataset, on_a_request_thread, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.nodeids import MAX_SEPARATORS
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.validation import MAX_DEPTH

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def statements(app: Any) -> Iterator[list[str]]:
    """The SQL statements the app's store runs while the test runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if on_a_request_thread():
            seen.append(statement)

    engine = app.state.store.engine
    event.listen(engine, "before_cursor_execute", record)
    yield seen
    event.remove(engine, "before_cursor_execute", record)


def test_a_thousand_part_column_lineage_id_is_refused_before_any_lookup(
    client: TestClient, statements: list[str]
) -> None:
    node_id = "datasetField:" + ":".join(["a"] * 1000)
    client.get("/api/v1/namespaces")  # the store is opened and migrated
    statements.clear()
    answer = client.get("/api/v1/column-lineage", params={"nodeId": node_id})
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith(
        f"nodeId has 999 ':' separators after datasetField:; at most {MAX_SEPARATORS}"
    )
    assert len(answer.text) < 500  # the id is not echoed back whole
    # Refused before the store is asked anything: no work grows with the id, and such requests in parallel
    # cannot exhaust the pool.
    assert statements == []


def test_an_id_at_the_separator_bound_costs_two_statements(client: TestClient, statements: list[str]) -> None:
    columns = {"total": [("warehouse", "orders", "amount")]}
    client.post(
        "/api/v1/lineage", json=run_event("COMPLETE", "sum", outputs=[dataset("t", fields=["total"], columns=columns)])
    )
    statements.clear()
    node_id = "datasetField:" + ":".join(["a"] * (MAX_SEPARATORS + 1))
    assert client.get("/api/v1/column-lineage", params={"nodeId": node_id}).status_code == 404
    lookups = [s for s in statements if "lineage_nodes" in s or "lineage_fields" in s]
    assert len(lookups) <= 2, lookups
    found = client.get("/api/v1/column-lineage", params={"nodeId": "datasetField:warehouse:t:total"})
    assert found.status_code == 200
    assert "datasetField:warehouse:orders:amount" in {node["id"] for node in found.json()["graph"]}


def test_an_exhausted_connection_pool_answers_503_with_retry_after(store_url: str) -> None:
    engine = create_store_engine(store_url, pool_size=1, max_overflow=0, pool_timeout=0.5)
    app = create_app(store_url=store_url, engine=engine, anonymous=Access.ADMIN)
    with TestClient(app) as client:
        assert client.get("/api/v1/namespaces").status_code == 200  # the store is created and migrated
        held = engine.connect()  # the pool's only connection, as if a slow walk held it
        try:
            ingest = client.post("/api/v1/lineage", json=run_event("START", "load"))
            read = client.get("/api/v1/jobs")
        finally:
            held.close()
        for answer in (ingest, read):
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"]
            assert "busy" in answer.json()["detail"] or "unavailable" in answer.json()["detail"]
        assert client.post("/api/v1/lineage", json=run_event("START", "load")).status_code == 201
    engine.dispose()


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/search", {"q": "a\x00b"}),
        ("/api/v1/datasets", {"namespace": "\x00"}),
        ("/api/v1/jobs", {"name_contains": "\x00"}),
        ("/api/v1/runs", {"jobNamespace": "a\x00", "jobName": "b"}),
        ("/api/v1/lineage", {"nodeId": "dataset:a:\x00"}),
        ("/api/v1/events", {"after": "0001-01-01T00:00:00+14:00"}),
        ("/api/v1/events", {"before": "9999-12-31T23:59:59-14:00"}),
    ],
)
def test_parameters_no_store_can_take_are_400_not_500(client: TestClient, path: str, params: dict[str, str]) -> None:
    answer = client.get(path, params=params)
    assert answer.status_code == 400, answer.text
    assert "Traceback" not in answer.text


def test_nul_in_producer_is_refused_and_in_a_parent_run_id_ignored_never_a_500(client: TestClient) -> None:
    neighbours = [run_event("START", f"fine_{i}") for i in range(2)]
    bad_producer = {**run_event("START", "poisoned"), "producer": "https://acme/\x00"}
    answer = client.post("/api/v1/lineage/batch", json=[neighbours[0], bad_producer, neighbours[1]])
    assert answer.status_code == 207, answer.text
    assert answer.json()["errors"] == [
        {"index": 1, "error": "producer contains a NUL character, which no lineage store can keep"}
    ]
    parented = run_event("START", "child")
    parented["run"]["facets"] = {"parent": {"run": {"runId": "x\x00"}, "job": {"namespace": "p", "name": "q"}}}
    assert client.post("/api/v1/lineage", json=parented).status_code == 201
    run = client.get(f"/api/v1/runs/{parented['run']['runId']}").json()
    assert run["parentRunId"] is None  # not a UUID: ignored, as any unreadable facet value
    assert client.get("/api/v1/jobs", params={"name_contains": "fine_"}).json()["totalCount"] == 2


def test_a_namespace_limited_key_lists_events_holding_nul_in_a_facet(store_url: str) -> None:
    keys = (
        ApiKey("all", Access.ADMIN, "all-namespaces"),
        ApiKey("wh", Access.READ, "warehouse-only", NamespaceScope(("warehouse", "pipelines"))),
    )
    app = create_app(store_url=store_url, keys=keys)
    event = run_event("COMPLETE", "load", outputs=[dataset("t")])
    event["job"]["facets"] = {"note": {"text": "a\x00b"}}
    with TestClient(app) as client:
        assert client.post("/api/v1/lineage", json=event, headers={"X-API-Key": "all-namespaces"}).status_code == 201
        listed = client.get("/api/v1/events", headers={"X-API-Key": "warehouse-only"})
        assert listed.status_code == 200, listed.text
        assert listed.json()["totalCount"] == 1
    app.state.store.dispose()


def test_a_run_id_with_a_trailing_newline_is_refused(client: TestClient) -> None:
    event = run_event("START", "load")
    event["run"]["runId"] += "\n"
    assert client.post("/api/v1/lineage", json=event).status_code == 400


@pytest.mark.parametrize("levels", [980, 5000])
def test_an_event_nested_past_pythons_recursion_limit_is_a_400(client: TestClient, levels: int) -> None:
    body = '{"x":' * levels + "{}" + "}" * levels
    raw = json.dumps(run_event("START", "load"))[:-1] + ',"deep":' + body + "}"
    answer = client.post("/api/v1/lineage", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert f"at most {MAX_DEPTH}" in answer.text
    assert len(answer.text) < 500


def _nested(levels: int) -> dict[str, Any]:
    deep: dict[str, Any] = {}
    for _ in range(levels - 1):
        deep = {"x": deep}
    return deep


def test_nesting_past_the_depth_limit_is_a_400_naming_the_path(client: TestClient) -> None:
    # The event is level 1, run 2, facets 3, "d" 4: a facet value of n levels reaches level n + 3.
    fits = run_event("START", "deep_enough")
    fits["run"]["facets"] = {"d": _nested(MAX_DEPTH - 3)}
    assert client.post("/api/v1/lineage", json=fits).status_code == 201
    too_deep = run_event("START", "too_deep")
    too_deep["run"]["facets"] = {"d": _nested(MAX_DEPTH - 2)}
    answer = client.post("/api/v1/lineage/batch", json=[run_event("START", "neighbour"), too_deep])
    assert answer.status_code == 207
    error = answer.json()["errors"][0]
    assert error["index"] == 1
    assert f"more than {MAX_DEPTH} levels deep (at run.facets.d.x.x" in error["error"]
    listed = client.get("/api/v1/events").json()["events"]
    assert {e["job"]["name"] for e in listed} == {"deep_enough", "neighbour"}


def test_an_event_time_past_the_clock_skew_is_refused(client: TestClient) -> None:
    soon = datetime.now(timezone.utc) + timedelta(hours=1)
    later = datetime.now(timezone.utc) + timedelta(hours=25)
    for when, code in ((soon, 201), (later, 400), (datetime(9999, 12, 31, tzinfo=timezone.utc), 400)):
        event = run_event("START", "clock")
        event["eventTime"] = when.isoformat()
        answer = client.post("/api/v1/lineage", json=event)
        assert answer.status_code == code, answer.text
        if code == 400:
            assert "later than this consumer accepts" in answer.json()["detail"]
            assert "producer's clock" in answer.json()["detail"]


def _store_directly(app: Any, event: dict[str, Any]) -> None:
    """Store ``event`` without the HTTP checks, as a store written before they existed holds it."""
    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    with app.state.store.write() as conn:
        ingest_events(conn, [parse_event(event, max_depth=10_000)])


def test_a_stored_deep_far_future_event_does_not_break_any_listing(client: TestClient, app: Any) -> None:
    deep = _nested(300)  # pydantic serializes at most 255 levels; the listings must not go through it
    event = run_event("COMPLETE", "deep", outputs=[{"namespace": "w", "name": "t", "facets": {"d": deep}}])
    event["job"]["facets"] = {"d": deep}
    event["run"]["facets"] = {"d": deep}
    event["eventTime"] = "9999-12-31T00:00:00Z"
    client.get("/api/v1/namespaces")  # the store is created
    _store_directly(app, event)
    run_id = event["run"]["runId"]
    for path, params in (
        ("/api/v1/events", {}),
        ("/api/v1/jobs", {}),
        ("/api/v1/datasets", {}),
        ("/api/v1/runs", {"jobNamespace": "pipelines", "jobName": "deep"}),
        (f"/api/v1/runs/{run_id}", {}),
        ("/api/v1/search", {"q": "deep"}),
        ("/api/v1/namespaces", {}),
    ):
        answer = client.get(path, params=params)
        assert answer.status_code == 200, (path, answer.text[:200])
    assert client.get("/api/v1/events").json()["events"][0]["job"]["facets"]["d"] == deep


def test_a_batch_of_200000_empty_objects_gets_a_bounded_answer(client: TestClient) -> None:
    body = "[" + ",".join(["{}"] * 200_000) + "]"
    answer = client.post("/api/v1/lineage/batch", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413, answer.text[:300]
    assert "at most 10000 are accepted per request" in answer.json()["detail"]
    assert len(answer.content) < 500


def test_a_full_batch_of_bad_events_lists_each_error_once_and_boundedly(client: TestClient) -> None:
    bad = {"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": "x" * 1_000}, "job": {"namespace": "n"}}
    answer = client.post("/api/v1/lineage/batch", json=[bad] * 10_000)
    assert answer.status_code == 400
    body = answer.json()
    counts = (body["received"], body["failed"], len(body["errors"]), body["errorsOmitted"])
    assert counts == (10_000, 10_000, 100, 9_900)
    assert all(len(e["error"]) < 200 for e in body["errors"])  # the 1,000-character value is not echoed
    assert [r["status"] for r in body["results"]] == [400] * 10_000
    assert set(body["results"][0]) == {"index", "status"}  # the text is in errors only, never twice
    assert len(answer.content) < 10_000 * 40 + 100 * 300


def test_retention_prunes_an_event_stored_with_a_far_future_time(client: TestClient, app: Any) -> None:
    from sqlalchemy import update

    from airflow_lineage_provider.consumer.ingest.service import prune_now
    from airflow_lineage_provider.consumer.store.schema import tables

    client.get("/api/v1/namespaces")  # the store is created
    future = {**run_event("START", "from_the_future"), "eventTime": "9999-12-31T00:00:00Z"}
    _store_directly(app, future)
    today = {**run_event("START", "today"), "eventTime": datetime.now(timezone.utc).isoformat()}
    assert client.post("/api/v1/lineage", json=today).status_code == 201
    with app.state.store.write() as conn:  # the far-future event arrived two days ago
        arrived = datetime.now(timezone.utc) - timedelta(days=2)
        conn.execute(
            update(tables.events).where(tables.events.c.job_name == "from_the_future"), {"received_at": arrived}
        )
    assert prune_now(app.state.store, days=1).events == 1
    remaining = client.get("/api/v1/events").json()["events"]
    assert [e["job"]["name"] for e in remaining] == ["today"]


def test_every_member_of_a_concatenated_gzip_body_is_read(client: TestClient) -> None:
    import gzip

    first, second = run_event("START", "first_member"), run_event("START", "second_member")
    # One array split across two gzip members, as `cat a.gz b.gz` makes (RFC 1952, 2.2), then zero padding.
    text = json.dumps([first, second]).encode()
    cut = text.index(b',{"eventTime"') if b',{"eventTime"' in text else len(text) // 2
    body = gzip.compress(text[:cut]) + gzip.compress(text[cut:]) + b"\x00" * 8
    answer = client.post("/api/v1/lineage/batch", content=body, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["received"] == 2
    assert client.get("/api/v1/jobs", params={"name_contains": "_member"}).json()["totalCount"] == 2
    cut_short = gzip.compress(text)[:-12]
    answer = client.post("/api/v1/lineage/batch", content=cut_short, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 400 and "cut short" in answer.json()["detail"]


def test_a_body_of_many_gzip_members_is_refused_past_the_member_bound(client: TestClient) -> None:
    """Each member once cost a copy of the rest of the body (quadratic: 400k empty members took 34 s on the event
    loop); members are now counted and capped, and decoded in linear time."""
    import gzip

    from airflow_lineage_provider.consumer.ingest.request_body import MAX_GZIP_MEMBERS

    event_member = gzip.compress(json.dumps(run_event("START", "many_members")).encode())
    empty = gzip.compress(b"")
    at_bound = event_member + empty * (MAX_GZIP_MEMBERS - 1)
    answer = client.post("/api/v1/lineage", content=at_bound, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 201, answer.text
    over = event_member + empty * 400_000  # the reproduction's 8 MB body
    answer = client.post("/api/v1/lineage", content=over, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 400
    assert answer.json()["detail"] == (
        f"the gzip body holds more than {MAX_GZIP_MEMBERS} members: compress the body as one member"
    )


def test_gzip_members_across_the_decoding_window_are_read_exactly() -> None:
    """Members of every size, straddling the window zlib is fed through, with zero padding between some."""
    import gzip
    import random

    from airflow_lineage_provider.consumer.ingest.request_body import GZIP_WINDOW, gunzip

    chance = random.Random(7)
    texts = [chance.randbytes(chance.choice([0, 1, 100, GZIP_WINDOW - 7, 3 * GZIP_WINDOW + 5])) for _ in range(40)]
    body = b"".join(gzip.compress(text) + b"\x00" * chance.choice([0, 0, 3]) for text in texts)
    assert gunzip(body, 10 * len(body)) == b"".join(texts)
    with pytest.raises(Exception, match="larger than this consumer accepts"):
        gunzip(body, len(b"".join(texts)) - 1)


def test_gzip_bodies_are_inflated_off_the_event_loop(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import gzip

    from airflow_lineage_provider.consumer.ingest import request_body

    loops: list[bool] = []
    inflate = request_body.gunzip

    def recorded(body: bytes, limit: int) -> bytes:
        try:
            asyncio.get_running_loop()
            loops.append(True)
        except RuntimeError:  # no event loop runs in this thread: a worker thread
            loops.append(False)
        return inflate(body, limit)

    monkeypatch.setattr(request_body, "gunzip", recorded)
    body = gzip.compress(json.dumps(run_event("START", "off_the_loop")).encode())
    answer = client.post("/api/v1/lineage", content=body, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 201, answer.text
    assert loops == [False]


def test_an_upload_that_trickles_past_the_upload_deadline_is_answered_408_and_closed(store_url: str) -> None:
    """A client that keeps sending a byte now and then (each within the idle bound) is dropped at the total
    deadline: 408, then the connection closes, so it cannot hold its body's memory for as long as it trickles."""
    import socket

    from support.consumer_helpers import LiveServer

    app = create_app(store_url=store_url, anonymous=Access.ADMIN, upload_seconds=1.0)
    with LiveServer(app) as server, socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(
            b"POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n" + b" " * 1000
        )
        answer = b""
        deadline = time.monotonic() + 20
        while not answer and time.monotonic() < deadline:
            time.sleep(0.2)  # a real pause: the upload trickles
            try:
                raw.sendall(b" ")  # a byte every 0.2 s: never idle for long
                raw.settimeout(0.01)
                answer = raw.recv(65536)
            except (TimeoutError, BlockingIOError):
                continue
            except OSError:
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"connection: close" in answer.lower()
        assert b"did not arrive within 1 s (upload_seconds)" in answer
        raw.settimeout(10)
        rest = b""
        try:
            while chunk := raw.recv(65536):
                rest += chunk
        except OSError:  # reset by the server: closed too
            pass
        assert b"HTTP/1.1" not in rest  # closed: no other answer follows


def test_a_client_that_disconnects_mid_upload_leaves_one_log_line(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import socket

    from support.consumer_helpers import LiveServer

    caplog.set_level(logging.INFO)
    with LiveServer(create_app(store_url=store_url, anonymous=Access.ADMIN)) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as raw:
            raw.sendall(
                b"POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100000\r\n\r\n" + b"[" * 100
            )
        wait_until(lambda: "disconnected while sending" in caplog.text, "the disconnect was never logged")
    assert "a client disconnected while sending POST /api/v1/lineage; nothing was stored" in caplog.text
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_airflow_option_for_the_clock_skew_is_read_as_hours(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_lineage_provider import conf

    assert conf.consumer_max_clock_skew_hours() == 24.0
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_MAX_CLOCK_SKEW_HOURS", " 1.5 ")
    assert conf.consumer_max_clock_skew_hours() == 1.5
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_MAX_CLOCK_SKEW_HOURS", "a day")
    with pytest.raises(ValueError, match=r"consumer_max_clock_skew_hours must be a number of hours, got 'a day'"):
        conf.consumer_max_clock_skew_hours()


@pytest.mark.parametrize(
    ("facets", "where"),
    [
        ({"schema": {"fields": [{"name": "a\x00b", "type": "INT"}]}}, "outputs[0].facets.schema.fields[0].name"),
        (
            {"schema": {"fields": [{"name": "s", "fields": [{"name": "x" * 5000}]}]}},
            "outputs[0].facets.schema.fields[0].fields[0].name",
        ),
        ({"columnLineage": {"fields": {"t\x00": {"inputFields": []}}}}, "outputs[0].facets.columnLineage.fields"),
        (
            {"columnLineage": {"fields": {"t": {"inputFields": [{"namespace": "n", "name": "s", "field": "f\x00"}]}}}},
            "outputs[0].facets.columnLineage.fields['t'].inputFields[0].field",
        ),
    ],
)
def test_field_names_no_store_can_keep_are_refused(client: TestClient, facets: dict[str, Any], where: str) -> None:
    event = run_event("COMPLETE", "fields")
    event["outputs"] = [{"namespace": "warehouse", "name": "t", "facets": facets}]
    answer = client.post("/api/v1/lineage", json=event)
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"].startswith(where)
    assert client.get("/api/v1/events").json()["totalCount"] == 0


def test_an_event_time_with_a_nul_is_refused(client: TestClient) -> None:
    event = run_event("START", "nul_time")
    event["eventTime"] += "\x00"
    answer = client.post("/api/v1/lineage", json=event)
    assert answer.status_code == 400
    assert answer.json()["detail"].startswith("eventTime must be an ISO 8601 date-time")


def test_retention_statistics_write_year_one_as_iso_8601(client: TestClient) -> None:
    event = run_event("START", "ancient")
    event["eventTime"] = "0001-01-01T00:00:00Z"
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    statistics = client.get("/api/v1/retention").json()["statistics"]
    assert statistics["oldestEventTime"] == "0001-01-01T00:00:00.000000Z"
    assert datetime.fromisoformat(statistics["oldestEventTime"].replace("Z", "+00:00")).year == 1
