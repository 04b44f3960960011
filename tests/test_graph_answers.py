"""Whole graph answers kept by the store's data version (``store/graph/answers.py``): a repeated walk of an
unchanged SQLite store is answered without reading the graph, and never stale — not after a write through the same
app, through another app on the same file, or by a plain SQLite connection; a scope or parameter of its own gets
its own answer. Off where no data version exists (PostgreSQL, deferred apply, cards off), where answers stay those
built from the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from support.consumer_helpers import dataset, graph_ids, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.routers.graph.graph_walks import lineage_graph
from airflow_lineage_provider.consumer.security.access import Access, NamespaceScope
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph.answers import GraphAnswers, answers_of

pytest_plugins = ("support.consumer_fixtures",)

ROOT = "dataset:warehouse:t2"


def _walk(client: TestClient, **params: Any) -> bytes:
    response = client.get("/api/v1/lineage", params={"nodeId": ROOT, "direction": "upstream", **params})
    assert response.status_code == 200, response.text
    return response.content


def _post(client: TestClient, payload: dict[str, Any]) -> None:
    assert client.post("/api/v1/lineage", json=payload).status_code == 201


def _chain(client: TestClient) -> None:
    """extract → t1 → clean → t2, in namespace warehouse (and one dataset in namespace other)."""
    _post(client, run_event("COMPLETE", "extract", inputs=[dataset("raw", "other")], outputs=[dataset("t1")]))
    _post(client, run_event("COMPLETE", "clean", time=1, inputs=[dataset("t1")], outputs=[dataset("t2")]))


def _statements(store: LineageStore) -> list[str]:
    """Starts recording the statements the store's engine runs; the list they are appended to."""
    ran: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        ran.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    return ran


@pytest.fixture
def sqlite_client(tmp_path: Path) -> Any:
    app = create_app(store_url=f"sqlite:///{tmp_path / 'lineage.db'}", anonymous=Access.ADMIN)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


def test_a_repeated_walk_of_an_unchanged_store_reads_nothing_and_answers_the_same_bytes(sqlite_client: Any) -> None:
    _chain(sqlite_client)
    first = _walk(sqlite_client)
    store = sqlite_client.app.state.store
    ran = _statements(store)
    assert _walk(sqlite_client) == first
    assert ran == []  # not one statement: the answer kept at this version
    assert len(answers_of(store) or ()) == 1


def test_a_write_through_the_same_app_shows_in_the_next_walk(sqlite_client: Any) -> None:
    _chain(sqlite_client)
    before = _walk(sqlite_client)
    assert _walk(sqlite_client) == before
    _post(sqlite_client, run_event("COMPLETE", "backfill", time=2, inputs=[dataset("seed")], outputs=[dataset("t1")]))
    after = _walk(sqlite_client)
    assert "job:pipelines:backfill" in graph_ids(json.loads(after))
    assert "job:pipelines:backfill" not in before.decode()


