"""Ingest API: status codes, validation messages, auth, body limits, strict mode, store failures."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event
from support.environment import require_shared
from support.olschema import SPEC

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.store.schema import tables

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'lineage.db'}"


def test_one_event_is_created(client: TestClient) -> None:
    response = client.post("/api/v1/lineage", json=run_event("START", "load"))
    assert response.status_code == 201
    assert response.json() == {"status": "stored"}


def test_the_same_event_twice_is_a_duplicate(client: TestClient) -> None:
    event = run_event("COMPLETE", "load", outputs=[dataset("orders", fields=["id"])])
    assert client.post("/api/v1/lineage", json=event).json() == {"status": "stored"}
    second = client.post("/api/v1/lineage", json=event)
    assert second.status_code == 201
    assert second.json() == {"status": "duplicate"}
    assert client.get("/api/v1/events").json()["totalCount"] == 1


def test_a_full_batch_answers_200_with_a_summary(client: TestClient) -> None:
    events = [run_event("START", f"job_{i}") for i in range(5)]
    response = client.post("/api/v1/lineage/batch", json=events)
    assert response.status_code == 200
    assert response.json() == {
        "status": "success",
        "summary": {"received": 5, "successful": 5, "failed": 0},
        "received": 5,
        "successful": 5,
        "failed": 0,
        "duplicates": 0,
        "errors": [],
    }


def test_an_array_posted_to_the_single_endpoint_is_a_batch(client: TestClient) -> None:
    response = client.post("/api/v1/lineage", json=[run_event("START", "a"), run_event("START", "b")])
    assert response.status_code == 200
    assert response.json()["successful"] == 2


def test_a_partly_bad_batch_answers_207_naming_each_bad_event(client: TestClient) -> None:
    good = run_event("START", "good")
    bad = {**run_event("START", "bad"), "run": {"runId": "not-a-uuid"}}
    response = client.post("/api/v1/lineage/batch", json=[good, bad, good])
    assert response.status_code == 207
    body = response.json()
    assert (body["received"], body["successful"], body["failed"], body["duplicates"]) == (3, 2, 1, 1)
    assert body["errors"] == [{"index": 1, "error": body["errors"][0]["error"]}]
    assert "run.runId" in body["errors"][0]["error"] and "not-a-uuid" in body["errors"][0]["error"]
    assert [(r["index"], r["status"]) for r in body["results"]] == [(0, 201), (1, 400), (2, 201)]
    assert body["status"] == "partial_success"  # Feast's consumer's status and counts, beside the summary
    assert body["summary"] == {"received": 3, "successful": 2, "failed": 1}


def test_a_batch_of_only_bad_events_answers_400(client: TestClient) -> None:
    response = client.post("/api/v1/lineage/batch", json=[{"eventTime": "x"}, 3])
    assert response.status_code == 400
    assert response.json()["failed"] == 2


def test_the_batch_endpoint_wants_an_array(client: TestClient) -> None:
    response = client.post("/api/v1/lineage/batch", json=run_event("START", "a"))
    assert response.status_code == 400
    assert "array" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"42", "got a number"),
        (b'"event"', "got a string"),
        (b"null", "got null"),
        (b"[" * 100_000, "not valid JSON"),
    ],
)
def test_unreadable_bodies_answer_400(client: TestClient, body: bytes, expected: str) -> None:
    response = client.post("/api/v1/lineage", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert expected in response.json()["detail"]


def _mutate(path: str, value: object) -> dict:
    event = run_event("START", "load", inputs=[dataset("raw")])
    target = event
    *parents, last = path.split(".")
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return event


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("run.runId", KeyError, "run.runId"),
        ("run.runId", "1234", "run.runId"),
        ("run.runId", 7, "run.runId"),
        ("job.namespace", KeyError, "job.namespace"),
        ("job.name", "", "job.name"),
        ("job", "load", "job"),
        ("eventType", "FINISHED", "eventType"),
        ("eventTime", KeyError, "eventTime"),
        ("eventTime", "yesterday", "eventTime"),
        ("inputs", {"name": "x"}, "inputs"),
        ("inputs.0.name", None, "inputs[0].name"),
        ("inputs.0.facets", [], "inputs[0].facets"),
        ("run", [], "run"),
        ("producer", 5, "producer"),
        ("job.name", "a\x00b", "job.name"),
        ("eventTime", "2026-01-01T00:00:00Z", None),
    ],
)
def test_events_that_cannot_be_lineage_answer_400_naming_the_field(
    client: TestClient, path: str, value: object, named: str | None
) -> None:
    response = client.post("/api/v1/lineage", json=_mutate(path, value))
    if named is None:
        assert response.status_code == 201
        return
    assert response.status_code == 400, response.text
    assert named in response.json()["detail"]


def test_what_real_producers_send_is_accepted(client: TestClient) -> None:
    event = run_event("COMPLETE", "load", outputs=[dataset("orders")])
    del event["schemaURL"]
    event["eventTime"] = "2026-03-01T12:00:00.123456789"  # no zone, nanoseconds
    event["run"]["facets"] = {"acme_custom": {"anything": [1, 2, 3]}}
    event["outputs"][0]["facets"] = {"acme_quality": {"score": 0.99}}
    response = client.post("/api/v1/lineage", json=event)
    assert response.status_code == 201, response.text
    stored = client.get("/api/v1/events").json()["events"][0]
    assert stored["run"]["facets"]["acme_custom"] == {"anything": [1, 2, 3]}
    run = client.get(f"/api/v1/runs/{event['run']['runId']}").json()
    assert run["endedAt"] == "2026-03-01T12:00:00.123456Z"  # read as UTC
    datasets = client.get("/api/v1/datasets").json()["datasets"]
    assert datasets[0]["facets"]["acme_quality"] == {"score": 0.99}


def test_a_missing_event_type_is_read_as_other(client: TestClient) -> None:
    event = run_event("START", "load")
    del event["eventType"]
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    assert client.get(f"/api/v1/runs/{event['run']['runId']}").json()["state"] == "NEW"


def test_writes_need_the_api_key_when_one_is_configured(sqlite_url: str) -> None:
    with TestClient(create_app(store_url=sqlite_url, api_key="s3cret-key")) as client:
        event = run_event("START", "load")
        assert client.post("/api/v1/lineage", json=event).status_code == 401
        wrong = client.post("/api/v1/lineage", json=event, headers={"X-API-Key": "guess"})
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == "Bearer"
        assert client.post("/api/v1/lineage/batch", json=[event]).status_code == 401
        assert client.post("/api/v1/retention?days=1").status_code == 401
        assert client.post("/api/v1/lineage", json=event, headers={"X-API-Key": "s3cret-key"}).status_code == 201
        bearer = client.post("/api/v1/lineage", json=event, headers={"Authorization": "Bearer s3cret-key"})
        assert bearer.status_code == 201
        assert client.get("/api/v1/events").status_code == 401  # reads need a credential too
        assert client.get("/api/v1/events", headers={"X-API-Key": "s3cret-key"}).status_code == 200
        # the write key may not prune: that is admin scope
        assert client.post("/api/v1/retention?days=1", headers={"X-API-Key": "s3cret-key"}).status_code == 403


def test_bodies_over_the_limit_answer_413(sqlite_url: str) -> None:
    with TestClient(create_app(store_url=sqlite_url, max_body_bytes=4096, anonymous=Access.ADMIN)) as client:
        events = [run_event("START", f"job_{i}") for i in range(40)]
        response = client.post("/api/v1/lineage/batch", json=events)
        assert response.status_code == 413
        assert "4096 bytes" in response.json()["detail"]

        def chunks():  # no Content-Length: the limit is enforced while reading
            for _ in range(10):
                yield b" " * 1000

        streamed = client.post("/api/v1/lineage", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413
        bomb = gzip.compress(b" " * 1_000_000 + b"{}")
        inflated = client.post("/api/v1/lineage", content=bomb, headers={"content-encoding": "gzip"})
        assert inflated.status_code == 413


def test_gzip_bodies_are_accepted_and_broken_ones_answer_400(client: TestClient) -> None:
    events = [run_event("START", "a"), run_event("START", "b")]
    body = gzip.compress(json.dumps(events).encode())
    response = client.post(
        "/api/v1/lineage/batch", content=body, headers={"content-encoding": "gzip", "content-type": "application/json"}
    )
    assert response.status_code == 200
    assert response.json()["successful"] == 2
    broken = client.post("/api/v1/lineage", content=b"\x1f\x8bnope", headers={"content-encoding": "gzip"})
    assert broken.status_code == 400
    unknown = client.post("/api/v1/lineage", content=b"{}", headers={"content-encoding": "br"})
    assert unknown.status_code == 415


def test_strict_mode_needs_the_spec_folder(sqlite_url: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="spec_dir"):
        create_app(store_url=sqlite_url, strict=True)
    with pytest.raises(ValueError, match=r"OpenLineage\.json"):
        create_app(store_url=sqlite_url, strict=True, spec_dir=str(tmp_path), anonymous=Access.ADMIN)


def test_strict_mode_rejects_what_the_spec_schema_rejects(sqlite_url: str) -> None:
    require_shared()
    app = create_app(store_url=sqlite_url, strict=True, spec_dir=str(SPEC / "openlineage"), anonymous=Access.ADMIN)
    with TestClient(app) as client:
        assert client.post("/api/v1/lineage", json=run_event("START", "load")).status_code == 201
        no_schema_url = run_event("START", "load")
        del no_schema_url["schemaURL"]
        response = client.post("/api/v1/lineage", json=no_schema_url)
        assert response.status_code == 400
        assert "schemaURL" in response.json()["detail"]
        no_zone = {**run_event("START", "load"), "eventTime": "2026-03-01T12:00:00"}
        assert "date-time" in client.post("/api/v1/lineage", json=no_zone).json()["detail"]
        bad_facet = run_event("COMPLETE", "load", outputs=[dataset("orders", fields=["id"])])
        bad_facet["outputs"][0]["facets"]["schema"]["fields"] = "id"
        assert "schema" in client.post("/api/v1/lineage", json=bad_facet).json()["detail"]


def test_an_unreachable_store_answers_503_not_a_traceback() -> None:
    closed_port = "postgresql+psycopg2://postgres@127.0.0.1:9/nowhere?connect_timeout=2"
    with TestClient(create_app(store_url=closed_port, anonymous=Access.ADMIN)) as client:
        response = client.post("/api/v1/lineage", json=run_event("START", "load"))
        assert response.status_code == 503
        assert response.headers["retry-after"] == "30"
        assert "unavailable" in response.json()["detail"]
        assert client.get("/api/v1/namespaces").status_code == 503


def test_a_value_the_database_refuses_fails_only_that_event(sqlite_url: str) -> None:
    # Inline apply answers a refusal per event; deferred apply answers 201 and sets it aside (its own tests).
    app = create_app(store_url=sqlite_url, anonymous=Access.ADMIN, ingest_apply="inline")
    with app.state.store.write() as conn:  # a real refusal: a trigger the database enforces
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON lineage_nodes WHEN NEW.name = 'refused' "
            "BEGIN SELECT RAISE(ABORT, 'names like this are refused here'); END"
        )
    with TestClient(app) as client:
        good, refused = run_event("START", "good"), run_event("START", "refused")
        response = client.post("/api/v1/lineage/batch", json=[good, refused, run_event("START", "also_good")])
        assert response.status_code == 207
        assert response.json()["errors"] == [
            {"index": 1, "error": "the lineage store refused this event: names like this are refused here"}
        ]
        assert client.get("/api/v1/events").json()["totalCount"] == 2
        single = client.post("/api/v1/lineage", json=refused)
        assert single.status_code == 400
        assert "refused" in single.json()["detail"]


def test_over_long_names_are_refused_before_the_store(client: TestClient) -> None:
    response = client.post("/api/v1/lineage/batch", json=[run_event("START", "ok"), run_event("START", "x" * 5000)])
    assert response.status_code == 207
    assert "at most 4096" in response.json()["errors"][0]["error"]


def _random_name(size: int, seed: int = 18) -> str:
    """``size`` random letters: text PostgreSQL cannot compress to fit an index entry."""
    import random
    import string

    return "".join(random.Random(seed).choices(string.ascii_letters, k=size))


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_namespace_and_name_too_long_together_to_index_are_refused_before_the_store(
    store: str, request: pytest.FixtureRequest
) -> None:
    """Each within 4,096 characters, but 2,601 bytes together: more than PostgreSQL can index (the store keeps
    them in one index), so the event is refused by validation with what to do, on every store alike — with
    deferred apply too, which could otherwise only set it aside after answering 201. 2,600 bytes of random text
    (incompressible) are stored on PostgreSQL: the limit is one the database keeps."""
    url = request.getfixturevalue("sqlite_url" if store == "sqlite" else "pg_store_url")
    namespace = "s3://bucket"
    fits = run_event("COMPLETE", "load", outputs=[dataset(_random_name(2600 - len(namespace)), namespace)])
    too_long = run_event("COMPLETE", "load", outputs=[dataset(_random_name(2601 - len(namespace)), namespace)])
    wide = "é" * 1000  # 2,000 bytes in 1,000 characters: bytes are what count
    multibyte = run_event("START", "wide", inputs=[dataset(wide + "x" * 601, namespace)])
    columns = {"id": [(namespace, "y" * 2600, "id")]}  # a column lineage source dataset becomes a node too
    column_source = run_event("COMPLETE", "cols", outputs=[dataset("ok", namespace, columns=columns)])
    app = create_app(store_url=url, anonymous=Access.ADMIN, ingest_apply="deferred")
    try:
        with TestClient(app) as client:
            response = client.post("/api/v1/lineage/batch", json=[fits, too_long, multibyte, column_source])
            assert response.status_code == 207, response.text
            errors = {error["index"]: error["error"] for error in response.json()["errors"]}
            assert sorted(errors) == [1, 2, 3]
            assert "outputs[0]: its namespace and name are 2601 bytes long together" in errors[1]
            assert "at most 2600" in errors[1] and "shorten the name" in errors[1]
            assert "inputs[0]: its namespace and name are 2612 bytes" in errors[2]
            assert "outputs[0].facets.columnLineage.fields['id'].inputFields[0]" in errors[3]
            single = client.post("/api/v1/lineage", json=too_long)
            assert single.status_code == 400 and "shorten the name" in single.json()["detail"]
            assert client.get("/api/v1/events").json()["totalCount"] == 1
            assert client.get("/api/v1/retention").json()["statistics"]["unappliedEvents"] == 0
    finally:
        app.state.store.dispose()


@pytest.mark.postgres
def test_a_value_past_a_postgresql_limit_fails_only_its_event_with_what_to_do(pg_store_url: str) -> None:
    """Should an event still reach a limit of PostgreSQL's (class 54, "program limit exceeded": here a name past
    the B-tree limit, put into an event after validation, as a store with smaller pages would meet one), the
    database raises ProgramLimitExceeded, an OperationalError, which is the event's fault — an error for that
    event with what to do, never 503 "unavailable" (a producer would retry it for ever)."""
    from dataclasses import replace

    from airflow_lineage_provider.consumer.ingest.service import store_events
    from airflow_lineage_provider.consumer.store import LineageStore
    from airflow_lineage_provider.consumer.validation import parse_event

    parsed = parse_event(run_event("COMPLETE", "load", outputs=[dataset("short")]))
    output = replace(parsed.outputs[0], name=_random_name(4000))
    too_long = replace(parsed, outputs=(output,), key="0" * 64)
    store = LineageStore(pg_store_url, ingest_apply="inline")
    try:
        result, errors = store_events(store, [parse_event(run_event("START", "ok")), too_long])
        assert result.stored == 1
        assert list(errors) == [1]
        assert "index row size" in errors[1] and "shorten it" in errors[1]
    finally:
        store.dispose()


def test_an_event_stored_before_the_name_limit_stays_readable_to_the_applier_and_to_resets(tmp_path: Path) -> None:
    """A SQLite store may hold events accepted before the 2,600-byte limit on a namespace and name (SQLite keeps
    any). Reading them back is not validating them again: the deferred applier applies such an event rather than
    setting it aside, and a reset of another namespace that its payload mentions (a symlink) leaves it in place —
    an event that no longer parsed would have been taken for one naming that namespace and removed."""
    from airflow_lineage_provider.consumer.store import LineageStore
    from airflow_lineage_provider.consumer.store.operations.reset import reset_namespace
    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events, log_events
    from airflow_lineage_provider.consumer.validation import parse_event

    long_name = "t" * 3000
    event = run_event("COMPLETE", "old", outputs=[dataset(long_name)])
    event["outputs"][0]["facets"]["symlinks"] = {
        "_producer": "https://example.com/old-release",
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json",
        "identifiers": [{"namespace": "lake", "name": "t", "type": "TABLE"}],
    }
    with pytest.raises(ValueError, match="shorten the name"):
        parse_event(event)
    old = parse_event(event, stored=True)  # as an earlier release stored it
    store = LineageStore(f"sqlite:///{tmp_path / 'lineage.db'}", ingest_apply="deferred")
    try:
        with store.write(applied=False) as conn:
            log_events(conn, [old])
        with store.read() as conn:  # the barrier: the applier has applied (or set aside) what was logged
            names = conn.execute(sa.select(tables.nodes.c.name).where(tables.nodes.c.kind == "dataset")).scalars()
            assert long_name in set(names)
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.unapplied_events)).scalar() == 0
        with store.write() as conn:
            ingest_events(conn, [parse_event(run_event("START", "lake-job", outputs=[dataset("t", "lake")]))])
        with store.write() as conn:
            counts = reset_namespace(conn, "lake")
        assert counts.events == 1  # the lake job's event, not the old one that only mentions lake
        with store.read() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.events)).scalar() == 1
    finally:
        store.dispose()
