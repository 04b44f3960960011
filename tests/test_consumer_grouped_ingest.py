"""Grouped commits of concurrent ingest requests, on real SQLite and PostgreSQL stores.

Requests that wait while a group is written are written together in the next transaction; what each request
is told must stay what it would be told alone: one bad event fails only its own request (the database's own
refusal, by a trigger), duplicates count as duplicates, and a server killed while groups are written has
stored every event it answered 201 for (a real ``airflow-lineage serve`` killed with SIGKILL, then restarted on
the same store).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from support.consumer_helpers import run_event
from support.served import serve_consumer
from support.waiting import wait_until

from airflow_lineage_provider.consumer.ingest.grouped_ingest import GroupedIngest
from airflow_lineage_provider.consumer.ingest.service import StoreUnavailable
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.validation import EventError, LineageEvent, parse_event

pytest_plugins = ("support.consumer_fixtures",)

CLIENTS = 8


def _refuse_name(store: LineageStore, name: str) -> None:
    """A real refusal by the database: a trigger that aborts the insert of a node of that name."""
    with store.write() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'names like this are refused here'; END $$ LANGUAGE plpgsql"
            )
            conn.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON lineage_nodes FOR EACH ROW WHEN (NEW.name = '{name}') "
                "EXECUTE FUNCTION refuse()"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON lineage_nodes WHEN NEW.name = '{name}' "
                "BEGIN SELECT RAISE(ABORT, 'names like this are refused here'); END"
            )


@contextmanager
def _write_lock_held(store: LineageStore, url: str) -> Iterator[None]:
    """Hold the store's write lock from another connection for the block, so ingests queue behind it."""
    if url.startswith("sqlite"):
        held = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        held.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            held.execute("ROLLBACK")
            held.close()
        return
    with store.engine.connect() as conn, conn.begin():
        conn.exec_driver_sql("LOCK TABLE lineage_events IN EXCLUSIVE MODE")
        yield


def _until(condition: Callable[[], bool]) -> None:
    wait_until(condition, "the requests did not queue behind the held lock", interval=0.01)


def _concurrently(grouped: GroupedIngest, calls: list[Callable[[], Any]], hold: Any) -> list[Any]:
    """Run ``calls`` on their own threads while ``hold`` is held: the first, once it leads a group (and waits for
    the lock), then the others, and release the lock once they all wait; their outcomes."""
    outcomes: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as error:
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    with hold:
        threads[0].start()
        _until(lambda: grouped.statistics.groups == 1)
        for thread in threads[1:]:
            thread.start()
        _until(lambda: grouped.waiting == len(calls) - 1)
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def _events(names: list[str]) -> list[LineageEvent]:
    return [parse_event(run_event("START", name, inputs=[{"namespace": "warehouse", "name": "src"}])) for name in names]


@pytest.fixture
def store(store_url: str) -> Iterator[LineageStore]:
    opened = LineageStore(store_url, ingest_apply="inline")  # a refusal answered per request (deferred: set aside)
    opened.engine  # noqa: B018 - created and migrated now, not behind a held lock
    yield opened
    opened.dispose()


def test_requests_that_wait_together_are_committed_in_one_group(store: LineageStore, store_url: str) -> None:
    grouped = GroupedIngest(store)
    events = _events([f"job_{i}" for i in range(CLIENTS)])
    calls = [lambda e=e: grouped.ingest([e]) for e in events]
    outcomes = _concurrently(grouped, calls, _write_lock_held(store, store_url))
    assert [(r.stored, r.duplicates, errors) for r, errors in outcomes] == [(1, 0, {})] * CLIENTS
    assert grouped.statistics.largest == CLIENTS - 1  # the first alone (it met the lock), the rest together
    assert grouped.statistics.groups == 2
    with store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tables.runs)).scalar() == CLIENTS


def test_one_refused_event_fails_only_its_own_request(store: LineageStore, store_url: str) -> None:
    _refuse_name(store, "refused")
    grouped = GroupedIngest(store)
    names = [f"job_{i}" for i in range(CLIENTS - 1)]
    names.insert(4, "refused")
    calls = [lambda e=e: grouped.ingest([e]) for e in _events(names)]
    outcomes = _concurrently(grouped, calls, _write_lock_held(store, store_url))
    assert grouped.statistics.largest == CLIENTS - 1
    for name, (result, errors) in zip(names, outcomes, strict=True):
        if name == "refused":
            assert result.stored == 0 and "refused here" in errors[0]
        else:
            assert (result.stored, errors) == (1, {})
    with store.read() as conn:
        stored = set(conn.execute(sa.select(tables.events.c.job_name)).scalars())
    assert stored == {n for n in names if n != "refused"}


