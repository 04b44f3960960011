"""Graph cards (the per-store cache of what a graph answer shows of each node) never serve stale data:
not after a late event that changes a run's state without moving any time, not when another process
wrote, and answers are the same with the cache off — on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy
from fastapi.testclient import TestClient
from sqlalchemy import select
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.store.graph import answers
from airflow_lineage_provider.consumer.store.graph.cards import GraphCard, GraphCards
from airflow_lineage_provider.consumer.store.schema import tables

pytest_plugins = ("support.consumer_fixtures",)

ROOT = "dataset:warehouse:orders_clean"


@pytest.fixture(autouse=True)
def _no_whole_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the cards: a repeated walk of an unchanged store must reach them, not the whole
    answers kept by data version (``tests/test_graph_answers.py``), which would answer it without them."""
    monkeypatch.setattr(answers, "answers_of", lambda store: None)


def _graph(client: TestClient, node_id: str = ROOT) -> dict[str, Any]:
    response = client.get("/api/v1/lineage", params={"nodeId": node_id, "depth": 3, "direction": "upstream"})
    assert response.status_code == 200, response.text
    return {node["id"]: node for node in response.json()["graph"]}


def _job(graph: dict[str, Any]) -> dict[str, Any]:
    return graph["job:pipelines:clean_orders"]["data"]


def _post(client: TestClient, event: dict[str, Any]) -> None:
    assert client.post("/api/v1/lineage", json=event).status_code == 201


def test_a_late_terminal_event_shows_in_the_next_graph_though_no_time_moved(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    io = {"inputs": [dataset("orders_raw")], "outputs": [dataset("orders_clean", fields=["id"])]}
    _post(client, run_event("START", "clean_orders", run_id, time=60, **io))
    before = _graph(client)
    assert _job(before)["latestRun"]["state"] == "RUNNING"
    cards = client.app.state.store.graph_cards
    assert len(cards) == 3  # the answer's nodes are cached now...
    assert _graph(client) == before
    assert cards.mostly_hits()  # ...and the next walk reads versions only, taking data from the cards

    # COMPLETE stamped before the START (a producer's clock behind): the job's times do not move, the
    # run's state does — and the cached card must not be served.
    _post(client, run_event("COMPLETE", "clean_orders", run_id, time=30, **io))
    after = _graph(client)
    assert _job(after)["latestRun"]["state"] == "COMPLETED"
    assert _job(after)["updatedAt"] == _job(before)["updatedAt"]


def test_a_new_schema_shows_in_the_next_graph(client: TestClient) -> None:
    _post(client, run_event("COMPLETE", "clean_orders", outputs=[dataset("orders_clean", fields=["id"])]))
    for _ in range(2):  # the second walk finds every card: the next one reads versions only
        assert [f["name"] for f in _graph(client)[ROOT]["data"]["fields"]] == ["id"]
    assert client.app.state.store.graph_cards.mostly_hits()
    _post(client, run_event("COMPLETE", "clean_orders", time=10, outputs=[dataset("orders_clean", fields=["id", "n"])]))
    assert [f["name"] for f in _graph(client)[ROOT]["data"]["fields"]] == ["id", "n"]


def test_a_write_through_another_app_on_the_same_store_is_seen(store_url: str) -> None:
    reader = create_app(store_url=store_url, anonymous=Access.ADMIN)
    writer = create_app(store_url=store_url, anonymous=Access.ADMIN)
    try:
        with TestClient(reader) as read, TestClient(writer) as write:
            run_id = str(uuid.uuid4())
            _post(write, run_event("START", "clean_orders", run_id, outputs=[dataset("orders_clean")]))
            for _ in range(2):
                assert _job(_graph(read))["latestRun"]["state"] == "RUNNING"
            assert reader.state.store.graph_cards.mostly_hits()
            _post(write, run_event("FAIL", "clean_orders", run_id, time=5, outputs=[dataset("orders_clean")]))
            assert _job(_graph(read))["latestRun"]["state"] == "FAILED"
    finally:
        reader.state.store.dispose()
        writer.state.store.dispose()


def test_answers_are_the_same_with_the_cache_off(store_url: str) -> None:
    cached, uncached = (
        create_app(store_url=store_url, anonymous=Access.ADMIN),
        create_app(store_url=store_url, graph_cache_nodes=0, anonymous=Access.ADMIN),
    )
    try:
        with TestClient(cached) as one, TestClient(uncached) as other:
            for index, job in enumerate(("extract", "clean_orders", "report")):
                inputs = [dataset(f"t{index}")] if index else []
                _post(one, run_event("COMPLETE", job, time=index, inputs=inputs, outputs=[dataset(f"t{index + 1}")]))
            for _ in range(3):  # cold, then from the cache
                assert one.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:t3"}).content == (
                    other.get("/api/v1/lineage", params={"nodeId": "dataset:warehouse:t3"}).content
                )
            assert len(uncached.state.store.graph_cards) == 0
    finally:
        cached.state.store.dispose()
        uncached.state.store.dispose()


def test_the_cache_is_bounded_and_keeps_the_newest_version() -> None:
    import msgspec

    cards = GraphCards(2)
    card = GraphCard("job:n:a", "JOB", msgspec.Raw(b"{}"))
    cards.store([(1, 5, card), (2, 1, card), (3, 1, card)], hits=0)
    assert not cards.mostly_hits()
    assert len(cards) == 2
    assert cards.lookup({1: 5, 2: 1, 3: 1}) == ({2: card, 3: card}, [1])  # 1 was the least recently used
    cards.store([(2, 7, card)], hits=3)
    assert cards.mostly_hits()
    cards.store([(2, 6, card)], hits=3)  # an older read never replaces a newer card
    assert cards.lookup({2: 7}) == ({2: card}, [])


