"""Raw events packed with a payload dictionary (schema version 18), on SQLite and PostgreSQL.

Every answer of every GET route is the same before and after a store's events are packed, for an unlimited and
a namespace-limited key; a store draws its dictionary once it holds enough events and packs what it stores from
then on; events logged and applied later, events stored before version 18, and a missing dictionary are read as
they must be; the Python rule for the namespaces an event names is the one the databases apply to its text.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import dataset, run_event
from support.environment import require_shared
from support.olschema import SHARED
from support.waiting import wait_until
from test_consumer_deferred_apply import _events as deferred_events
from test_consumer_deferred_apply import _graph
from test_consumer_every_route_visibility import (
    ADMIN,
    KEYS,
    LIMITED,
    _calls,
)
from test_consumer_every_route_visibility import _events as crossing_events
from test_consumer_store import back_to_version

from airflow_lineage_provider.cli import main as cli_main
from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.read import visibility
from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate
from airflow_lineage_provider.consumer.store.write.ingest import log_events
from airflow_lineage_provider.consumer.validation import canonical_json, named_namespaces, namespaces_in, parse_event

pytest_plugins = ("support.consumer_fixtures",)


def _stored(engine: sa.Engine) -> list[sa.Row[Any]]:
    e = tables.events.c
    with engine.connect() as conn:
        return list(conn.execute(sa.select(e.id, e.payload, e.packed, e.dictionary_id, e.size, e.namespaces)))


def _answers(client: TestClient, calls: list[str]) -> dict[tuple[str, str], tuple[int, str]]:
    return {
        (who, call): (answer.status_code, answer.text)
        for who, headers in (("admin", ADMIN), ("limited", LIMITED))
        for call in calls
        for answer in [client.get(call, headers=headers)]
    }


@pytest.fixture
def consumer(store_url: str) -> Iterator[TestClient]:
    """A consumer whose store holds the crossing lineage of the visibility test (an open and a hidden namespace)."""
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        answer = client.post("/api/v1/lineage/batch", json=crossing_events(), headers=ADMIN)
        assert answer.status_code in (200, 201), answer.text
        yield client
    app.state.store.dispose()


def test_every_get_route_answers_the_same_once_the_events_are_packed(consumer: TestClient, store_url: str) -> None:
    """The events are stored as text (the store is too small to have drawn a dictionary); every GET route's
    answer, to the operator and to a key limited to one namespace, is recorded; ``airflow-lineage pack-events``
    packs them; every answer is the same again."""
    engine = create_store_engine(store_url)
    try:
        assert all(row.packed is None for row in _stored(engine))
        calls = _calls(consumer)
        assert any(call.startswith("/api/v1/events") for call in calls)
        before = _answers(consumer, calls)
        assert cli_main(["pack-events", "--store", store_url]) == 0
        stored = _stored(engine)
        assert stored and all(row.packed is not None and row.payload == "" for row in stored)
        assert all(row.size > len(row.packed) for row in stored)
        after = _answers(consumer, calls)
        changed = [key for key in before if before[key] != after[key]]
        assert not changed, f"{len(changed)} answers changed once packed, e.g. {changed[:3]}"
        assert cli_main(["pack-events", "--store", store_url]) == 0  # again: nothing waits, nothing changes
        assert _stored(engine) == stored
    finally:
        engine.dispose()


def _small_events(count: int, prefix: str, start: float = 0) -> list[dict[str, Any]]:
    return [
        run_event("COMPLETE", f"{prefix}_{n % 40}", inputs=[dataset(f"{prefix}_src_{n % 7}")], time=start + n)
        for n in range(count)
    ]


def test_a_store_draws_its_dictionary_once_it_holds_enough_events_and_packs_what_it_stores_after(
    store_url: str,
) -> None:
    app = create_app(store_url=store_url, keys=KEYS)
    try:
        with TestClient(app) as client:
            first = _small_events(payloads.TRAIN_AFTER, "early")
            assert client.post("/api/v1/lineage/batch", json=first, headers=ADMIN).status_code in (200, 201)
            store: LineageStore = app.state.store
            with store.read() as conn:
                assert payloads.current_dictionary(conn) is None  # drawn by the first ingest into a store this size
            later = _small_events(60, "later", start=payloads.TRAIN_AFTER)  # the newest: listed first
            assert client.post("/api/v1/lineage/batch", json=later, headers=ADMIN).status_code in (200, 201)
            with store.read() as conn:
                drawn = payloads.current_dictionary(conn)
            assert drawn is not None and 0 < len(drawn.body) <= payloads.DICTIONARY_BYTES
            rows = _stored(store.engine)
            packed = [row for row in rows if row.packed is not None]
            assert len(packed) == len(later) and {row.dictionary_id for row in packed} == {drawn.id}
            text, held = sum(row.size for row in packed), sum(len(row.packed) for row in packed)
            assert held < text / 4, f"packed {text} bytes of text into {held}"
            listed = client.get("/api/v1/events?limit=100", headers=ADMIN).json()["events"]
            posted = {canonical_json(event) for event in later}
            assert posted <= {canonical_json(event) for event in listed}
    finally:
        app.state.store.dispose()


def test_events_logged_packed_are_read_back_by_the_applier(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deferred apply reads the events another writer logged from the store: packed ones are unpacked."""
    monkeypatch.setattr(payloads, "TRAIN_AFTER", 1)
    store = LineageStore(store_url, ingest_apply="deferred")
    try:
        with store.write() as conn:
            log_events(conn, deferred_events(["first"]))
        with store.write() as conn:
            log_events(conn, deferred_events(["second", "third"]))
        assert sum(row.packed is not None for row in _stored(store.engine)) == 2
        assert store.deferred is not None
        store.deferred.wake()
        wait_until(lambda: _graph(store)[0] == {"first", "second", "third"}, "the logged events to be applied")
    finally:
        store.dispose()


