"""Deferred apply within bounds: batches sized by the rows they write, an ingest log that pushes back when full, an
event too slow to apply set aside, and memory that stays bounded under wide events.

On real SQLite and PostgreSQL, and against real ``airflow-lineage serve`` processes on 127.0.0.1 (PostgreSQL: the
statement timeout, a lock held by another session, a trigger that sleeps, and the memory of the server and its
backends read from ``/proc/<pid>/status``). Nothing is timed: each test waits for a condition, with a deadline.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
import sqlalchemy as sa
from support.consumer_helpers import dataset, run_event
from support.environment import PG_URL, postgres_schema_url, require_postgres
from support.served import Served, serve_consumer
from support.waiting import wait_until

from airflow_lineage_provider.consumer.ingest.service import requeue_unapplied, write_events
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.operations.retention import statistics
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.deferred_apply import ApplyBounds, DeferredApply
from airflow_lineage_provider.consumer.store.write.ingest import event_rows, log_events
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

pytest_plugins = ("support.consumer_fixtures",)


def _narrow(job: str) -> LineageEvent:
    return parse_event(run_event("COMPLETE", job, inputs=[dataset(f"{job}_in")], outputs=[dataset(f"{job}_out")]))


def _wide(job: str, width: int) -> LineageEvent:
    inputs = [dataset(f"{job}_in_{i}") for i in range(width)]
    outputs = [dataset(f"{job}_out_{i}") for i in range(width)]
    return parse_event(run_event("COMPLETE", job, inputs=inputs, outputs=outputs))


def _jobs(store: LineageStore) -> set[str]:
    with store.read() as conn:
        n = tables.nodes.c
        return set(conn.execute(sa.select(n.name).where(n.kind == "job")).scalars())


def test_event_rows_count_the_datasets_an_event_names_and_their_column_lineage() -> None:
    assert event_rows(_narrow("a")) == 3  # the job and run, one input, one output
    assert event_rows(_wide("w", 50)) == 101
    columns = {"id": [("warehouse", "src", "id"), ("warehouse", "src2", "key")]}
    with_lineage = parse_event(run_event("COMPLETE", "c", outputs=[dataset("dst", fields=["id"], columns=columns)]))
    assert event_rows(with_lineage) == 2 + 2


def test_batches_are_sized_by_the_rows_they_write_and_a_wide_event_goes_alone(store_url: str) -> None:
    """Narrow events fill a batch up to the row bound; a wide event past it is applied alone, and the narrow
    events logged after it are not held back by it."""
    store = LineageStore(store_url, ingest_apply="inline")  # logs only through log_events: no applier of its own
    try:
        with store.write() as conn:
            log_events(conn, [_narrow("n1"), _narrow("n2"), _narrow("n3")])
        with store.write() as conn:
            log_events(conn, [_wide("wide", 60)])  # 121 rows
        with store.write() as conn:
            log_events(conn, [_narrow("n4"), _narrow("n5"), _narrow("n6"), _narrow("n7")])
        applier = DeferredApply(store, ApplyBounds(batch_rows=10))  # 3 narrow events: 9 rows
        sizes = []
        while done := applier._apply_batch():
            sizes.append(done)
        assert sizes == [3, 1, 3, 1]
        assert _jobs(store) == {"n1", "n2", "n3", "wide", "n4", "n5", "n6", "n7"}
        assert (applier.statistics.events, applier.statistics.largest, applier.statistics.unapplied) == (8, 3, 0)
        with store.write() as conn:
            log_events(conn, [_narrow(f"b{i}") for i in range(4)])
        by_bytes = DeferredApply(store, ApplyBounds(batch_bytes=1))  # any event is past it: each goes alone
        sizes = []
        while done := by_bytes._apply_batch():
            sizes.append(done)
        assert sizes == [1, 1, 1, 1]
    finally:
        store.dispose()


def test_a_group_of_requests_is_written_in_transactions_bounded_in_bytes_too() -> None:
    """The ingest log's own writes: a group of requests is cut into transactions of at most so many events and so
    many bytes of raw events, a request larger than that alone."""
    from airflow_lineage_provider.consumer.ingest.grouped_ingest import _parts, _Request

    wide, narrow = _wide("w", 100), _narrow("n")
    requests_ = [_Request([narrow]), _Request([wide]), _Request([narrow, narrow]), _Request([wide, wide])]
    most = len(wide.payload) + 2 * len(narrow.payload)
    assert [[len(r.events) for r in part] for part in _parts(requests_, 500, most)] == [[1, 1], [2], [2]]
    assert [[len(r.events) for r in part] for part in _parts(requests_, 500, 10**9)] == [[1, 1, 2, 2]]


def test_an_apply_past_its_time_bound_sets_its_events_aside_to_be_requeued(store_url: str) -> None:
    """With a time bound no apply can meet, the batch is applied again event by event and each event, too slow
    alone, is set aside with the reason; a requeue with the usual bound applies them."""
    store = LineageStore(store_url, ingest_apply="deferred", apply_bounds=ApplyBounds(apply_timeout=1e-6))
    try:
        write_events(store, [_narrow("slow1"), _narrow("slow2")])
        assert _jobs(store) == set()  # the read waited for the applier: both set aside
        with store.read() as conn:
            held = statistics(conn)
            reasons = conn.execute(sa.select(tables.unapplied_events.c.reason)).scalars().all()
        assert (held.pending, held.unapplied) == (0, 2)
        assert all("took longer than 1e-06 s (ingest_apply_timeout_seconds)" in reason for reason in reasons)
        assert store.deferred is not None and store.deferred.statistics.timed_out == 2
    finally:
        store.dispose()
    usual = LineageStore(store_url, ingest_apply="deferred")
    try:
        done, left = requeue_unapplied(usual)
        assert (done.requeued, left) == (2, 0)
        assert _jobs(usual) == {"slow1", "slow2"}
    finally:
        usual.dispose()


def _post(url: str, event: dict[str, Any]) -> requests.Response:
    return requests.post(f"{url}/api/v1/lineage", json=event, timeout=120)


@pytest.mark.postgres
def test_a_full_ingest_log_answers_503_with_retry_after_and_takes_ingests_again_once_drained(tmp_path: Path) -> None:
    """Another session holds the graph's nodes locked, so the applier cannot apply: the log fills to its bound
    (3 events), the next ingests are answered 503 with Retry-After and stored nowhere; once the lock goes, the log
    drains and ingests are accepted again, and every event answered 201 is in the graph."""
    with postgres_schema_url() as url:
        options = ("--ingest-apply", "deferred", "--ingest-log-max-events", "3")
        with serve_consumer(url, tmp_path, *options) as served:
            holder = sa.create_engine(url).connect()
            try:
                holder.exec_driver_sql("LOCK TABLE lineage_nodes IN EXCLUSIVE MODE")  # reads go on, writes wait
                answers = [_post(served.url, run_event("COMPLETE", f"job{i}")) for i in range(5)]
                assert [answer.status_code for answer in answers] == [201, 201, 201, 503, 503]
                refused = answers[3]
                assert refused.headers["Retry-After"] == "1"
                assert "ingest log is full" in refused.json()["detail"]
            finally:
                holder.rollback()
                holder.close()
            for i in (3, 4):  # sent again, as a sender told to retry does
                event = run_event("COMPLETE", f"job{i}")
                wait_until(
                    lambda event=event: _post(served.url, event).status_code == 201,
                    "an ingest accepted again",
                    timeout=60,
                    interval=0.1,
                )
            listed = requests.get(f"{served.url}/api/v1/namespaces/pipelines/jobs", timeout=120).json()["jobs"]
            assert {job["name"] for job in listed} == {f"job{i}" for i in range(5)}
            held = requests.get(f"{served.url}/api/v1/retention", timeout=120).json()["statistics"]
            assert (held["pendingEvents"], held["unappliedEvents"]) == (0, 0)


@pytest.mark.postgres
def test_an_event_stuck_in_the_database_is_set_aside_and_the_log_behind_it_applied(tmp_path: Path) -> None:
    """A trigger makes one event's apply sleep a minute (an apply that never ends, as far as readers can tell):
    past the apply time bound (2 s) its statement is cancelled and the event set aside with the reason; the events
    logged after it are applied, and reads are answered meanwhile instead of waiting 30 s for a 503. Once the
    trigger is gone, a requeue applies it."""
    with postgres_schema_url() as url:
        options = ("--ingest-apply", "deferred", "--ingest-apply-timeout", "2")
        with serve_consumer(url, tmp_path, *options) as served:
            engine = sa.create_engine(url)
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(
                        "CREATE FUNCTION stuck() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                        " IF NEW.name = 'stuck' THEN PERFORM pg_sleep(60); END IF; RETURN NEW; END $$"
                    )
                    conn.exec_driver_sql(
                        "CREATE TRIGGER stuck BEFORE INSERT ON lineage_nodes FOR EACH ROW EXECUTE FUNCTION stuck()"
                    )
                for name in ("stuck", "after1", "after2"):
                    assert _post(served.url, run_event("COMPLETE", name)).status_code == 201
                read = requests.get(f"{served.url}/api/v1/namespaces/pipelines/jobs", timeout=120)
                assert read.status_code == 200
                assert {job["name"] for job in read.json()["jobs"]} == {"after1", "after2"}
                listed = requests.get(f"{served.url}/api/v1/ingest-log/unapplied", timeout=120).json()
                [row] = listed["unapplied"]
                assert row["jobName"] == "stuck"
                assert "took longer than 2 s (ingest_apply_timeout_seconds)" in row["reason"]
                with engine.begin() as conn:
                    conn.exec_driver_sql("DROP TRIGGER stuck ON lineage_nodes")
                again = requests.post(f"{served.url}/api/v1/ingest-log/unapplied/requeue", timeout=120).json()
                assert again == {"requeued": 1, "gone": 0, "unapplied": 0}
                jobs = requests.get(f"{served.url}/api/v1/namespaces/pipelines/jobs", timeout=120).json()["jobs"]
                assert {job["name"] for job in jobs} == {"stuck", "after1", "after2"}
            finally:
                engine.dispose()


#: Inputs, and outputs, of each event of the wide load.
WIDTH = 2000
#: What the server process and one PostgreSQL backend may reach while the wide load is applied (a backend's is
#: over its share of shared_buffers, which it counts as it touches them). Before the bounds, one batch of such
#: events took gigabytes on both.
SERVER_MB = 600
BACKEND_MB = 300


def _memory_mb(pid: int) -> tuple[float, float]:
    """``(VmRSS, VmHWM)`` of ``pid`` in MB; zeros once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0, 0.0
    found = dict(line.split(":", 1) for line in status.splitlines() if line.startswith(("VmRSS", "VmHWM")))
    rss, hwm = (int(found.get(key, "0 kB").split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    return rss, hwm


def _wide_body(sender: int, number: int) -> bytes:
    """A RunEvent of :data:`WIDTH` inputs and outputs, every name new (built by hand: 4,000 datasets through
    openlineage-python's classes take longer than the load)."""
    tag = f"{sender}_{number}_{uuid.uuid4().hex[:6]}"
    event = {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(timezone.utc).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "load", "name": f"wide_{sender}"},
        "inputs": [{"namespace": "warehouse", "name": f"in_{tag}_{i}"} for i in range(WIDTH)],
        "outputs": [{"namespace": "warehouse", "name": f"out_{tag}_{i}"} for i in range(WIDTH)],
        "producer": "https://github.com/acme/airflow-lineage-provider/tests",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    return json.dumps(event).encode()


class _Memory:
    """The most memory the server (``pid``) and its backends (``application_name``) were seen holding."""

    def __init__(self, application: str) -> None:
        self.application = application
        self.pid = 0
        self.server = self.backend = 0.0
        self.backends_seen: set[int] = set()
        self._engine = sa.create_engine(PG_URL, pool_size=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def sample(self) -> None:
        with self._engine.connect() as conn:
            pids = conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %(name)s", {"name": self.application}
            ).scalars()
            for pid in pids:
                self.backends_seen.add(pid)
                self.backend = max(self.backend, *_memory_mb(pid))
        if self.pid:
            self.server = max(self.server, _memory_mb(self.pid)[1])

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()

    @contextmanager
    def watching(self, served: Served) -> Iterator[_Memory]:
        self.pid = served.pid
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            self.sample()

    def close(self) -> None:
        self._engine.dispose()


def _pending(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(tables.pending_events)).scalar() or 0)


def _send_wide(url: str, sender: int, until: float, answers: Counter[int], lock: threading.Lock) -> None:
    session = requests.Session()
    number = 0
    while time.monotonic() < until:
        number += 1
        headers = {"Content-Type": "application/json"}
        code = session.post(f"{url}/api/v1/lineage", data=_wide_body(sender, number), headers=headers, timeout=120)
        with lock:
            answers[code.status_code] += 1
        if code.status_code == 503:
            assert "Retry-After" in code.headers
            time.sleep(0.5)  # a real pause before trying again, as a client told to retry does


@pytest.mark.postgres
def test_wide_events_against_a_real_server_stay_in_bounded_memory_and_drain_after_a_kill(tmp_path: Path) -> None:
    """Three senders post events of 2,000 inputs and 2,000 outputs (new names every time) to ``airflow-lineage
    serve`` on PostgreSQL for a few seconds: the server and every backend it uses stay under the stated bound, reads
    are answered, and the log drains. Killed with SIGKILL while the log still holds events, the server started again
    drains what it left, within the same bounds."""
    require_postgres()
    with postgres_schema_url() as base:
        application = f"alp_bounds_{uuid.uuid4().hex[:8]}"
        url = f"{base}&application_name={application}"
        engine = sa.create_engine(base)
        memory = _Memory(application)
        try:
            answers: Counter[int] = Counter()
            with serve_consumer(url, tmp_path / "first", "--ingest-apply", "deferred") as served:
                with memory.watching(served):
                    lock = threading.Lock()
                    until = time.monotonic() + 6
                    senders = [
                        threading.Thread(target=_send_wide, args=(served.url, n, until, answers, lock))
                        for n in range(3)
                    ]
                    for sender in senders:
                        sender.start()
                    read = requests.get(f"{served.url}/api/v1/namespaces", timeout=120)
                    for sender in senders:
                        sender.join()
                    assert read.status_code == 200
                    assert answers[201] >= 3 and set(answers) <= {201, 503}, answers
                    left = _pending(engine)
                    served.process.kill()  # SIGKILL: nothing applied at shutdown
                    served.process.wait()
            first = (memory.server, memory.backend)
            with engine.connect() as conn:  # a killed client's backend lingers until it next writes to it
                conn.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %(name)s",
                    {"name": application},
                )
            memory.server = memory.backend = 0.0
            with serve_consumer(url, tmp_path / "again", "--ingest-apply", "deferred") as again:
                with memory.watching(again):
                    applied = f"the {left} events left by the killed server applied"
                    wait_until(lambda: _pending(engine) == 0, applied, timeout=300, interval=0.1)
            with engine.connect() as conn:
                stored = conn.execute(sa.select(sa.func.count()).select_from(tables.events)).scalar()
                applied = conn.execute(sa.select(sa.func.count()).select_from(tables.runs)).scalar()
                reasons = conn.execute(sa.select(tables.unapplied_events.c.reason)).scalars().all()
            # Every event answered 201 is stored, and applied once — or, on a machine too loaded to apply 4,000
            # datasets within the 10 s bound alone, set aside as too slow (requeueable): nothing is lost.
            assert stored == answers[201]
            assert applied + len(reasons) == answers[201], (applied, reasons)
            assert all("took longer than 10 s (ingest_apply_timeout_seconds)" in reason for reason in reasons), reasons
            assert memory.backends_seen, "no backend of the server was seen"
            for server_mb, backend_mb in (first, (memory.server, memory.backend)):
                assert server_mb < SERVER_MB, f"the server reached {server_mb:.0f} MB"
                assert backend_mb < _shared_buffers_mb(engine) + BACKEND_MB, f"a backend reached {backend_mb:.0f} MB"
        finally:
            memory.close()
            engine.dispose()