def test_a_write_through_another_app_on_the_same_file_shows_in_the_next_walk(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    reader, writer = (create_app(store_url=url, anonymous=Access.ADMIN) for _ in range(2))
    try:
        with TestClient(reader) as read, TestClient(writer) as write:
            _chain(write)
            before = _walk(read)
            assert _walk(read) == before
            _post(write, run_event("COMPLETE", "backfill", time=2, outputs=[dataset("t1")]))
            assert "job:pipelines:backfill" in _walk(read).decode()
    finally:
        reader.state.store.dispose()
        writer.state.store.dispose()


def test_a_commit_of_a_plain_sqlite_connection_is_seen(sqlite_client: Any, tmp_path: Path) -> None:
    _chain(sqlite_client)
    before = _walk(sqlite_client)
    assert _walk(sqlite_client) == before
    other = sqlite3.connect(tmp_path / "lineage.db")
    with other:  # a change outside the consumer: a dataset renamed, its version bumped as every writer does
        other.execute(
            "UPDATE lineage_nodes SET name = 'renamed', version = version + 1 WHERE kind = 'dataset' AND name = 'raw'"
        )
    other.close()
    after = _walk(sqlite_client)
    assert "dataset:other:renamed" in after.decode() and "dataset:other:raw" not in after.decode()


def test_an_answer_built_after_a_commit_it_did_not_wait_for_is_never_served(sqlite_client: Any) -> None:
    """The version is read before the read begins: an answer built at a later version than it is kept under
    is kept under a version no later read sees."""
    _chain(sqlite_client)
    store = sqlite_client.app.state.store
    kept = answers_of(store)
    assert kept is not None
    version = kept.version()
    _post(sqlite_client, run_event("COMPLETE", "backfill", time=2, outputs=[dataset("t1")]))  # lands in between
    assert kept.version() != version
    kept.keep(("stale",), version, b"old")
    assert kept.get(("stale",), kept.version()) is None


def test_each_scope_and_parameter_gets_its_own_answer(sqlite_client: Any) -> None:
    _chain(sqlite_client)
    store = sqlite_client.app.state.store
    everything = lineage_graph(store, ROOT, 3, "upstream", 100)
    limited = lineage_graph(store, ROOT, 3, "upstream", 100, NamespaceScope(("warehouse",)))
    assert "dataset:other:raw" in everything.decode() and "dataset:other:raw" not in limited.decode()
    assert lineage_graph(store, ROOT, 3, "upstream", 100) == everything
    shallow = lineage_graph(store, ROOT, 0, "upstream", 100)
    assert shallow != everything and "job:pipelines:clean" not in shallow.decode()
    assert len(answers_of(store) or ()) == 3


def test_a_missing_node_is_never_kept(sqlite_client: Any) -> None:
    missing = {"nodeId": "dataset:warehouse:later", "direction": "upstream"}
    assert sqlite_client.get("/api/v1/lineage", params=missing).status_code == 404
    _post(sqlite_client, run_event("COMPLETE", "make", outputs=[dataset("later")]))
    assert sqlite_client.get("/api/v1/lineage", params=missing).status_code == 200


def test_answers_are_bounded_by_bytes_least_recently_used_first() -> None:
    kept = GraphAnswers(lambda: 1, capacity=40)
    kept.keep("a", 1, b"x" * 10)
    kept.keep("b", 1, b"y" * 10)
    kept.keep("too big", 1, b"z" * 11)  # more than a quarter of the capacity: not kept
    assert kept.get("a", 1) == b"x" * 10  # a is now the most recently used
    kept.keep("c", 1, b"w" * 10)
    kept.keep("d", 1, b"v" * 10)
    kept.keep("e", 1, b"u" * 10)
    assert kept.get("b", 1) is None and kept.get("a", 1) is not None and kept.held_bytes == 40
    assert kept.get("a", 2) is None  # another version: not this answer
    assert kept.get("too big", 1) is None


def test_off_where_no_data_version_is_kept(store_url: str, tmp_path: Path) -> None:
    store = LineageStore(store_url)
    uncached = LineageStore(f"sqlite:///{tmp_path / 'other.db'}", graph_cache_nodes=0)
    deferred = LineageStore(f"sqlite:///{tmp_path / 'deferred.db'}", ingest_apply="deferred")
    memory = LineageStore("sqlite://")
    try:
        assert (answers_of(store) is None) == store_url.startswith("postgresql")
        assert answers_of(uncached) is None and answers_of(deferred) is None and answers_of(memory) is None
    finally:
        for each in (store, uncached, deferred, memory):
            each.dispose()


def test_repeated_walks_answer_what_the_store_holds_on_both_stores(client: TestClient) -> None:
    _chain(client)
    before = _walk(client)
    assert _walk(client) == before
    _post(client, run_event("COMPLETE", "backfill", time=2, outputs=[dataset("t1")]))
    assert "job:pipelines:backfill" in _walk(client).decode()


def test_a_version_that_cannot_be_read_keeps_nothing_and_still_answers(sqlite_client: Any) -> None:
    _chain(sqlite_client)
    store = sqlite_client.app.state.store
    kept = answers_of(store)
    assert kept is not None
    kept.version = lambda: None  # what SqliteDataVersion says when the file cannot be read
    first = _walk(sqlite_client)
    assert _walk(sqlite_client) == first and len(kept) == 0
