"""A key limited to namespace patterns is confined in every operation, on SQLite and PostgreSQL.

* A limited admin key prunes only old events that name no namespace it cannot see, and only stale runs whose
  job and every input and output it sees; it is answered (and the prune history records) those counts.
* It resets a namespace only when nothing that goes or changes involves a namespace it cannot see: otherwise
  409, dry run too, and the store is left exactly as it was.
* A limited write key may not claim a name outside its namespaces through a ``dataSource`` facet's URI.
* Tag definitions are global: a limited key may not create or describe one.

Namespaces: ``fin-db`` and ``fin-jobs`` match the limited keys' ``fin*``; ``secret-ns`` and ``secret-db``
(and ``postgres://secret-db:5432``) do not.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from support.consumer_helpers import PRODUCER, T0, dataset, dataset_event, run_event
from support.waiting import wait_until

from airflow_lineage_provider.consumer import create_app
from airflow_lineage_provider.consumer.security.access import Access, ApiKey, NamespaceScope
from airflow_lineage_provider.consumer.store.schema import tables

pytest_plugins = ("support.consumer_fixtures",)

OPS = {"X-API-Key": "ops-admin-secret"}
FIN_ADMIN = {"X-API-Key": "fin-admin-secret"}
FIN_WRITER = {"X-API-Key": "fin-writer-secret"}
PRODUCER_KEY = {"X-API-Key": "producer-secret"}
FIN = NamespaceScope(("fin*",))
KEYS = (
    ApiKey("ops", Access.ADMIN, OPS["X-API-Key"]),
    ApiKey("finadm", Access.ADMIN, FIN_ADMIN["X-API-Key"], FIN),
    ApiKey("finwrite", Access.WRITE, FIN_WRITER["X-API-Key"], FIN),
    ApiKey("producer", Access.WRITE, PRODUCER_KEY["X-API-Key"]),
)
AUDIT = "airflow_lineage_provider.consumer.security.audit"
SECRET_DB = "postgres://secret-db:5432"
#: The message of a reset refused for a limited key (it names no namespace but the one asked for).
SHARED = (
    "namespace 'fin-db' is shared with namespaces this key cannot see (events, edges, runs, io groups, column "
    "lineage or claimed names link them): a reset needs a key without namespace limits"
)


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, keys=KEYS)
    try:
        with TestClient(app) as test_client:
            yield test_client
    finally:
        app.state.store.dispose()


def _post(client: TestClient, events: list[dict[str, Any]], headers: dict[str, str] = PRODUCER_KEY) -> None:
    answer = client.post("/api/v1/lineage/batch", json=events, headers=headers)
    assert answer.status_code == 200, answer.text


def _seconds(when: datetime) -> float:
    """``when`` as the helpers' event time (seconds after their fixed instant)."""
    return (when - T0).total_seconds()