def test_events_stored_before_version_18_are_read_and_then_packed(store_url: str) -> None:
    """A store from before version 18 holds its events as text without size or namespaces: after the upgrade a
    limited key's listing still leaves out those that name a hidden namespace, and packing them keeps it so."""
    app = create_app(store_url=store_url, keys=KEYS)
    try:
        with TestClient(app) as client:
            assert client.post("/api/v1/lineage/batch", json=crossing_events(), headers=ADMIN).status_code in (200, 201)
            store: LineageStore = app.state.store
            with store.engine.begin() as conn:
                back_to_version(conn, 17)
            assert migrate(store.engine) == LATEST == 18
            assert all(row.namespaces is None and row.size is None for row in _stored(store.engine))
            before = {key: client.get(f"/api/v1/events?limit=50{key}", headers=LIMITED).text for key in ("", "&asc")}
            assert "hiddenns" not in before[""] and '"open"' in before[""]
            result = store.pack_events()
            assert result.events == len(crossing_events()) and result.packed_bytes < result.text_bytes
            assert all(row.namespaces is not None for row in _stored(store.engine))
            after = {key: client.get(f"/api/v1/events?limit=50{key}", headers=LIMITED).text for key in ("", "&asc")}
            assert after == before
    finally:
        app.state.store.dispose()


def test_a_redrawn_dictionary_repacks_every_event_and_the_events_read_the_same(store_url: str) -> None:
    """``pack-events --redraw``: a new dictionary from the latest events (others than the first was drawn from)
    becomes the store's, every event is packed with it, and the listing answers the same events."""
    app = create_app(store_url=store_url, keys=KEYS)
    try:
        with TestClient(app) as client:
            store: LineageStore = app.state.store
            first = _small_events(30, "first")
            assert client.post("/api/v1/lineage/batch", json=first, headers=ADMIN).status_code in (200, 201)
            drawn = store.pack_events()
            later = _small_events(30, "other_shape", start=100)
            assert client.post("/api/v1/lineage/batch", json=later, headers=ADMIN).status_code in (200, 201)
            listed = client.get("/api/v1/events?limit=100", headers=ADMIN).text
            assert cli_main(["pack-events", "--store", store_url, "--redraw"]) == 0
            with store.read() as conn:
                redrawn = payloads.current_dictionary(conn)
            assert redrawn is not None and redrawn.id not in (None, drawn.dictionary_id)
            assert {row.dictionary_id for row in _stored(store.engine)} == {redrawn.id}
            assert client.get("/api/v1/events?limit=100", headers=ADMIN).text == listed
            assert store.pack_events().events == 0  # nothing left to pack
    finally:
        app.state.store.dispose()


def test_an_event_packed_with_a_dictionary_the_store_lost_fails_naming_it(store_url: str) -> None:
    store = LineageStore(store_url, ingest_apply="inline")
    try:
        with store.write() as conn:
            log_events(conn, deferred_events(["kept"]))
        result = store.pack_events()
        assert result.dictionary_id is not None
        with store.engine.begin() as conn:
            conn.execute(sa.delete(tables.payload_dictionaries))
        payloads._known.pop(result.dictionary_id)  # as a process that never read it
        with store.read() as conn, pytest.raises(payloads.PayloadError, match=str(result.dictionary_id)):
            row = conn.execute(sa.select(*payloads.payload_columns())).one()
            payloads.text_of(conn, *row)
    finally:
        store.dispose()


def _corpus_events() -> list[dict[str, Any]]:
    require_shared()
    root = SHARED / "corpus"
    found = []
    for path in sorted(root.glob("**/*.json")):
        loaded = json.loads(path.read_text())
        found += [event for event in (loaded if isinstance(loaded, list) else [loaded]) if isinstance(event, dict)]
    assert len(found) > 50, f"only {len(found)} events in {root}"
    return found


