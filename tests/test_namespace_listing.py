"""The namespaces table the writer keeps (``lineage_namespaces``, :mod:`.write.namespaces`), on SQLite and PostgreSQL.

Differential: after every write path (ingest in and out of time order, retention, a namespace reset, a whole-store
reset, a declaration that drops a declared-only dataset, an upgrade from version 13) the table holds what grouping
the nodes gives — each namespace once, its earliest ``created_at`` exactly and its latest ``updated_at`` within
:data:`.write.namespaces.UPDATED_PRECISION` — and the listings (Marquez, Feast, a limited key's) answer from it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import T0, dataset, job_event, run_event

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store import create_store_engine
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, migrate
from airflow_lineage_provider.consumer.store.write.namespaces import UPDATED_PRECISION, note

pytest_plugins = ("support.consumer_fixtures",)

Times = dict[str, tuple[datetime, datetime]]


def _post(client: TestClient, *events: dict[str, Any]) -> None:
    assert client.post("/api/v1/lineage/batch", json=list(events)).status_code == 200
    assert client.get("/api/v1/namespaces").status_code == 200  # a read waits until what was posted is applied


def _grouped(conn: sa.Connection) -> Times:
    """What grouping the nodes gives: each namespace's earliest ``created_at`` and latest ``updated_at``."""
    n = tables.nodes.c
    query = (
        sa.select(n.namespace, sa.func.min(n.created_at), sa.func.max(n.updated_at))
        .where(n.kind.in_(("job", "dataset")))
        .group_by(n.namespace)
    )
    return {name: (created, updated) for name, created, updated in conn.execute(query)}


def _kept(conn: sa.Connection) -> Times:
    ns = tables.namespaces.c
    query = sa.select(ns.namespace, ns.created_at, ns.updated_at)
    return {name: (created, updated) for name, created, updated in conn.execute(query)}


def _assert_kept(engine: sa.Engine) -> Times:
    """The table against the grouping of the nodes; returns the table."""
    with engine.connect() as conn:
        grouped, kept = _grouped(conn), _kept(conn)
    assert kept.keys() == grouped.keys()
    for name, (created, updated) in grouped.items():
        assert kept[name][0] == created, name
        assert updated - UPDATED_PRECISION <= kept[name][1] <= updated, name
    return kept