def _shared_buffers_mb(engine: sa.Engine) -> float:
    with engine.connect() as conn:
        return float(conn.exec_driver_sql("SELECT pg_size_bytes(current_setting('shared_buffers'))").scalar()) / 2**20


# -- back-pressure before the body is read -------------------------------------------------------------------------


def _counted_full(applier: DeferredApply, fresh: bool = True) -> None:
    """Make ``applier``'s own count say the log is full (``fresh``: looked at just now, so nothing looks again)."""
    with applier._changed:
        applier._backlog = [applier.bounds.max_pending_events, 0]
        applier._looked_at = time.monotonic() + (3600 if fresh else -3600)


def test_a_full_log_refuses_an_ingest_before_its_body_is_read_audited_and_naming_no_count(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """While the process counts the log full, an ingest is answered 503 before its body is read: a body that is not
    JSON, or one declared larger than any body taken, gets the 503 rather than its 400 or 413. The answer names the
    settings, not what the store holds, and the refusal is audited."""
    import logging

    from fastapi.testclient import TestClient

    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access, ApiKey

    key = ApiKey("producers", Access.WRITE, "producer-s3cret")
    app = create_app(store_url=store_url, ingest_apply="deferred", keys=(key,))
    headers = {"X-API-Key": "producer-s3cret", "Content-Type": "application/json"}
    caplog.set_level(logging.INFO, logger="airflow_lineage_provider.consumer.security.audit")
    try:
        with TestClient(app) as client:
            applier = app.state.store.deferred
            _counted_full(applier)
            for path in ("/api/v1/lineage", "/api/v1/lineage/batch"):
                answer = client.post(path, content=b"not json at all", headers=headers)
                assert answer.status_code == 503, answer.text
                assert answer.headers["Retry-After"] == "1"
                detail = answer.json()["detail"]
                assert "ingest log is full" in detail and "ingest_log_max_events" in detail
                assert not any(char.isdigit() for char in detail.split("retry in")[0]), detail
            huge = {**headers, "Content-Length": str(app.state.settings.max_body_bytes + 1)}
            answer = client.post("/api/v1/lineage", content=b"{}", headers=huge)
            assert answer.status_code == 503, answer.text
            assert (
                "lineage audit: ingest by key 'producers' refused (the ingest log is full); nothing stored -> 503"
                in caplog.messages
            )
            assert applier.statistics.refused_ingests == 3
            assert _jobs(app.state.store) == set()
            with applier._changed:
                applier._backlog = [0, 0]
            assert (
                client.post("/api/v1/lineage", json=run_event("COMPLETE", "taken"), headers=headers).status_code == 201
            )
            assert _jobs(app.state.store) == {"taken"}
    finally:
        app.state.store.dispose()


def test_a_count_of_the_log_found_stale_is_looked_at_again_so_ingests_are_not_refused_for_ever(store_url: str) -> None:
    """The count says full but is older than a look (another process applied what this one counted): the request is
    refused by the count, and a look in the background corrects it, so the requests that follow are taken."""
    store = LineageStore(store_url, ingest_apply="deferred")
    try:
        applier = store.deferred
        assert applier is not None
        assert store.engine is not None  # opened: a look finds an empty log
        _counted_full(applier, fresh=False)
        from airflow_lineage_provider.consumer.store.write.deferred_apply import IngestBacklog

        with applier._changed, pytest.raises(IngestBacklog):  # the look waits for the lock: refused by the count
            applier.check_room()
        wait_until(lambda: applier._backlog[0] == 0, "the stale count corrected by a look", timeout=60, interval=0.1)
        applier.check_room()
    finally:
        store.dispose()


def test_a_group_taken_while_the_log_is_full_decodes_none_of_its_bodies(store_url: str) -> None:
    """The grouped ingest's exact check comes before any body of the group is decoded."""
    import asyncio

    from airflow_lineage_provider.consumer.ingest.grouped_ingest import GroupedIngest
    from airflow_lineage_provider.consumer.store.write.deferred_apply import IngestBacklog

    store = LineageStore(store_url, ingest_apply="deferred")
    try:
        assert store.deferred is not None
        assert store.engine is not None
        _counted_full(store.deferred)
        decoded: list[int] = []

        def prepare() -> list[LineageEvent]:
            decoded.append(1)
            return [_narrow("never")]

        with pytest.raises(IngestBacklog):
            asyncio.run(GroupedIngest(store).submit(prepare, 100))
        assert decoded == []
    finally:
        store.dispose()


def test_a_group_holds_at_most_so_many_bytes_of_bodies_to_decode() -> None:
    """Requests whose bodies are not decoded yet count by their bytes too: a group never decodes more than
    MAX_GROUP_BYTES of bodies at once (at least one request)."""
    from airflow_lineage_provider.consumer.ingest.grouped_ingest import MAX_GROUP_BYTES, GroupedIngest, _Request

    grouped = GroupedIngest(LineageStore("sqlite://"))
    half = MAX_GROUP_BYTES // 2
    grouped._pending.extend(
        _Request(prepare=list, size=size) for size in (half, half, half + 1, 10, MAX_GROUP_BYTES * 2, 10)
    )
    groups = []
    while grouped._pending:
        groups.append([request.size for request in grouped._take()])
    assert groups == [[half, half], [half + 1, 10], [MAX_GROUP_BYTES * 2], [10]]


def _sleepy_trigger(engine: sa.Engine, condition: str, seconds: float) -> None:
    """Make inserting a job's node whose name matches ``condition`` sleep ``seconds`` in the database."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE FUNCTION sleepy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF NEW.kind = 'job' AND NEW.name {condition} THEN PERFORM pg_sleep({seconds}); END IF;"
            " RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER sleepy BEFORE INSERT ON lineage_nodes FOR EACH ROW EXECUTE FUNCTION sleepy()"
        )


# -- a batch past the time bound -----------------------------------------------------------------------------------


def test_retries_of_a_batch_past_the_bound_stop_within_the_read_wait_and_later_batches_take_fewer_rows(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No read waits longer for the retries of a batch than a read waits at all: with no read wait left after the
    first retry, the other events stay in the log, and the next batches take half the rows of the one too slow —
    here one event each, too slow alone at once (no second attempt)."""
    from airflow_lineage_provider.consumer.store.write import deferred_apply

    monkeypatch.setattr(deferred_apply, "READ_WAIT_SECONDS", 0.0)
    store = LineageStore(store_url, ingest_apply="inline")  # no applier of its own
    try:
        with store.write() as conn:
            log_events(conn, [_narrow("s1"), _narrow("s2"), _narrow("s3")])  # 9 rows
        applier = DeferredApply(store, ApplyBounds(apply_timeout=1e-6))
        sizes = []
        while done := applier._apply_batch():
            sizes.append(done)
        assert sizes == [1, 1, 1]
        assert applier._batch_rows < 9
        stats = applier.statistics
        assert (stats.split, stats.timed_out, stats.unapplied) == (3, 3, 3)
        with store.read() as conn:
            assert statistics(conn).pending == 0
    finally:
        store.dispose()


@pytest.mark.postgres
def test_events_each_within_the_bound_are_applied_after_their_batch_ran_past_it(pg_store_url: str) -> None:
    """Three events whose apply takes 1.2 s each (a trigger sleeps) make a batch of 3.6 s, past a 3 s bound: each
    applied alone is within it, so all three are applied and none set aside; the next batches take fewer rows."""
    store = LineageStore(pg_store_url, ingest_apply="inline")
    engine = sa.create_engine(pg_store_url)
    try:
        assert store.engine is not None
        _sleepy_trigger(engine, "IN ('sleepy1', 'sleepy2', 'sleepy3')", 1.2)
        with store.write() as conn:
            log_events(conn, [_narrow("sleepy1"), _narrow("sleepy2"), _narrow("sleepy3")])
        applier = DeferredApply(store, ApplyBounds(apply_timeout=3))
        assert applier._apply_batch() == 3
        assert _jobs(store) == {"sleepy1", "sleepy2", "sleepy3"}
        stats = applier.statistics
        assert (stats.split, stats.timed_out, stats.unapplied) == (1, 0, 0)
        assert applier._batch_rows < ApplyBounds().batch_rows
    finally:
        engine.dispose()
        store.dispose()


@pytest.mark.postgres
def test_an_event_past_the_bound_for_waiting_on_another_writers_lock_is_not_set_aside(pg_store_url: str) -> None:
    """An event whose apply takes 3 s (a trigger sleeps) waits 1.4 s for another session's lock on the nodes (less
    than the lock timeout, half of the 4 s bound): 4.4 s, past the bound. It is tried again alone with the graph
    (every other writer held off, the bound started once that lock is held), where it takes its 3 s: applied, not
    set aside as too slow."""
    store = LineageStore(pg_store_url, ingest_apply="inline")
    engine = sa.create_engine(pg_store_url)
    holder = engine.connect()
    try:
        assert store.engine is not None
        _sleepy_trigger(engine, "= 'waited'", 3)
        with store.write() as conn:
            log_events(conn, [parse_event(run_event("COMPLETE", "waited"))])
        applier = DeferredApply(store, ApplyBounds(apply_timeout=4))
        holder.exec_driver_sql("LOCK TABLE lineage_nodes IN EXCLUSIVE MODE")  # reads go on, writes wait
        done: list[int] = []
        applying = threading.Thread(target=lambda: done.append(applier._apply_batch()))
        applying.start()

        def waiting() -> bool:
            with engine.connect() as conn:
                return bool(
                    conn.exec_driver_sql(
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'lineage_nodes'::regclass"
                    ).scalar()
                )

        wait_until(waiting, "the applier waiting for the nodes lock", timeout=60, interval=0.1)
        time.sleep(1.4)  # a real gap: what the apply waits, less than its lock timeout (2 s)
        holder.rollback()
        applying.join(120)
        assert done == [1]
        assert _jobs(store) == {"waited"}
        stats = applier.statistics
        assert (stats.split, stats.timed_out, stats.unapplied) == (1, 0, 0)
    finally:
        holder.close()
        engine.dispose()
        store.dispose()


# -- what the applier keeps parsed ---------------------------------------------------------------------------------


def test_events_kept_parsed_that_another_applier_applied_are_forgotten(store_url: str) -> None:
    """Another process's applier applied events this one keeps parsed (it logged them, or read them for a batch that
    had no room): once this one sees the log hold fewer rows than a batch takes, it keeps only those still pending,
    so stale events neither fill its room nor make it apply at once."""
    store = LineageStore(store_url, ingest_apply="inline")
    try:
        events = [_narrow(f"k{i}") for i in range(10)]
        with store.write() as conn:
            log_events(conn, events)
        this = DeferredApply(store, ApplyBounds(batch_events=5))
        with this._changed:
            this._hand(events)
        assert this._due()  # ten kept: more than a batch
        other = DeferredApply(store, ApplyBounds(batch_events=6))
        assert other._apply_batch() == 6
        with store.engine.connect() as conn, conn.begin():
            pending = set(conn.execute(sa.select(tables.pending_events.c.event_key)).scalars())
            this._take(conn)  # rolled back: only what it keeps is looked at
        assert len(pending) == 4 and set(this._handed) == pending
        assert not this._due()
        assert this._apply_batch() == 4 and this._handed == {}
    finally:
        store.dispose()


def test_an_event_kept_parsed_whose_raw_event_went_is_not_applied(store_url: str) -> None:
    """A pending event whose raw event was deleted under it (a reset racing the log) is not applied from what this
    process keeps parsed: its log row just goes."""
    store = LineageStore(store_url, ingest_apply="inline")
    try:
        gone = _narrow("gone")
        with store.write() as conn:
            log_events(conn, [gone])
            conn.execute(sa.delete(tables.events).where(tables.events.c.event_key == gone.key))
        applier = DeferredApply(store)
        with applier._changed:
            applier._hand([gone])
        assert applier._apply_batch() == 1
        assert _jobs(store) == set()
        with store.read() as conn:
            assert (statistics(conn).pending, statistics(conn).unapplied) == (0, 0)
    finally:
        store.dispose()
