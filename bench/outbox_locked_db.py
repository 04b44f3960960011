"""What ``emit`` costs a task while its outbox cannot take events.

``tests/test_outbox_transport.py`` checks the behaviour: against an SQLite outbox another process holds
locked, or a PostgreSQL outbox that cannot be reached, the first event tries the database once (bounded by
``timeout``), the following ones go straight to the spill folder without trying it for ``retry_after``
seconds, none is lost and all drain into the outbox in order. This benchmark measures the time, per case:

* ``SQLite, locked``: another connection holds ``BEGIN EXCLUSIVE`` on the outbox file (a shipper or a
  second writer stuck mid-transaction); ``timeout`` as given (SQLite's busy timeout);
* ``SQLite, locked by a queued writer``: another process holds its turn in the writers' queue and SQLite's write
  lock; the turn and the busy timeout share one deadline, so the first emit waits ``timeout``, not twice that;
* ``PostgreSQL, unreachable``: the outbox's connections go through a TCP proxy on 127.0.0.1 that is then
  stopped (connections refused); ``timeout`` is the connect timeout (skipped without a server);
* ``SQLite, healthy``: the same emits into a free outbox, for comparison.

Each round builds a fresh outbox, emits one event while it is healthy, makes it unusable, then times
``--events`` emits (START/COMPLETE pairs) one by one: the first (which tries the database) and the rest
(which spill). Medians over ``--rounds`` rounds; one process, the rounds of the cases interleaved.

    .venv/bin/python bench/outbox_locked_db.py                      # ~1 minute
    .venv/bin/python bench/outbox_locked_db.py --timeout 2.0 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.outbox_helpers import TcpProxy, run_event, run_pairs  # noqa: E402

from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport  # noqa: E402
from airflow_lineage_provider.outbox.database import dispose_engines  # noqa: E402

PG_URL = os.environ.get("LINEAGE_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
TRANSPORT = "airflow_lineage_provider.outbox.OutboxTransport"
#: A case: given a folder and the options, yields a transport whose outbox cannot take events (or can).
Case = Callable[[Path, dict[str, Any]], Any]


def _transport(url: str, folder: Path, options: dict[str, Any]) -> OutboxTransport:
    config = {"type": TRANSPORT, "url": url, "spill_dir": str(folder / "spill"), **options}
    return OutboxTransport(OutboxConfig.from_dict(config))


@contextmanager
def sqlite_locked(folder: Path, options: dict[str, Any]) -> Iterator[OutboxTransport]:
    outbox = _transport(f"sqlite:///{folder / 'outbox.db'}", folder, options)
    outbox.emit(run_event(job_name="before"))
    blocker = sqlite3.connect(folder / "outbox.db", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        yield outbox
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


#: Another process: takes its turn in the writers' queue of the database argv[1] and SQLite's write lock, says
#: "held", and holds both until its standard input closes.
QUEUED_HOLDER = (
    "import sqlite3, sys\n"
    "from airflow_lineage_provider.sqlite_writers import writers_of\n"
    "with writers_of(sys.argv[1]).turn(60):\n"
    "    locked = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "    locked.execute('BEGIN IMMEDIATE')\n"
    "    print('held', flush=True)\n"
    "    sys.stdin.read()\n"
)


@contextmanager
def sqlite_locked_by_a_queued_writer(folder: Path, options: dict[str, Any]) -> Iterator[OutboxTransport]:
    outbox = _transport(f"sqlite:///{folder / 'outbox.db'}", folder, options)
    outbox.emit(run_event(job_name="before"))
    command = [sys.executable, "-c", QUEUED_HOLDER, str(folder / "outbox.db")]
    holder = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield outbox
    finally:
        holder.communicate("", timeout=60)


@contextmanager
def sqlite_healthy(folder: Path, options: dict[str, Any]) -> Iterator[OutboxTransport]:
    outbox = _transport(f"sqlite:///{folder / 'outbox.db'}", folder, options)
    outbox.emit(run_event(job_name="before"))
    yield outbox


@contextmanager
def postgres_unreachable(folder: Path, options: dict[str, Any]) -> Iterator[OutboxTransport]:
    import sqlalchemy as sa

    schema = f"alp_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    port = admin.url.port or 5432
    proxy = TcpProxy(port).start()
    url = admin.url.set(port=proxy.port, query={"options": f"-csearch_path={schema}"})
    try:
        outbox = _transport(url.render_as_string(hide_password=False), folder, options)
        outbox.emit(run_event(job_name="before"))
        proxy.stop()
        yield outbox
    finally:
        proxy.stop()
        dispose_engines()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def _postgres_reachable() -> bool:
    import sqlalchemy as sa

    engine = sa.create_engine(PG_URL, connect_args={"connect_timeout": 2})
    try:
        with engine.connect():
            return True
    except Exception:
        return False
    finally:
        engine.dispose()


def one_round(case: Case, options: dict[str, Any], events: int) -> tuple[float, list[float]]:
    """Milliseconds of the first emit and of each later one, against a fresh outbox of ``case``."""
    with tempfile.TemporaryDirectory(prefix="alp-locked-") as tmp, case(Path(tmp), options) as outbox:
        times = []
        for event in run_pairs(events // 2, job_name="during"):
            started = time.perf_counter()
            outbox.emit(event)
            times.append((time.perf_counter() - started) * 1000)
        outbox.close(0)
    dispose_engines()
    return times[0], times[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10, help="emits timed per round (START/COMPLETE pairs)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=0.2, help="the transport's timeout option, seconds")
    args = parser.parse_args()
    options = {"timeout": args.timeout, "retry_after": 30}
    cases: dict[str, Case] = {
        "SQLite, healthy": sqlite_healthy,
        "SQLite, locked": sqlite_locked,
        "SQLite, locked by a queued writer": sqlite_locked_by_a_queued_writer,
    }
    if _postgres_reachable():
        cases["PostgreSQL, unreachable"] = postgres_unreachable
    found: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for _ in range(args.rounds):
        for name, case in cases.items():
            first, rest = one_round(case, options, args.events)
            found[name][0].append(first)
            found[name][1].extend(rest)
    print(f"timeout={args.timeout} s, {args.events} emits per round, {args.rounds} rounds")
    print()
    print("| outbox | first emit, median | later emits, median / p95 | all emits of a round, median |")
    print("|---|---:|---:|---:|")
    for name, (firsts, rests) in found.items():
        p95 = statistics.quantiles(rests, n=20)[18]
        per_round = [
            first + sum(rests[i * (args.events - 1) : (i + 1) * (args.events - 1)]) for i, first in enumerate(firsts)
        ]
        print(
            f"| {name} | {statistics.median(firsts):.2f} ms | {statistics.median(rests):.3f} / {p95:.3f} ms "
            f"| {statistics.median(per_round):.1f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