def test_the_same_event_in_two_requests_of_a_group_is_stored_once(store: LineageStore, store_url: str) -> None:
    grouped = GroupedIngest(store)
    (event,) = _events(["twice"])
    others = _events(["first"])
    calls = [lambda: grouped.ingest(others), lambda: grouped.ingest([event]), lambda: grouped.ingest([event])]
    outcomes = _concurrently(grouped, calls, _write_lock_held(store, store_url))
    assert (outcomes[0][0].stored, outcomes[0][0].duplicates) == (1, 0)  # led alone
    counts = sorted((result.stored, result.duplicates) for result, _errors in outcomes[1:])
    assert counts == [(0, 1), (1, 0)]  # grouped: stored for one request, duplicate for the other
    assert grouped.statistics.largest == 2


def test_a_store_that_fails_fails_every_request_of_the_group() -> None:
    closed_port = "postgresql+psycopg2://postgres@127.0.0.1:9/nowhere?connect_timeout=2"
    grouped = GroupedIngest(LineageStore(closed_port))
    with pytest.raises(StoreUnavailable, match="unavailable"):
        grouped.ingest(_events(["a"]))
    assert grouped.waiting == 0


@pytest.mark.parametrize("apply", ["inline", "deferred"])
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_server_killed_while_writing_groups_stored_every_event_it_answered(
    kind: str, apply: str, tmp_path: Path
) -> None:
    """8 clients post one event per request to a real server, which is killed (SIGKILL) while they do: every
    event answered 201 is stored and applied after a restart on the same store (with deferred apply, by the
    restarted server's applier, before its first read is answered)."""
    from support.environment import postgres_schema_url

    options = ("--ingest-apply", apply)
    with postgres_schema_url() if kind == "postgres" else _nullcontext(f"sqlite:///{tmp_path / 'lineage.db'}") as url:
        answered: list[str] = []
        lock = threading.Lock()
        with serve_consumer(url, tmp_path, *options) as served:
            stop = threading.Event()

            def client(index: int) -> None:
                session = requests.Session()
                for n in range(100_000):
                    if stop.is_set():
                        return
                    event = run_event("START", f"client{index}.job{n}")
                    try:
                        response = session.post(f"{served.url}/api/v1/lineage", json=event, timeout=10)
                    except requests.RequestException:
                        return  # the server is gone
                    if response.status_code == 201:
                        with lock:
                            answered.append(event["run"]["runId"])

            threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 30
            while len(answered) < 200 and time.monotonic() < deadline:
                time.sleep(0.02)
            os.kill(served.pid, signal.SIGKILL)
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        assert len(answered) >= 200
        with serve_consumer(url, tmp_path, *options) as restarted:  # opens (and recovers) the same store
            assert requests.get(f"{restarted.url}/api/v1/namespaces", timeout=10).status_code == 200
        store = LineageStore(url)
        try:
            with store.read() as conn:
                events = set(conn.execute(sa.select(tables.events.c.run_uuid)).scalars())
                runs = set(conn.execute(sa.select(tables.runs.c.run_uuid)).scalars())
        finally:
            store.dispose()
        assert set(answered) <= events
        assert set(answered) <= runs
        if apply == "deferred":
            store = LineageStore(url)
            try:
                with store.read() as conn:
                    assert conn.execute(sa.select(sa.func.count()).select_from(tables.pending_events)).scalar() == 0
            finally:
                store.dispose()


@contextmanager
def _nullcontext(value: str) -> Iterator[str]:
    yield value


def _submitted(grouped: GroupedIngest, prepares: list[Callable[[], list[LineageEvent]]]) -> list[Any]:
    """Submit ``prepares`` from one event loop at once; each outcome or the exception it raised."""

    async def all_of() -> list[Any]:
        return await asyncio.gather(*(grouped.submit(p) for p in prepares), return_exceptions=True)

    return asyncio.run(all_of())