def _named_by_the_database(conn: sa.Connection, text: str) -> set[str]:
    """The namespaces the database finds in an event's text, as the visibility rule reads it before version 18:
    each visible namespace set minus one of them must show the event hidden, and the full set must not."""
    e = tables.events.c
    conn.execute(sa.delete(tables.events))
    conn.execute(
        sa.insert(tables.events).values(
            event_key=uuid.uuid4().hex, kind="run", event_time=sa.func.now(), received_at=sa.func.now(), payload=text
        )
    )
    candidates = named_namespaces(json.loads(text)) | {"not-named-anywhere"}

    def hidden(visible: set[str]) -> bool:
        rule = visibility.names_hidden_namespace(e.payload, sorted(visible) or [""], conn.dialect.name)
        return bool(conn.execute(sa.select(sa.exists(sa.select(e.id).where(rule)))).scalar())

    return {name for name in candidates if hidden(candidates - {name})} if not hidden(candidates) else {"(more)"}


def test_the_namespaces_an_event_names_are_those_the_database_reads_in_its_text(store_url: str) -> None:
    """On the corpus of other producers' events: the namespaces kept with a packed event (Python) are exactly
    those the database finds in the event's text (what a limited key's reads used before version 18)."""
    events = _corpus_events()
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.connect() as conn:
            for event in events:
                text = canonical_json(event)
                named = named_namespaces(json.loads(text))
                with conn.begin():
                    assert _named_by_the_database(conn, text) == set(named), text[:200]
    finally:
        engine.dispose()


TRICKY_VALUES = [
    'a"b',
    "back\\slash\\",
    '\\"namespace\\":\\"fake\\"',
    '"namespace":"fake"',
    "caf\u00e9 \u2603 \U0001f600",
    "nul\x00 and \n newline",
    "",
]


def test_the_namespaces_read_from_an_events_text_are_those_of_its_json() -> None:
    """What ingest reads from the canonical text with a pattern is what walking the decoded event finds: on the
    corpus, and on names and other strings that look like a namespace member or hold escapes."""
    require_shared()
    events = _corpus_events()
    for value in TRICKY_VALUES:
        event = run_event("COMPLETE", value or "job", namespace=value or "ns", inputs=[dataset("in", namespace=value)])
        event["run"]["facets"]["note"] = {"text": f'"namespace":"{value}"', "list": [{"namespace": value}]}
        events.append(event)
    for event in events:
        assert namespaces_in(canonical_json(event)) == named_namespaces(event), canonical_json(event)[:300]


def test_named_namespaces_reads_every_depth_and_only_strings() -> None:
    event = {
        "job": {"namespace": "a", "name": "j"},
        "inputs": [{"namespace": "b", "facets": {"x": {"fields": [{"namespace": "c"}, {"namespace": 3}]}}}],
        "run": {"facets": {"parent": {"job": {"namespace": "d"}, "list": [[{"namespace": "e"}]]}}},
        "namespace": None,
    }
    assert named_namespaces(event) == {"a", "b", "c", "d", "e"}
    assert parse_event(run_event("START", "x", namespace="ns1")).namespaces == {"ns1"}
    deep: Any = {"namespace": "deep"}
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = {"n": [deep]}
    assert named_namespaces(deep) == {"deep"}


def test_a_dictionary_packs_and_unpacks_any_text_and_is_named_by_its_body() -> None:
    body = ("".join(canonical_json(run_event("COMPLETE", f"job_{n}")) for n in range(20))).encode()[-4096:]
    dictionary = payloads.Dictionary(body)
    for text in ("", "{}", canonical_json(run_event("START", "job_3")), "\\u00e9" * 10_000):
        assert dictionary.unpack(dictionary.pack(text)) == text
    assert payloads.Dictionary(body).id == dictionary.id != payloads.Dictionary(body + b" ").id
    with pytest.raises(ValueError, match="empty"):
        payloads.Dictionary(b"")


def test_the_revision_adds_what_a_new_store_has(store_url: str, tmp_path: Path) -> None:
    """A store upgraded from version 17 has the columns and table a new store is created with."""
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            back_to_version(conn, 17)
        migrate(engine)
        inspector = sa.inspect(engine)
        columns = {c["name"]: c["nullable"] for c in inspector.get_columns("lineage_events")}
        assert {name: columns[name] for name in ("packed", "dictionary_id", "size", "namespaces")} == dict.fromkeys(
            ("packed", "dictionary_id", "size", "namespaces"), True
        )
        dictionaries = {c["name"] for c in inspector.get_columns("lineage_payload_dictionaries")}
        assert dictionaries == {"id", "created_at", "body"}
        assert inspector.get_pk_constraint("lineage_payload_dictionaries")["constrained_columns"] == ["id"]
    finally:
        engine.dispose()