def _iso(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # as the store's answers write times


def _assert_listed(client: TestClient, kept: Times) -> None:
    """``/api/v1/namespaces`` (paged), one namespace and Feast's list answer what the table holds."""
    first = client.get("/api/v1/namespaces", params={"limit": 2}).json()
    rest = client.get("/api/v1/namespaces", params={"limit": 100, "offset": 2}).json()
    listed = first["namespaces"] + rest["namespaces"]
    assert first["totalCount"] == rest["totalCount"] == len(kept)
    assert [n["name"] for n in listed] == sorted(kept)
    for namespace in listed:
        created, updated = kept[namespace["name"]]
        assert (namespace["createdAt"], namespace["updatedAt"]) == (_iso(created), _iso(updated))
    for name in (name for name in kept if "/" not in name):  # one namespace by its path (a URI's needs no test here)
        assert client.get(f"/api/v1/namespaces/{name}").json()["createdAt"] == _iso(kept[name][0])
    assert client.get("/api/v1/namespaces/nowhere").status_code == 404


def _engine(client: TestClient) -> sa.Engine:
    return client.app.state.store.engine  # type: ignore[no-any-return]


def _load(seconds: float, namespace: str = "warehouse", name: str = "orders", job: str = "load") -> dict[str, Any]:
    return run_event("COMPLETE", job, time=seconds, outputs=[dataset(name, namespace=namespace)])


def test_ingest_keeps_one_row_per_namespace_as_grouping_the_nodes_gives(client: TestClient) -> None:
    _post(
        client,
        _load(100, "warehouse", "orders"),
        _load(200, "s3://lake", "raw/orders", job="copy"),
        run_event("COMPLETE", "report", time=300, inputs=[dataset("orders")], outputs=[dataset("rpt", "bi")]),
    )
    kept = _assert_kept(_engine(client))
    assert sorted(kept) == ["bi", "pipelines", "s3://lake", "warehouse"]
    assert kept["warehouse"] == (T0 + timedelta(seconds=100), T0 + timedelta(seconds=300))
    _assert_listed(client, kept)
    assert client.get("/api/v1/lineage/openlineage/namespaces").json()["namespaces"] == sorted(kept)  # Feast's


def test_older_events_lower_created_at_and_updated_at_moves_on_only_past_its_precision(client: TestClient) -> None:
    engine, step = _engine(client), UPDATED_PRECISION.total_seconds()
    _post(client, _load(1000, "lazy"))
    assert _assert_kept(engine)["lazy"] == (T0 + timedelta(seconds=1000),) * 2
    _post(client, _load(0, "lazy", "older"))  # out of time order: the namespace began earlier
    assert _assert_kept(engine)["lazy"] == (T0, T0 + timedelta(seconds=1000))
    _post(client, _load(1000 + step / 2, "lazy"))  # within the precision: the row is left alone
    assert _assert_kept(engine)["lazy"] == (T0, T0 + timedelta(seconds=1000))
    _post(client, _load(1000 + 2 * step, "lazy"))
    kept = _assert_kept(engine)
    assert kept["lazy"] == (T0, T0 + timedelta(seconds=1000 + 2 * step))
    _assert_listed(client, kept)


def test_retention_deletes_no_namespace(client: TestClient) -> None:
    _post(client, _load(0), _load(10, "s3://lake"))
    before = _assert_kept(_engine(client))
    assert client.post("/api/v1/retention", params={"days": 1}).json()["events"] == 2  # the events are months old
    assert _assert_kept(_engine(client)) == before
    _assert_listed(client, before)


def test_a_namespace_reset_takes_its_row_and_a_store_reset_every_row(client: TestClient) -> None:
    _post(client, _load(0), _load(10, "s3://lake", job="copy"), _load(20, "bi", job="report"))
    assert client.post("/api/v1/reset", params={"namespace": "s3://lake"}).status_code == 200
    kept = _assert_kept(_engine(client))
    assert sorted(kept) == ["bi", "pipelines", "warehouse"]
    _assert_listed(client, kept)
    assert client.post("/api/v1/reset", params={"confirm": "all"}).status_code == 200
    assert _assert_kept(_engine(client)) == {}
    assert client.get("/api/v1/namespaces").json() == {"namespaces": [], "totalCount": 0}
    _post(client, _load(30, "bi"))  # a namespace comes back with new nodes
    assert sorted(_assert_kept(_engine(client))) == ["bi", "pipelines"]


def test_a_dataset_only_a_replaced_declaration_named_takes_its_namespace_along(client: TestClient) -> None:
    out = dataset("out")
    _post(client, job_event("load", [dataset("staged", "declared_only"), dataset("src", "bi")], [out], time=0))
    assert {"declared_only", "bi"} <= _assert_kept(_engine(client)).keys()
    _post(client, job_event("load", [dataset("src", "bi")], [out], time=10))  # no longer names "staged"
    kept = _assert_kept(_engine(client))
    assert "declared_only" not in kept and "bi" in kept
    _assert_listed(client, kept)


ALL = {"X-API-Key": "all-namespaces-secret"}
LIMITED = {"X-API-Key": "warehouse-and-lake-secret"}
KEYS = (
    ApiKey("all", Access.ADMIN, ALL["X-API-Key"]),
    ApiKey("limited", Access.READ, LIMITED["X-API-Key"], NamespaceScope(("warehouse", "s3://*"))),
)


@pytest.fixture
def keyed(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    with TestClient(app) as client:
        yield client
    app.state.store.dispose()


def test_a_limited_key_lists_the_namespaces_it_sees_with_their_total(keyed: TestClient) -> None:
    events = [_load(0), _load(10, "s3://lake", job="copy"), _load(20, "bi", job="report"), _load(30, "s3://raw")]
    assert keyed.post("/api/v1/lineage/batch", json=events, headers=ALL).status_code == 200
    every = keyed.get("/api/v1/namespaces", headers=ALL).json()
    assert every["totalCount"] == 5
    seen = keyed.get("/api/v1/namespaces", params={"limit": 2}, headers=LIMITED).json()
    assert [n["name"] for n in seen["namespaces"]] == ["s3://lake", "s3://raw"] and seen["totalCount"] == 3
    rest = keyed.get("/api/v1/namespaces", params={"offset": 2}, headers=LIMITED).json()
    assert [n["name"] for n in rest["namespaces"]] == ["warehouse"] and rest["totalCount"] == 3
    assert keyed.get("/api/v1/namespaces/bi", headers=LIMITED).status_code == 404
    assert keyed.get("/api/v1/namespaces/warehouse", headers=LIMITED).status_code == 200
    assert {d["namespace"] for d in keyed.get("/api/v1/datasets", headers=LIMITED).json()["datasets"]} == {
        "warehouse",
        "s3://lake",
        "s3://raw",
    }
    _assert_kept(_engine(keyed))


def test_note_lowers_and_raises_the_stored_times_whatever_a_batch_brings(store_url: str) -> None:
    """:func:`note` on its own: a new namespace, an older one, a later one within and past the precision."""
    engine = create_store_engine(store_url)
    step = UPDATED_PRECISION
    try:
        migrate(engine)
        with engine.begin() as conn:
            note(conn, {"a": (T0 + step, T0 + 2 * step)})
            note(conn, {"a": (T0 + 2 * step, T0 + 2 * step + step / 2), "b": (T0, T0)})  # within the precision
            assert _kept(conn) == {"a": (T0 + step, T0 + 2 * step), "b": (T0, T0)}
            note(conn, {"a": (T0, T0 + step)})  # older: created_at goes down, updated_at stays
            assert _kept(conn)["a"] == (T0, T0 + 2 * step)
            note(conn, {"a": (T0 - step, T0 + 2 * step + step / 2)})  # written anyway: updated_at moves along
            assert _kept(conn)["a"] == (T0 - step, T0 + 2 * step + step / 2)
            note(conn, {"a": (T0 + 9 * step, T0 + 9 * step)})
            note(conn, {"a": (T0 + 3 * step, T0 + 5 * step)})  # behind the stored times: nothing moves
            assert _kept(conn)["a"] == (T0 - step, T0 + 9 * step)
    finally:
        engine.dispose()


def test_a_version_13_store_is_backfilled_from_its_nodes(store_url: str) -> None:
    from test_consumer_store import back_to_version

    app = create_app(store_url=store_url, anonymous=Access.ADMIN)
    try:
        with TestClient(app) as client:
            _post(client, _load(0), _load(10, "s3://lake", job="copy"), _load(5, "bi", "older", job="report"))
            engine = _engine(client)
            expected = _assert_kept(engine)
            with engine.begin() as conn:
                back_to_version(conn, 13)
    finally:
        app.state.store.dispose()
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == LATEST
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT version_num FROM lineage_alembic_version").scalar() == "0018"
            assert _kept(conn) == _grouped(conn) == expected  # the backfill is exact, updated_at too
    finally:
        engine.dispose()


def test_a_dataset_page_read_again_shows_what_another_process_changed_since(store_url: str) -> None:
    """Listed datasets are kept decoded by node version: a change written through another app on the same store
    (another consumer process) shows on the next page, and an unchanged dataset is answered as it was."""
    first, second = (create_app(store_url=store_url, anonymous=Access.ADMIN) for _ in range(2))
    try:
        with TestClient(first) as reader, TestClient(second) as writer:
            events = [
                run_event("COMPLETE", "load", time=0, outputs=[dataset("orders", fields=["id"]), dataset("stable")])
            ]
            _post(writer, *events)
            page = reader.get("/api/v1/datasets").json()
            before = {d["name"]: d for d in page["datasets"]}
            assert [f["name"] for f in before["orders"]["fields"]] == ["id"]
            assert reader.get("/api/v1/datasets").json() == page  # read again: the same answer
            _post(writer, run_event("COMPLETE", "load", time=600, outputs=[dataset("orders", fields=["id", "amount"])]))
            after = {d["name"]: d for d in reader.get("/api/v1/datasets").json()["datasets"]}
            assert [f["name"] for f in after["orders"]["fields"]] == ["id", "amount"]
            assert after["orders"]["updatedAt"] > before["orders"]["updatedAt"]
            assert after["stable"] == before["stable"]
    finally:
        first.state.store.dispose()
        second.state.store.dispose()


def test_a_namespace_another_transaction_inserts_meanwhile_still_takes_this_batch_s_times(pg_store_url: str) -> None:
    """Two appliers (PostgreSQL) noting one new namespace at once: the second waits for the first's insert, finds
    it held and lowers ``created_at`` to its own older time instead of losing it."""
    engine = create_store_engine(pg_store_url)
    try:
        migrate(engine)
        with engine.connect() as first, engine.connect() as second:
            first.begin()
            note(first, {"shared": (T0 + UPDATED_PRECISION, T0 + UPDATED_PRECISION)})  # inserted, not committed
            second.begin()
            waiting = threading.Thread(target=note, args=(second, {"shared": (T0, T0)}))
            waiting.start()
            waiting.join(timeout=1.0)
            assert waiting.is_alive()  # its insert waits on the first transaction's row
            first.commit()
            waiting.join(timeout=30)
            assert not waiting.is_alive()
            second.commit()
        with engine.connect() as conn:
            assert _kept(conn) == {"shared": (T0, T0 + UPDATED_PRECISION)}
    finally:
        engine.dispose()