def test_requests_submitted_from_an_event_loop_are_checked_and_written_together(
    store: LineageStore, store_url: str
) -> None:
    """What the HTTP routes use: each request's body is checked by ``prepare`` in the writer thread, a check that
    raises fails only its own request, and the others of the group are stored and answered on the loop."""
    grouped = GroupedIngest(store)
    events = _events([f"job_{i}" for i in range(CLIENTS)])
    threads_seen: set[str] = set()

    def prepare(index: int) -> list[LineageEvent]:
        threads_seen.add(threading.current_thread().name)
        if index == 3:
            raise EventError("this body is not lineage")
        return [events[index]]

    with _write_lock_held(store, store_url):
        outcomes: list[Any] = []
        runner = threading.Thread(
            target=lambda: outcomes.extend(_submitted(grouped, [lambda i=i: prepare(i) for i in range(CLIENTS)]))
        )
        runner.start()
        _until(lambda: grouped.statistics.groups == 1)
    runner.join(timeout=60)
    assert isinstance(outcomes[3], EventError)
    assert [(o[0].stored, o[1]) for i, o in enumerate(outcomes) if i != 3] == [(1, {})] * (CLIENTS - 1)
    assert threads_seen == {"lineage-ingest"}  # checked off the event loop, by the writer
    with store.read() as conn:
        stored = set(conn.execute(sa.select(tables.events.c.job_name)).scalars())
    assert stored == {f"job_{i}" for i in range(CLIENTS) if i != 3}


def test_a_group_larger_than_the_bound_is_written_in_several_transactions(store: LineageStore) -> None:
    """Bodies are checked only by the writer, so a group is taken before its size is known: it is then written
    in transactions of at most ``max_group_events`` events, every request answered."""
    grouped = GroupedIngest(store, max_group_events=3)
    events = _events([f"job_{i}" for i in range(8)])
    prepares = [lambda: events[0:2], lambda: events[2:4], lambda: events[4:8], lambda: []]
    outcomes = _submitted(grouped, prepares)
    assert [(result.stored, errors) for result, errors in outcomes] == [(2, {}), (2, {}), (4, {}), (0, {})]
    assert grouped.statistics.events == 8


def test_the_writer_thread_ends_when_no_request_comes(store: LineageStore) -> None:
    """An app that ingests now and then keeps no thread for it between requests (one is started on demand)."""
    grouped = GroupedIngest(store)
    grouped.ingest(_events(["once"]))
    wait_until(
        lambda: not any(t.name == "lineage-ingest" for t in threading.enumerate()), "the writer thread never ended"
    )
    result, errors = grouped.ingest(_events(["again"]))  # and a later request starts a new one
    assert (result.stored, errors) == (1, {})


@pytest.mark.postgres
def test_on_postgresql_two_groups_are_written_at_once(pg_store_url: str) -> None:
    """With two writers (the app's default on PostgreSQL: ``writers_for``), a second request does not wait for a
    group that is stuck on a lock: it is written by the second writer, and the rest form a third group."""
    from airflow_lineage_provider.consumer.ingest.grouped_ingest import writers_for

    store = LineageStore(pg_store_url)
    store.engine  # noqa: B018 - created and migrated now, not behind a held lock
    try:
        assert writers_for(store) == 2 and writers_for(LineageStore("sqlite:///unused.db")) == 1
        grouped = GroupedIngest(store, writers=2)
        events = _events([f"job_{i}" for i in range(CLIENTS)])
        outcomes: list[Any] = [None] * CLIENTS

        def run(index: int) -> None:
            outcomes[index] = grouped.ingest([events[index]])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
        with _write_lock_held(store, pg_store_url):
            threads[0].start()
            _until(lambda: grouped.statistics.groups == 1)
            threads[1].start()
            _until(lambda: grouped.statistics.groups == 2)  # taken by the second writer, not queued
            for thread in threads[2:]:
                thread.start()
            _until(lambda: grouped.waiting == CLIENTS - 2)
        for thread in threads:
            thread.join(timeout=60)
        assert [(r.stored, errors) for r, errors in outcomes] == [(1, {})] * CLIENTS
        assert grouped.statistics.groups == 3 and grouped.statistics.largest == CLIENTS - 2
    finally:
        store.dispose()


def _senders_posting(grouped: GroupedIngest, senders: int, each: int) -> list[Any]:
    """``senders`` threads, each posting ``each`` events one request after another (as Airflow workers with the
    stock HTTP transport do); every outcome."""
    events = _events([f"sender_{s}_job_{i}" for s in range(senders) for i in range(each)])
    outcomes: list[Any] = []
    lock = threading.Lock()

    def post(sender: int) -> None:
        for i in range(each):
            outcome = grouped.ingest([events[sender * each + i]])
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=post, args=(s,)) for s in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