def test_a_negative_cache_size_is_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="graph_cache_nodes must be 0 \\(no cache\\) or more, got -1"):
        create_app(store_url="sqlite:///unused.db", graph_cache_nodes=-1)


def _versions(client: TestClient) -> dict[str, int]:
    """Every node's version by graph id (``dataset:warehouse:orders_clean``)."""
    n = tables.nodes.c
    with client.app.state.store.read() as conn:
        rows = conn.execute(select(n.kind, n.namespace, n.name, n.version)).all()
    return {f"{kind}:{namespace}:{name}": version for kind, namespace, name, version in rows}


def _node_writes(client: TestClient) -> list[str]:
    """Starts recording the statements that write ``lineage_nodes``; the list they are appended to."""
    written: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        head = " ".join(statement.split())[:40].upper()
        if head.startswith(("INSERT INTO LINEAGE_NODES", "UPDATE LINEAGE_NODES")):
            written.append(head)

    sqlalchemy.event.listen(client.app.state.store.engine, "before_cursor_execute", record)
    return written


def test_an_event_posted_again_rewrites_no_node(client: TestClient) -> None:
    run_id = str(uuid.uuid4())
    io = {"inputs": [dataset("orders_raw")], "outputs": [dataset("orders_clean", fields=["id"])]}
    _post(client, run_event("START", "clean_orders", run_id, time=60, **io))
    complete = run_event("COMPLETE", "clean_orders", run_id, time=90, **io)
    _post(client, complete)
    before = _versions(client)
    written = _node_writes(client)

    _post(client, complete)  # stored already: nothing is applied
    assert written == []
    assert _versions(client) == before


def test_an_event_that_changes_no_dataset_rewrites_none(client: TestClient) -> None:
    """A RUNNING event of the same run between its START and COMPLETE, naming the same datasets without facets:
    new to the store (its run is written, so the job's version moves) but nothing a dataset shows changes."""
    run_id = str(uuid.uuid4())
    io = {"inputs": [dataset("orders_raw")], "outputs": [dataset("orders_clean", fields=["id"])]}
    _post(client, run_event("START", "clean_orders", run_id, time=60, **io))
    _post(client, run_event("COMPLETE", "clean_orders", run_id, time=90, **io))
    before = _graph(client)
    versions = _versions(client)
    written = _node_writes(client)

    plain = {"inputs": [dataset("orders_raw")], "outputs": [dataset("orders_clean")]}
    _post(client, run_event("RUNNING", "clean_orders", run_id, time=75, **plain))
    after = _versions(client)
    assert after["job:pipelines:clean_orders"] > versions["job:pipelines:clean_orders"]
    assert {node: after[node] for node in versions if node.startswith("dataset:")} == {
        node: version for node, version in versions.items() if node.startswith("dataset:")
    }
    assert not any(statement.startswith("UPDATE") for statement in written)  # no bump after the upsert
    assert _graph(client) == before

    # A later reader of orders_raw moves its updatedAt: that node, and only that dataset, is rewritten.
    _post(client, run_event("COMPLETE", "report", time=120, inputs=[dataset("orders_raw")]))
    later = _versions(client)
    assert later["dataset:warehouse:orders_raw"] > after["dataset:warehouse:orders_raw"]
    assert later["dataset:warehouse:orders_clean"] == after["dataset:warehouse:orders_clean"]
    assert (
        _graph(client, "dataset:warehouse:orders_raw")["dataset:warehouse:orders_raw"]["data"]["updatedAt"]
        != (before["dataset:warehouse:orders_raw"]["data"]["updatedAt"])
    )


def test_facets_on_a_dataset_not_otherwise_changed_bump_it(client: TestClient) -> None:
    """A schema sent by an event no later than the dataset's latest still bumps it when it is the newest schema
    (its card shows it), though the node's own row does not change."""
    _post(client, run_event("COMPLETE", "clean_orders", time=90, outputs=[dataset("orders_clean")]))
    _post(client, run_event("COMPLETE", "report", time=120, inputs=[dataset("orders_clean")]))
    versions = _versions(client)
    assert _graph(client)[ROOT]["data"]["fields"] == []
    _post(client, run_event("COMPLETE", "clean_orders", time=100, outputs=[dataset("orders_clean", fields=["id"])]))
    assert _versions(client)[f"{ROOT}"] > versions[ROOT]
    assert [f["name"] for f in _graph(client)[ROOT]["data"]["fields"]] == ["id"]


def test_a_known_schema_sent_again_does_not_bump_its_dataset(client: TestClient) -> None:
    """The same COMPLETE under a new key (one more run facet): its output's schema and times are what the store
    holds, so the dataset keeps its version (its card stays valid); the job's run was written, its version moves."""
    run_id = str(uuid.uuid4())
    complete = run_event("COMPLETE", "clean_orders", run_id, time=90, outputs=[dataset("orders_clean", fields=["id"])])
    _post(client, complete)
    versions = _versions(client)
    facet = {"_producer": "https://example.com/test", "_schemaURL": "https://example.com/test.json"}
    again = {**complete, "run": {**complete["run"], "facets": {**complete["run"].get("facets", {}), "test": facet}}}
    _post(client, again)
    after = _versions(client)
    assert after[ROOT] == versions[ROOT]
    assert after["job:pipelines:clean_orders"] > versions["job:pipelines:clean_orders"]
