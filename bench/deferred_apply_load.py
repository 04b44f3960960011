"""Wide events against a real ``airflow-lineage serve`` on PostgreSQL with deferred apply: bounded or not?

Senders post events of ``--width`` inputs and as many outputs, new dataset names in every event, for
``--seconds``; a reader reads through the read barrier every second meanwhile. What is recorded: the answers
(201, 503 ...), the ingest log's length, the serving process's VmRSS/VmHWM and those of its PostgreSQL backends
(found in ``pg_stat_activity`` by an ``application_name`` of their own) from ``/proc/<pid>/status``, and how long
the log takes to drain once the senders stop. ``--restart`` kills the server with SIGKILL as the senders stop and
starts it again on the same store, then measures the drain of what it left. ``--tree DIR`` serves the package
from another checkout (to compare with the code before a change); ``--first-tree DIR`` only the server that is
killed (a log left by the code before a change, drained by this one). PostgreSQL at 127.0.0.1:5432, a private schema
(dropped afterwards); run as root, or as PostgreSQL's user, to read its backends' memory.

    .venv/bin/python bench/deferred_apply_load.py [--senders 3] [--seconds 25] [--width 2000] [--restart]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import requests
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.environment import PG_URL, postgres_schema_url
from support.feast_consumer import free_port
from support.served import Served, serve_consumer


def memory_kb(pid: int) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of process ``pid`` in kB; (0, 0) once it is gone or unreadable."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    found = dict(line.split(":", 1) for line in status.splitlines() if line.startswith(("VmRSS", "VmHWM")))
    return int(found.get("VmRSS", "0 kB").split()[0]), int(found.get("VmHWM", "0 kB").split()[0])


def wide_event(sender: int, number: int, width: int) -> bytes:
    """A RunEvent of ``width`` inputs and ``width`` outputs, all named anew."""
    tag = f"{sender}_{number}_{uuid.uuid4().hex[:6]}"
    event = {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(timezone.utc).isoformat(),
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "bench", "name": f"wide_{sender}"},
        "inputs": [{"namespace": "warehouse", "name": f"in_{tag}_{i}"} for i in range(width)],
        "outputs": [{"namespace": "warehouse", "name": f"out_{tag}_{i}"} for i in range(width)],
        "producer": "https://github.com/acme/airflow-lineage-provider/bench",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    }
    return json.dumps(event).encode()


@dataclass
class Load:
    """What a run saw."""

    answers: Counter[int] = field(default_factory=Counter)
    retry_after: set[str] = field(default_factory=set)
    reads: Counter[int] = field(default_factory=Counter)
    slowest_read: float = 0.0
    most_pending: int = 0
    server_kb: int = 0
    backend_kb: int = 0
    backend_hwm_kb: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)


class Watch:
    """Samples the server's and its backends' memory and the log's length every ``every`` seconds."""

    def __init__(self, store_url: str, schema: str, application: str, load: Load, every: float = 0.5) -> None:
        self.engine = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT", pool_size=1)
        self.schema, self.application, self.load, self.every = schema, application, load, every
        self.pid = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.engine.dispose()

    def pending(self) -> tuple[int, int]:
        with self.engine.connect() as conn:
            pending = conn.exec_driver_sql(f"SELECT count(*) FROM {self.schema}.lineage_pending_events").scalar()
            unapplied = conn.exec_driver_sql(f"SELECT count(*) FROM {self.schema}.lineage_unapplied_events").scalar()
        return int(pending or 0), int(unapplied or 0)

    def sample(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            pids = conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %(name)s", {"name": self.application}
            ).scalars()
            backends = {pid: memory_kb(pid) for pid in pids}
        pending, unapplied = self.pending()
        server = memory_kb(self.pid) if self.pid else (0, 0)
        load = self.load
        load.most_pending = max(load.most_pending, pending)
        load.server_kb = max(load.server_kb, server[1])
        if backends:
            load.backend_kb = max(load.backend_kb, max(rss for rss, _hwm in backends.values()))
            load.backend_hwm_kb = max(load.backend_hwm_kb, max(hwm for _rss, hwm in backends.values()))
        row = {"pending": pending, "unapplied": unapplied, "server_rss_kb": server[0], "backends": backends}
        load.samples.append(row)
        return row

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with suppress(sa.exc.SQLAlchemyError):  # the schema may be gone at the very end
                self.sample()


def send(url: str, sender: int, width: int, until: float, load: Load, lock: threading.Lock) -> None:
    session = requests.Session()
    number = 0
    while time.monotonic() < until:
        number += 1
        body = wide_event(sender, number, width)
        try:
            answer = session.post(
                f"{url}/api/v1/lineage", data=body, headers={"Content-Type": "application/json"}, timeout=120
            )
            code = answer.status_code
        except requests.RequestException:
            code = 0
            answer = None
        with lock:
            load.answers[code] += 1
            if answer is not None and code == 503 and "Retry-After" in answer.headers:
                load.retry_after.add(answer.headers["Retry-After"])
        if code == 503:
            time.sleep(0.5)  # keeps the pressure on (a polite sender waits Retry-After)


