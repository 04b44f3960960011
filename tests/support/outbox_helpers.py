"""Helpers for the outbox tests: building events, outbox URLs on real databases, a TCP proxy to stop PostgreSQL."""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import job_type_job


def fill(url: str, events: list[Any]) -> None:
    """Append ``events`` to the outbox at ``url`` through ``OutboxTransport``, as tasks do."""
    from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport

    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    for event in events:
        outbox.emit(event)


def run_event(
    event_type: str = "START",
    run_id: str | None = None,
    job_name: str = "orders.load",
    event_time: str = "2026-03-04T05:06:07.000000+00:00",
    index: int = 0,
) -> RunEvent:
    """A spec-valid RunEvent built with openlineage-python's classes (``index`` makes it distinct)."""
    from airflow_lineage_provider import conf

    producer = conf.producer()
    return RunEvent(
        eventType=RunState[event_type],
        eventTime=event_time,
        run=Run(runId=run_id or str(uuid.uuid4())),
        job=Job(
            namespace="outbox-tests",
            name=job_name,
            facets={"jobType": job_type_job.JobTypeJobFacet("BATCH", "PYTHON", "TASK", producer=producer)},
        ),
        inputs=[InputDataset("postgres://db:5432", f"shop.public.orders_{index}")],
        outputs=[OutputDataset("postgres://db:5432", "shop.public.daily")],
        producer=producer,
    )


def run_pairs(count: int, job_name: str = "orders.load") -> list[RunEvent]:
    """``count`` runs, each a START then a COMPLETE, interleaved as tasks would emit them."""
    events = []
    for index in range(count):
        run_id = str(uuid.uuid4())
        events.append(run_event("START", run_id, job_name, index=index))
        events.append(run_event("COMPLETE", run_id, job_name, "2026-03-04T05:07:07.000000+00:00", index=index))
    return events


def outbox_jobs(url: str) -> list[str]:
    """The job name of every event in the outbox at ``url``, in the order they were stored.

    An outbox whose tables are not there yet holds none: SQLite creates the database file on connect, before the
    first writer's schema transaction commits (or when that writer, a listener fork past its time limit, is killed
    inside it and the transaction rolls back)."""
    import sqlalchemy as sa

    from airflow_lineage_provider.outbox.tables import events

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(events.name):
                return []
            return list(conn.execute(sa.select(events.c.job_name).order_by(events.c.id)).scalars())
    finally:
        engine.dispose()


def assert_per_run_order(received: list[dict[str, Any]]) -> None:
    """Every run's START arrived before its other events (a run with no START at all fails too)."""
    starts: dict[str, int] = {}
    for position, event in enumerate(received):
        if event["eventType"] == "START":
            starts[event["run"]["runId"]] = position
        else:
            assert starts.get(event["run"]["runId"], 10**9) < position, "a COMPLETE arrived before its START"


def sqlite_url(folder: Path, name: str = "outbox.db") -> str:
    return f"sqlite:///{folder / name}"


def pg_url(pg_engine: Any) -> str:
    """An outbox URL on the test PostgreSQL database, inside the fixture's private schema."""
    url = pg_engine.url.set(query={"options": f"-csearch_path={pg_engine.test_schema}"})
    return url.render_as_string(hide_password=False)


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a target; ``stop()`` makes the target unreachable (connections refused
    and existing ones cut), ``start()`` brings it back on the same port."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._listener is not None:
                with contextlib.suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
                self._listener.close()
                self._listener = None
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