def _parent(payload: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    payload["run"]["facets"] = {
        "parent": {
            "_producer": PRODUCER,
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet",
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": namespace, "name": name},
        }
    }
    return payload


def _facet(event: dict[str, Any], name: str, value: dict[str, Any]) -> dict[str, Any]:
    """``event`` with facet ``name`` on its first output, or on its dataset (a DatasetEvent)."""
    ref = event["dataset"] if "dataset" in event else event["outputs"][0]
    ref.setdefault("facets", {})[name] = {"_producer": PRODUCER, "_schemaURL": f"https://example.com/{name}", **value}
    return event


def _data_source(event: dict[str, Any], uri: str) -> dict[str, Any]:
    return _facet(event, "dataSource", {"name": "n", "uri": uri})


def _symlink(event: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    return _facet(event, "symlinks", {"identifiers": [{"namespace": namespace, "name": name, "type": "TABLE"}]})


def _store(client: TestClient) -> Any:
    app: Any = client.app  # the consumer's FastAPI app
    return app.state.store


def _rows(client: TestClient) -> dict[str, list[str]]:
    """Every row of every lineage table, as sorted text: what "nothing changed" compares."""
    with _store(client).read() as conn:
        return {
            table.name: sorted(repr(tuple(row)) for row in conn.execute(sa.select(table)))
            for table in tables.metadata.sorted_tables
        }


def _events(client: TestClient) -> set[tuple[str, str | None, str | None, datetime]]:
    """The stored raw events, as ``(kind, job namespace, job name, event time)``."""
    e = tables.events.c
    with _store(client).read() as conn:
        return {tuple(row) for row in conn.execute(sa.select(e.kind, e.job_namespace, e.job_name, e.event_time))}


# -- prune -------------------------------------------------------------------------------------------------------

OLD = datetime(2020, 1, 1, tzinfo=timezone.utc)
RUN = {name: str(uuid.uuid4()) for name in ("load-old", "load-new", "mix-old", "mix-new", "steal-old", "steal-new")}


def _prune_store(client: TestClient) -> None:
    """Old events and runs (2020), each job with a recent run too, so that its old run is stale."""
    old, recent = _seconds(OLD), _seconds(datetime.now(timezone.utc) - timedelta(hours=1))
    raw, orders = dataset("raw", "fin-db"), dataset("orders", "fin-db")
    _post(
        client,
        [
            # wholly inside fin*: the event and the run go
            run_event("COMPLETE", "load", RUN["load-old"], old, [raw], [orders], namespace="fin-jobs"),
            dataset_event(dataset("orders", "fin-db"), time=old + 1),
            # a fin job reading a hidden dataset: the event and the run stay
            run_event("COMPLETE", "mix", RUN["mix-old"], old + 2, [dataset("s", "secret-db")], [orders], "fin-jobs"),
            # a hidden job reading a fin dataset: the event and the run stay
            run_event(
                "COMPLETE", "steal", RUN["steal-old"], old + 3, [orders], [dataset("t", "secret-db")], "secret-ns"
            ),
            # hidden only by what a facet names: the event stays
            _parent(run_event("COMPLETE", "child", None, old + 4, [raw], namespace="fin-jobs"), "secret-ns", "dag"),
            dataset_event(dataset("x", "secret-db"), time=old + 5),
            run_event("COMPLETE", "load", RUN["load-new"], recent, [raw], [orders], namespace="fin-jobs"),
            run_event("COMPLETE", "mix", RUN["mix-new"], recent, [raw], [orders], namespace="fin-jobs"),
            run_event("COMPLETE", "steal", RUN["steal-new"], recent, [orders], [], namespace="secret-ns"),
        ],
    )


def _run_found(client: TestClient, run: str) -> bool:
    answer = client.get(f"/api/v1/runs/{run}", headers=OPS)
    assert answer.status_code in (200, 404), answer.text
    return answer.status_code == 200


def test_a_limited_admin_key_prunes_only_what_lies_wholly_inside_its_namespaces(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    _prune_store(client)
    before = _events(client)
    caplog.set_level(logging.INFO, logger=AUDIT)

    answer = client.post("/api/v1/retention", params={"days": 365}, headers=FIN_ADMIN)

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"events": 2, "runs": 1}  # only its own: nothing of what it cannot see is counted
    gone = before - _events(client)
    assert gone == {("run", "fin-jobs", "load", OLD), ("dataset", None, None, OLD + timedelta(seconds=1))}
    assert not _run_found(client, RUN["load-old"])
    assert _run_found(client, RUN["mix-old"]) and _run_found(client, RUN["steal-old"])
    assert (
        "lineage audit: limited prune by key 'finadm' (namespaces fin*): older than 365 days; "
        "removed 2 events, 1 runs -> 200"
    ) in caplog.messages


def test_what_a_limited_prune_kept_is_pruned_by_an_unlimited_key(client: TestClient) -> None:
    _prune_store(client)
    assert client.post("/api/v1/retention", params={"days": 365}, headers=FIN_ADMIN).json() == {"events": 2, "runs": 1}

    rest = client.post("/api/v1/retention", params={"days": 365}, headers=OPS).json()

    assert rest == {"events": 4, "runs": 2}
    assert not _run_found(client, RUN["mix-old"]) and not _run_found(client, RUN["steal-old"])


def test_the_prune_history_records_a_limited_prune_with_its_own_counts_only(client: TestClient) -> None:
    _prune_store(client)
    client.post("/api/v1/retention", params={"days": 365}, headers=FIN_ADMIN)

    status = client.get("/api/v1/retention", headers=OPS).json()

    assert (status["lastPrune"]["events"], status["lastPrune"]["runs"]) == (2, 1)
    assert client.get("/api/v1/retention", headers=FIN_ADMIN).status_code == 403  # still the whole store's counts


def test_an_unlimited_prune_still_removes_every_old_event_and_stale_run(client: TestClient) -> None:
    _prune_store(client)
    assert client.post("/api/v1/retention", params={"days": 365}, headers=OPS).json() == {"events": 6, "runs": 3}


# -- reset -------------------------------------------------------------------------------------------------------


def _clean_events() -> list[dict[str, Any]]:
    """fin-db holds its own job and datasets; secret-ns lineage is apart from it."""
    raw, orders = dataset("raw", "fin-db", ["id"]), dataset("orders", "fin-db", ["id"])
    return [
        run_event("COMPLETE", "load", None, 1, [raw], [orders], namespace="fin-db"),
        run_event("COMPLETE", "other", None, 2, [dataset("a", "secret-db")], [dataset("b", "secret-db")], "secret-ns"),
    ]


#: What links fin-db with a namespace the limited key cannot see, each posted by the unlimited producer.
ENTANGLEMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "a hidden job writes a dataset of it": lambda: run_event(
        "COMPLETE", "secret_job", None, 3, [dataset("a", "secret-db")], [dataset("shared", "fin-db")], "secret-ns"
    ),
    "a hidden job reads a dataset of it": lambda: run_event(
        "COMPLETE", "secret_job", None, 3, [dataset("orders", "fin-db")], [dataset("c", "secret-db")], "secret-ns"
    ),
    "its job reads a hidden dataset": lambda: run_event(
        "COMPLETE", "load", None, 3, [dataset("a", "secret-db")], [dataset("orders", "fin-db")], "fin-db"
    ),
    "column lineage from a hidden dataset": lambda: dataset_event(
        dataset("orders", "fin-db", ["id"], columns={"id": [("secret-db", "a", "id")]}), time=3
    ),
    "a dataset of it claims a hidden name": lambda: _symlink(
        dataset_event(dataset("orders", "fin-db"), time=3), "secret-db", "a"
    ),
    "a hidden dataset claims a name in it": lambda: _symlink(
        dataset_event(dataset("a", "secret-db"), time=3), "fin-db", "orders"
    ),
    "a dataset of it names a hidden database in dataSource": lambda: _data_source(
        dataset_event(dataset("orders", "fin-db"), time=3), SECRET_DB
    ),
    "an event of its job names a hidden parent job": lambda: _parent(
        run_event("COMPLETE", "load", None, 3, [dataset("raw", "fin-db")], namespace="fin-db"), "secret-ns", "dag"
    ),
}


@pytest.mark.parametrize("link", sorted(ENTANGLEMENTS))
def test_a_limited_key_cannot_reset_a_namespace_shared_with_hidden_ones(
    client: TestClient, link: str, caplog: pytest.LogCaptureFixture
) -> None:
    _post(client, [*_clean_events(), ENTANGLEMENTS[link]()])
    before = _rows(client)
    caplog.set_level(logging.INFO, logger=AUDIT)

    for dry_run in (True, False):
        answer = client.post("/api/v1/reset", params={"namespace": "fin-db", "dryRun": dry_run}, headers=FIN_ADMIN)
        assert answer.status_code == 409, answer.text
        assert answer.json()["detail"] == SHARED

    assert _rows(client) == before
    assert "lineage audit: reset by key 'finadm': namespace fin-db; nothing removed -> 409" in caplog.messages
    assert "lineage audit: dry-run reset by key 'finadm': namespace fin-db; nothing removed -> 409" in caplog.messages
    assert client.post("/api/v1/reset", params={"namespace": "fin-db"}, headers=OPS).status_code == 200


def test_a_limited_key_resets_a_namespace_that_lies_wholly_inside_its_own(client: TestClient) -> None:
    _post(client, _clean_events())
    dry = client.post("/api/v1/reset", params={"namespace": "fin-db", "dryRun": True}, headers=FIN_ADMIN)
    assert dry.status_code == 200, dry.text

    done = client.post("/api/v1/reset", params={"namespace": "fin-db"}, headers=FIN_ADMIN)

    assert done.status_code == 200, done.text
    assert done.json()["counts"] == dry.json()["counts"]
    assert done.json()["counts"]["events"] == 1 and done.json()["counts"]["datasets"] == 2
    assert {(namespace, job) for _kind, namespace, job, _time in _events(client)} == {("secret-ns", "other")}
    nodes = client.get("/api/v1/graph", params={"limit": 100}, headers=OPS).json()["nodes"]
    assert sorted(node["id"] for node in nodes) == [
        "dataset:secret-db:a",
        "dataset:secret-db:b",
        "job:secret-ns:other",
    ]


def test_a_limited_key_still_may_not_reset_the_whole_store(client: TestClient) -> None:
    _post(client, _clean_events())
    for dry_run in (True, False):
        answer = client.post("/api/v1/reset", params={"confirm": "all", "dryRun": dry_run}, headers=FIN_ADMIN)
        assert answer.status_code == 403, answer.text


# -- dataSource claims -------------------------------------------------------------------------------------------

FOREIGN = f"/api/v1/namespaces/{quote(SECRET_DB, safe='')}/datasets/x.table"
CLAIM_REFUSED = (
    f"outputs[0].facets.dataSource.uri names namespace '{SECRET_DB}' outside this key's namespaces ['fin*']: "
    "key 'finwrite' may not claim a name there"
)


def _claiming(uri: str = SECRET_DB) -> dict[str, Any]:
    """A fin-db job's run writing fin-db's ``x.table`` with a dataSource facet naming ``uri``."""
    return _data_source(run_event("COMPLETE", "j", None, 5, [], [dataset("x.table", "fin-db")], "fin-db"), uri)


@pytest.fixture
def foreign(client: TestClient) -> TestClient:
    """A store where another producer wrote ``postgres://secret-db:5432`` / ``x.table``."""
    _post(client, [run_event("COMPLETE", "secret_job", None, 1, [], [dataset("x.table", SECRET_DB)], "secret-ns")])
    return client


def _foreign_dataset(client: TestClient) -> dict[str, Any]:
    answer = client.get(FOREIGN, headers=OPS)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_limited_writer_may_not_claim_a_foreign_dataset_through_data_source(foreign: TestClient) -> None:
    before = _foreign_dataset(foreign)

    answer = foreign.post("/api/v1/lineage", json=_claiming(), headers=FIN_WRITER)

    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == CLAIM_REFUSED
    assert _foreign_dataset(foreign) == before
    assert before["id"] == {"namespace": SECRET_DB, "name": "x.table"}
    assert _rows(foreign)["lineage_symlinks"] == []


def test_a_data_source_claim_is_that_events_error_in_a_batch(foreign: TestClient) -> None:
    before = _foreign_dataset(foreign)
    fine = run_event("COMPLETE", "j", None, 4, [], [dataset("y", "fin-db")], "fin-db")

    answer = foreign.post("/api/v1/lineage/batch", json=[fine, _claiming()], headers=FIN_WRITER)

    assert answer.status_code == 207, answer.text
    assert answer.json()["errors"] == [{"index": 1, "error": CLAIM_REFUSED}]
    assert _foreign_dataset(foreign) == before
    assert _rows(foreign)["lineage_symlinks"] == []
    assert foreign.get("/api/v1/namespaces/fin-db/datasets/y", headers=OPS).status_code == 200


def test_a_data_source_of_a_dataset_event_names_its_place(foreign: TestClient) -> None:
    event = _data_source(dataset_event(dataset("x.table", "fin-db"), time=4), SECRET_DB)

    answer = foreign.post("/api/v1/lineage", json=event, headers=FIN_WRITER)

    assert answer.status_code == 400
    assert answer.json()["detail"].startswith(f"dataset.facets.dataSource.uri names namespace '{SECRET_DB}'")


def test_a_limited_writer_may_name_a_data_source_inside_its_namespaces(foreign: TestClient) -> None:
    answer = foreign.post("/api/v1/lineage", json=_claiming("fin://replica:5432"), headers=FIN_WRITER)
    assert answer.status_code == 201, answer.text


def test_an_unlimited_writer_still_claims_through_data_source(foreign: TestClient) -> None:
    answer = foreign.post("/api/v1/lineage", json=_claiming(), headers=PRODUCER_KEY)

    assert answer.status_code == 201, answer.text
    assert _foreign_dataset(foreign)["id"]["namespace"] == "fin-db"  # one dataset now, as the producer said


# -- tags --------------------------------------------------------------------------------------------------------


def _tags(client: TestClient) -> list[dict[str, Any]]:
    return client.get("/api/v1/tags", headers=OPS).json()["tags"]


def test_a_limited_key_may_not_create_or_describe_a_tag(client: TestClient) -> None:
    assert client.put("/api/v1/tags/pii", json={"description": "personal data"}, headers=OPS).status_code == 200

    for tag in ("pii", "new-tag"):
        answer = client.put(f"/api/v1/tags/{tag}", json={"description": "rewritten"}, headers=FIN_WRITER)
        assert answer.status_code == 403, answer.text
        assert answer.json()["code"] == 403
        assert "key 'finwrite' is limited to some namespaces and may not create or describe a tag" in answer.text

    assert _tags(client) == [{"name": "pii", "description": "personal data"}]


def test_an_unlimited_key_creates_and_describes_tags(client: TestClient) -> None:
    assert (
        client.put("/api/v1/tags/pii", json={"description": "personal data"}, headers=PRODUCER_KEY).status_code == 200
    )
    assert client.put("/api/v1/tags/pii", json={"description": "GDPR"}, headers=PRODUCER_KEY).status_code == 200
    assert _tags(client) == [{"name": "pii", "description": "GDPR"}]


def test_a_limited_key_tags_what_it_sees_with_existing_tags_only(client: TestClient) -> None:
    _post(client, _clean_events())
    assert client.put("/api/v1/tags/GOLD", headers=OPS).status_code == 200
    orders = "/api/v1/namespaces/fin-db/datasets/orders/tags/{}".format

    assert client.post(orders("GOLD"), headers=FIN_WRITER).json()["tags"] == ["GOLD"]
    unknown = client.post(orders("SILVER"), headers=FIN_WRITER)
    assert unknown.status_code == 403 and "may not put a tag that does not exist yet" in unknown.text
    assert [tag["name"] for tag in _tags(client)] == ["GOLD"]
    assert client.delete(orders("GOLD"), headers=FIN_WRITER).json()["tags"] == []
    assert client.post(orders("SILVER"), headers=PRODUCER_KEY).json()["tags"] == ["SILVER"]  # unlimited: created


def test_the_reset_checks_again_in_its_own_transaction(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link made between the first check (a read transaction) and the reset's own is still refused: the reset
    checks again, in the transaction that deletes."""
    from airflow_lineage_provider.consumer.ingest import service

    _post(client, [*_clean_events(), ENTANGLEMENTS["a hidden job writes a dataset of it"]()])
    before = _rows(client)
    monkeypatch.setattr(service, "check_confined", lambda *_args: None)  # as if the link came after it
    answer = client.post("/api/v1/reset", params={"namespace": "fin-db"}, headers=FIN_ADMIN)
    assert answer.status_code == 409, answer.text
    assert _rows(client) == before


def _lock_waited_for(engine: sa.Engine, table: str) -> bool:
    """Whether a session waits for a lock on ``table``."""
    with engine.connect() as conn:
        query = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = CAST(%(table)s AS regclass)"
        return bool(conn.exec_driver_sql(query, {"table": table}).scalar())


@pytest.mark.postgres
def test_a_limited_key_is_refused_without_holding_off_any_writer(pg_store_url: str) -> None:
    """The refusal comes from a read transaction: while another writer holds its lock on the nodes (an ingest or
    the applier in the middle of its transaction), a limited key's reset of a shared namespace is refused at once
    instead of waiting for it — and making every writer behind it wait."""
    from airflow_lineage_provider.consumer.ingest.service import reset_now, write_events
    from airflow_lineage_provider.consumer.store import LineageStore
    from airflow_lineage_provider.consumer.store.operations.reset import SharedNamespace
    from airflow_lineage_provider.consumer.validation import parse_event

    store = LineageStore(pg_store_url, ingest_apply="deferred")
    engine = sa.create_engine(pg_store_url)
    holder = engine.connect()
    try:
        shared = [*_clean_events(), ENTANGLEMENTS["a hidden job writes a dataset of it"]()]
        write_events(store, [parse_event(event) for event in shared])
        holder.exec_driver_sql("LOCK TABLE lineage_nodes IN ROW EXCLUSIVE MODE")  # as a writer mid-transaction
        refused: list[BaseException] = []

        def reset() -> None:
            try:
                reset_now(store, "fin-db", namespaces=FIN)
            except SharedNamespace as error:
                refused.append(error)

        resetting = threading.Thread(target=reset, daemon=True)
        resetting.start()
        refused_at_once = "the limited key's reset refused while a writer holds its lock"
        wait_until(lambda: not resetting.is_alive(), refused_at_once, timeout=60)
        assert [str(error) for error in refused] == [SHARED]
    finally:
        holder.rollback()
        holder.close()
        engine.dispose()
        store.dispose()


@pytest.mark.postgres
def test_an_event_logged_during_a_limited_keys_reset_waits_for_it_and_is_not_deleted_unchecked(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A limited key resets fin-db, which it sees whole. Right after the reset's check in its own transaction, an
    unlimited producer logs an event of a fin-db job that reads a hidden dataset (deferred apply: only the ingest
    log is written): the ingest waits for the reset, so the reset deletes exactly the events it checked, and the
    new event is stored and applied after it."""
    from airflow_lineage_provider.consumer.ingest.service import reset_now, write_events
    from airflow_lineage_provider.consumer.store import LineageStore
    from airflow_lineage_provider.consumer.store.operations import reset as reset_module
    from airflow_lineage_provider.consumer.validation import parse_event

    store = LineageStore(pg_store_url, ingest_apply="deferred")
    engine = sa.create_engine(pg_store_url)
    late = parse_event(
        run_event("COMPLETE", "late", None, 5, [dataset("a", "secret-db")], [dataset("x", "fin-db")], "fin-db")
    )
    logging: list[threading.Thread] = []
    checks: list[bool] = []
    check = reset_module._reaches_beyond

    def checked_then_logged(conn: Any, plan: Any, visible: Any) -> bool:
        found = check(conn, plan, visible)
        checks.append(found)
        held = "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND mode = 'ShareRowExclusiveLock'"
        if conn.exec_driver_sql(held).scalar():  # the check in the reset's own transaction, not a read's
            thread = threading.Thread(target=write_events, args=(store, [late]), daemon=True)
            thread.start()
            logging.append(thread)
            wait_until(
                lambda: not thread.is_alive() or _lock_waited_for(engine, "lineage_pending_events"),
                "the producer's ingest done or waiting for the reset",
                timeout=60,
            )
        return found

    try:
        write_events(store, [parse_event(event) for event in _clean_events()])
        monkeypatch.setattr(reset_module, "_reaches_beyond", checked_then_logged)
        counts = reset_now(store, "fin-db", namespaces=FIN)
        assert checks and not any(checks)
        assert counts.events == 1  # the fin-db job's own event, checked
        logging[0].join(60)
        assert not logging[0].is_alive()
        e = tables.events.c
        with store.read() as conn:  # after what was logged is applied
            assert conn.execute(sa.select(e.job_name).where(e.job_namespace == "fin-db")).scalars().all() == ["late"]
            n = tables.nodes.c
            jobs = conn.execute(sa.select(n.namespace, n.name).where(n.kind == "job")).all()
        assert sorted(tuple(job) for job in jobs) == [("fin-db", "late"), ("secret-ns", "other")]
    finally:
        engine.dispose()
        store.dispose()