def read(url: str, until: float, load: Load) -> None:
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            code = requests.get(f"{url}/api/v1/namespaces", timeout=120).status_code
        except requests.RequestException:
            code = 0
        load.reads[code] += 1
        load.slowest_read = max(load.slowest_read, time.monotonic() - started)
        time.sleep(1.0)


@contextmanager
def serve_unready(store: str, folder: Path, tree: Path | None) -> Iterator[Served]:
    """``airflow-lineage serve`` as :func:`support.served.serve_consumer` starts it, ready once it answers
    ``/openapi.json``: a read of the graph waits for the log it has to drain first."""
    port = free_port()
    command = [str(Path(sys.executable).parent / "airflow-lineage"), "serve", "--store", store, "--port", str(port)]
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    with open(folder / "serve.log", "a") as log:
        process = subprocess.Popen([*command, "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, env=env)
        served = Served(f"http://127.0.0.1:{port}", process, folder / "serve.log")
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if requests.get(f"{served.url}/openapi.json", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"airflow-lineage serve did not start: see {served.log}")
                time.sleep(0.2)
            yield served
        finally:
            process.terminate()
            process.wait(timeout=60)


def drain(watch: Watch, timeout: float) -> float | None:
    """Seconds until the log is empty (None: not within ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if watch.pending()[0] == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    application = f"alp_load_{uuid.uuid4().hex[:8]}"
    folder = Path(tempfile.mkdtemp(prefix="alp-apply-load-"))
    tree = Path(args.tree) if args.tree else None
    report: dict[str, Any] = {}
    with postgres_schema_url() as url:
        schema = url.rsplit("%3D", 1)[1]
        store = f"{url}&application_name={application}"
        load = Load()
        first = Path(args.first_tree) if args.first_tree else tree
        with serve_consumer(store, folder / "first", *args.serve_option, tree=first) as served:
            with Watch(store, schema, application, load) as watch:
                watch.pid = served.pid
                until = time.monotonic() + args.seconds
                lock = threading.Lock()
                senders = [
                    threading.Thread(target=send, args=(served.url, n, args.width, until, load, lock))
                    for n in range(args.senders)
                ]
                reader = threading.Thread(target=read, args=(served.url, until, load))
                for thread in (*senders, reader):
                    thread.start()
                for thread in senders:
                    thread.join()
                report["pending_at_stop"], _ = watch.pending()
                if args.restart:
                    served.process.kill()
                    served.process.wait()
                    with watch.engine.connect() as conn:  # a backend notices its client is gone only when it answers
                        conn.exec_driver_sql(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %(n)s",
                            {"n": application},
                        )
                    report["killed_with_pending"] = watch.pending()[0]
                reader.join()
                report["answers"] = dict(load.answers)
                report["retry_after"] = sorted(load.retry_after)
                report["reads"] = dict(load.reads)
                report["slowest_read_s"] = round(load.slowest_read, 1)
                if not args.restart:
                    seconds = drain(watch, args.drain_timeout)
                    report["drained_s"] = None if seconds is None else round(seconds, 1)
                report["pending_after"], report["unapplied"] = watch.pending()
                report["most_pending"] = load.most_pending
                report["server_hwm_mb"] = round(load.server_kb / 1024)
                report["backend_rss_mb"] = round(load.backend_kb / 1024)
                report["backend_hwm_mb"] = round(load.backend_hwm_kb / 1024)
        if args.restart:
            again = Load()
            with serve_unready(store, folder / "again", tree) as served:  # its applier starts as it opens the store
                with Watch(store, schema, application, again) as watch:
                    watch.pid = served.pid
                    seconds = drain(watch, args.drain_timeout)
                    watch.sample()
                    report["restart"] = {
                        "drained_s": None if seconds is None else round(seconds, 1),
                        "pending_after": watch.pending()[0],
                        "unapplied": watch.pending()[1],
                        "server_hwm_mb": round(again.server_kb / 1024),
                        "backend_rss_mb": round(again.backend_kb / 1024),
                        "backend_hwm_mb": round(again.backend_hwm_kb / 1024),
                    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--senders", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=25.0)
    parser.add_argument("--width", type=int, default=2000, help="inputs, and outputs, of every event")
    parser.add_argument("--restart", action="store_true", help="SIGKILL the server as the senders stop, restart it")
    parser.add_argument("--drain-timeout", type=float, default=300.0, metavar="SECONDS")
    parser.add_argument("--tree", metavar="DIR", help="serve the package from this checkout")
    parser.add_argument("--first-tree", metavar="DIR", help="the same for the server killed by --restart only")
    parser.add_argument("--serve-option", action="append", default=[], help="passed to airflow-lineage serve")
    args = parser.parse_args()
    print(json.dumps(run(args), indent=2), flush=True)


if __name__ == "__main__":
    main()
