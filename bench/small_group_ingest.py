"""CPU of the ingest for small groups: 1, 2 or 3 events per transaction, in process, no HTTP.

What a single-event ingest server does per request, minus the request: ``LineageStore.write()`` and
:func:`~airflow_lineage_provider.consumer.store.write.ingest.ingest_events` (as ``consumer/ingest/service.py``'s
``write_events``) on a fresh store, a SQLite file and a PostgreSQL schema, with the consumer benchmark's
workload (``consumer_workload.py``) parsed beforehand. Per database and group size it reports CPU time
(``time.process_time``) and wall time per event of the whole write, CPU of ``ingest_events`` alone, and on
PostgreSQL the CPU the server's backend of the writing connection spent per event (``/proc/<pid>/stat``
utime + stime of ``pg_backend_pid()``, before and after: the bench must run on PostgreSQL's machine; clock
ticks of 10 ms, a few percent of a run): the least of ``--repeat`` runs, each on a fresh store (the machine's
noise only ever adds). ``postgres`` is psycopg2, ``psycopg`` psycopg 3; ``--unprepared`` turns psycopg 3's
server-side prepared statements off (``LINEAGE_STORE_PREPARED_STATEMENTS=off``; psycopg2 prepares none).
``--senders N`` orders the events as N concurrent
single-event senders splitting the jobs among them would deliver them (one event of each sender in turn), so a
group of N holds N different jobs' events, as the server's groups do; without it a group holds consecutive
events (a job's START and COMPLETE together, which share their rows within the transaction and cost less).

    .venv/bin/python bench/small_group_ingest.py                       # this checkout
    PYTHONPATH=/tmp/before .venv/bin/python bench/small_group_ingest.py  # another checkout (A/B)
    .venv/bin/python bench/small_group_ingest.py --jobs 300 --groups 1 3 --databases sqlite
    .venv/bin/python bench/small_group_ingest.py --databases postgres psycopg --unprepared
    .venv/bin/python bench/small_group_ingest.py --groups 8 --senders 8   # the groups 8 concurrent clients make
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from consumer_bench import postgres_schema  # noqa: E402
from consumer_workload import split_by_job, workload  # noqa: E402

import airflow_lineage_provider  # noqa: E402
from airflow_lineage_provider.consumer.store import LineageStore  # noqa: E402
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events  # noqa: E402
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event  # noqa: E402


@contextmanager
def store_url(database: str) -> Iterator[str]:
    """A fresh store's URL: a SQLite file in a temporary folder, or a private PostgreSQL schema (``postgres``:
    psycopg2, ``psycopg``: psycopg 3)."""
    if database == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{folder}/lineage.db"
    else:
        with postgres_schema() as url:
            yield url if database == "postgres" else url.replace("postgresql+psycopg2://", "postgresql+psycopg://")


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) the process ``pid`` (a PostgreSQL backend on this machine) has spent."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def _backend_pid(conn: Any) -> int | None:
    return int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()) if conn.dialect.name != "sqlite" else None


def run(database: str, events: list[LineageEvent], group: int, prepared: bool = True) -> dict[str, float]:
    """Ingest ``events`` ``group`` at a time into a fresh store; µs per event (CPU, wall, ``ingest_events`` CPU,
    and the PostgreSQL backend's CPU)."""
    with store_url(database) as url:
        if not prepared:  # read when the engine is created
            os.environ["LINEAGE_STORE_PREPARED_STATEMENTS"] = "off"
        store = LineageStore(url, ingest_apply="inline")  # no applier thread taking a pooled connection too
        try:
            with store.write() as conn:  # migrated and warm: the statements built, one connection pooled
                ingest_events(conn, events[:1])
                pid = _backend_pid(conn)
            rest = events[1:]
            inside = 0.0
            server = backend_cpu(pid) if pid is not None else 0.0
            cpu, wall = time.process_time(), time.perf_counter()
            for start in range(0, len(rest), group):
                with store.write() as conn:
                    before = time.process_time()
                    ingest_events(conn, rest[start : start + group])
                    inside += time.process_time() - before
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            server = backend_cpu(pid) - server if pid is not None else 0.0
            with store.read() as conn:  # the one connection wrote every group: its backend's CPU is theirs
                assert _backend_pid(conn) == pid
        finally:
            store.dispose()
    per = 1e6 / len(rest)
    return {"cpu": cpu * per, "wall": wall * per, "ingest": inside * per, "backend": server * per}


def as_senders_deliver(events: list[LineageEvent], senders: int) -> list[LineageEvent]:
    """``events`` in the order ``senders`` concurrent senders deliver them when each job's events go to one sender
    (:func:`consumer_workload.split_by_job`, as ``single_event_ingest.py`` splits them) and every sender sends its
    next event once all have sent the one before: round-robin over the senders, a job's events in their order."""
    shares = split_by_job(events, senders, lambda event: str(event.job))
    longest = max(len(share) for share in shares)
    return [share[i] for i in range(longest) for share in shares if i < len(share)]


def main(argv: list[str] | None = None) -> None:
    """Print a table: database, group size, µs per event."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=400, help="workload jobs (2 events each)")
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument(
        "--databases", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres", "psycopg"]
    )
    parser.add_argument("--repeat", type=int, default=3, help="fresh stores per figure; the least of each is shown")
    parser.add_argument("--unprepared", action="store_true", help="psycopg 3 without server-side prepared statements")
    parser.add_argument("--senders", type=int, default=0, help="order the events as this many senders deliver them")
    args = parser.parse_args(argv)
    events = [parse_event(document) for document in workload(args.jobs)]
    if args.senders > 0:
        events = as_senders_deliver(events, args.senders)
    order = f", as {args.senders} senders deliver them" if args.senders > 0 else ""
    print(f"code: {Path(airflow_lineage_provider.__file__).parent.parent}; {len(events)} events{order}")
    print(
        f"{'database':<9} {'group':>5} {'CPU µs/ev':>10} {'wall µs/ev':>11} {'ingest_events CPU µs/ev':>24}"
        f" {'backend CPU µs/ev':>18}"
    )
    for database in args.databases:
        for group in args.groups:
            runs = [run(database, events, group, prepared=not args.unprepared) for _ in range(args.repeat)]
            figures: dict[str, Any] = {name: min(one[name] for one in runs) for name in runs[0]}
            backend = f"{figures['backend']:>18.0f}" if database != "sqlite" else f"{'':>18}"
            print(
                f"{database:<9} {group:>5} {figures['cpu']:>10.0f} {figures['wall']:>11.0f} {figures['ingest']:>24.0f}"
                f" {backend}"
            )


if __name__ == "__main__":
    main()