def test_concurrent_senders_are_waited_for_and_committed_together(store: LineageStore) -> None:
    """Four senders posting one event after another: once a group has held more than one request, the writer waits
    for the other active senders' requests (a long wait here, so that nothing but their arrival ends it), and
    groups settle at all four, each request answered as stored."""
    grouped = GroupedIngest(store, group_wait=1.0)
    outcomes = _senders_posting(grouped, senders=4, each=10)
    assert sorted((r.stored, r.duplicates, errors) for r, errors in outcomes) == [(1, 0, {})] * 40
    stats = grouped.statistics
    assert stats.requests == 40 and stats.largest == 4, stats
    # The writer waited for the others' requests — unless all four had sent again by the time it looked, every time
    # (thread scheduling decides: then every group holds all four).
    assert stats.gathered > 0 or stats.groups == 10, stats
    assert stats.requests / stats.groups >= 3, stats
    with store.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(tables.events)).scalar_one() == 40


def test_without_the_wait_no_group_waits(store: LineageStore) -> None:
    grouped = GroupedIngest(store, group_wait=0)
    outcomes = _senders_posting(grouped, senders=4, each=5)
    assert sorted(r.stored for r, _errors in outcomes) == [1] * 20
    assert grouped.statistics.gathered == 0


def test_a_lone_sender_never_waits(store: LineageStore) -> None:
    """Groups of one request never make the writer wait, however long the wait may be: one client posting one
    event after another is written at once, each time."""
    grouped = GroupedIngest(store, group_wait=1.0)
    outcomes = _senders_posting(grouped, senders=1, each=20)
    assert [r.stored for r, _errors in outcomes] == [1] * 20
    assert grouped.statistics.gathered == 0 and grouped.statistics.largest == 1


def test_senders_that_stop_stop_being_waited_for() -> None:
    """The senders expected are the most requests in the writer's hands at once in the current window or the one
    before: a burst of eight is remembered a window later, then forgotten; with none for two windows, nobody is
    expected."""
    from airflow_lineage_provider.consumer.ingest.grouped_ingest import SENDERS_WINDOW_SECONDS as W
    from airflow_lineage_provider.consumer.ingest.grouped_ingest import _Senders

    senders = _Senders()
    assert senders.expected(0.0) == 0
    senders.seen(8, 100.0)
    senders.seen(3, 100.0 + 0.5 * W)
    assert senders.expected(100.0 + 0.9 * W) == 8
    assert senders.expected(100.0 + 1.5 * W) == 8  # the window ended: its most still counts
    senders.seen(2, 100.0 + 1.2 * W)  # a new window, after one of eight
    assert senders.expected(100.0 + 1.3 * W) == 8
    assert senders.expected(100.0 + 2.3 * W) == 2  # the window of eight is two windows back
    assert senders.expected(100.0 + 3.3 * W) == 0
    senders.seen(2, 100.0 + 5.0 * W)  # after a silence longer than a window, nothing earlier counts
    assert senders.expected(100.0 + 5.1 * W) == 2
    senders.taken(5)
    assert senders.last == 5


def test_the_wait_is_bounded() -> None:
    with pytest.raises(ValueError, match="group_wait must be between 0 and 1 second, got 2"):
        GroupedIngest(LineageStore("sqlite:///unused.db"), group_wait=2)


def test_the_wait_is_set_by_serve_the_settings_and_the_airflow_option(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_lineage_provider import conf
    from airflow_lineage_provider.cli import main
    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access
    from airflow_lineage_provider.plugins.consumer import consumer_apps

    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    assert create_app(url, anonymous=Access.READ).state.ingest.group_wait == 0.002  # the default: 2 ms
    assert create_app(url, anonymous=Access.READ, ingest_group_wait_ms=0).state.ingest.group_wait == 0
    with pytest.raises(ValueError, match=r"ingest_group_wait_ms must be between 0 \(no wait\) and 1000 .*got -1"):
        create_app(url, anonymous=Access.READ, ingest_group_wait_ms=-1)
    # serve refuses a bad value in one line, before it listens
    assert main(["serve", "--store", url, "--ingest-group-wait-ms", "5000"]) == 2
    assert "ingest_group_wait_ms must be between 0 (no wait) and 1000 milliseconds, got 5000" in capsys.readouterr().err

    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", url)
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_API_KEY", "k3y-plugged")
    assert conf.consumer_ingest_group_wait_ms() == 2.0
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_INGEST_GROUP_WAIT_MS", "0.5")
    [mounted] = consumer_apps()
    assert mounted["app"].state.ingest.group_wait == 0.0005
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_INGEST_GROUP_WAIT_MS", "soon")
    with pytest.raises(ValueError, match="consumer_ingest_group_wait_ms must be a number of milliseconds"):
        conf.consumer_ingest_group_wait_ms()
    assert consumer_apps() == []  # a bad option keeps the consumer unmounted, with one error line
