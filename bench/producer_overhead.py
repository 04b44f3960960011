"""What a task pays per ``lineage_run`` block (START + COMPLETE), against the same code without lineage and
against the same two events built and sent by hand.

Cases, each on the same workload (insert 10 rows into a local SQLite table), all through the same transport
in the same process (``--transport outbox``, the default: this package's SQLite outbox; or ``file``):

* ``no lineage``          - the workload alone (the floor);
* ``openlineage-python by hand`` - the same two events ``lineage_run`` sends (same datasets, ``jobType``
                            facet and producer) built with ``event_v2`` and sent with ``OpenLineageClient``
                            (what a user would write);
* ``stock api.emit by hand`` - those hand-built events through ``airflow.providers.openlineage.api.emit``
                            (the stock provider's route: secret redaction, metrics and a log line);
* ``lineage_run``         - ``lineage_run``, no connector (OpenLineage is configured for Airflow, so it
                            goes to the listener's client, redacted as the stock route would);
* ``+ SQLite schema``     - with ``connector=`` a SQLite engine: two tables looked up on COMPLETE;
* ``+ PostgreSQL schema`` - with ``connector=`` a PostgreSQL engine on 127.0.0.1 (skipped if unreachable).

The machine is noisy (2 shared cores): the cases are interleaved, ``--rounds`` rounds of
``blocks / rounds`` blocks each (A/B/C/A/B/C...), and every ratio comes from the same run.

Run: ``.venv/bin/python bench/producer_overhead.py [--blocks 2000] [--rounds 20] [--transport outbox]
[--sqlite-synchronous OFF]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

WORK_ROWS = [(i, i * 1.5) for i in range(10)]


def _workload(engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO sink (n, v) VALUES (?, ?)", WORK_ROWS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--transport", choices=["outbox", "file"], default="outbox")
    parser.add_argument(
        "--sqlite-synchronous",
        choices=["OFF", "NORMAL", "FULL"],
        default="OFF",
        help="the outbox's sqlite_synchronous (default OFF: every case but 'no lineage' pays the same transport, "
        "and NORMAL's fsync per append, about 0.7 ms on the CI disk, would bury the differences being measured)",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="what a block's time is: wall time (default), or this process's CPU time (all its threads), which a "
        "machine loaded by other processes disturbs far less (waits on the disk and for a core are left out)",
    )
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    workdir = Path(tempfile.mkdtemp(prefix="alp-bench-"))
    os.environ["AIRFLOW_HOME"] = str(workdir / "airflow")
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # no log line per event in any case
    if args.transport == "file":
        os.environ.update(
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "file",
                "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(workdir / "events.ndjson"),
                "OPENLINEAGE__TRANSPORT__APPEND": "true",
            }
        )
    else:
        os.environ.update(
            {
                "OPENLINEAGE__TRANSPORT__TYPE": "airflow_lineage_provider.outbox.OutboxTransport",
                "OPENLINEAGE__TRANSPORT__URL": f"sqlite:///{workdir / 'outbox.db'}",
                "OPENLINEAGE__TRANSPORT__SQLITE_SYNCHRONOUS": args.sqlite_synchronous,
            }
        )
    import logging

    logging.disable(logging.INFO)  # the stock adapter logs every emission at INFO; measure the work, not the log
    import sqlalchemy as sa
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import job_type_job
    from openlineage.client.uuid import generate_new_uuid

    from airflow_lineage_provider import conf, lineage_run

    engine = sa.create_engine(f"sqlite:///{workdir / 'warehouse.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE sink (n INTEGER, v REAL)")
        conn.exec_driver_sql("CREATE TABLE source (id INTEGER PRIMARY KEY, label TEXT, amount NUMERIC(10, 2))")

    client = OpenLineageClient()
    producer = conf.producer()

    def hand_event(state: RunState, run_id: str) -> RunEvent:
        """The event lineage_run sends for this block, built by hand."""
        job_type = job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="PYTHON", jobType="TASK", producer=producer
        )
        return RunEvent(
            eventType=state,
            eventTime=datetime.now(timezone.utc).isoformat(),
            run=Run(runId=run_id, facets={}),
            job=Job(namespace="default", name="bench.job", facets={"jobType": job_type}),
            inputs=[InputDataset("default", "main/source")],
            outputs=[OutputDataset("default", "main/sink")],
            producer=producer,
        )

    def by_hand() -> None:
        run_id = str(generate_new_uuid())
        client.emit(hand_event(RunState.START, run_id))
        _workload(engine)
        client.emit(hand_event(RunState.COMPLETE, run_id))

    def through_stock_api() -> None:
        from airflow.providers.openlineage.api import emit

        run_id = str(generate_new_uuid())
        emit(hand_event(RunState.START, run_id))
        _workload(engine)
        emit(hand_event(RunState.COMPLETE, run_id))

    def with_lineage(connector=None, prefix="main") -> Callable[[], None]:
        def body() -> None:
            with lineage_run("bench.job", inputs=[f"{prefix}/source"], outputs=[f"{prefix}/sink"], connector=connector):
                _workload(engine)

        return body

    cases: list[tuple[str, Callable[[], None]]] = [
        ("no lineage", lambda: _workload(engine)),
        ("openlineage-python by hand", by_hand),
        ("stock provider api.emit by hand", through_stock_api),
        ("lineage_run", with_lineage()),
        ("lineage_run + SQLite schema lookup", with_lineage({"main": engine})),
    ]
    pg_url = os.environ.get("LINEAGE_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
    try:
        pg = sa.create_engine(pg_url)
        with pg.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS alp_bench_source (id INTEGER, label TEXT)")
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS alp_bench_sink (n INTEGER, v REAL)")
        cases.append(("lineage_run + PostgreSQL schema lookup", lambda: _pg_body(lineage_run, pg, engine)))
    except Exception as error:  # no PostgreSQL here: the other cases still stand
        print(f"(PostgreSQL case skipped: {error})")

    for _name, body in cases:  # warm-up: imports, client creation, connection pools
        for _ in range(50):
            body()
    samples: dict[str, list[float]] = {name: [] for name, _ in cases}
    per_round = max(1, args.blocks // args.rounds)
    for _ in range(args.rounds):  # interleaved: every case sees the same machine noise
        for name, body in cases:
            for _ in range(per_round):
                start = clock()
                body()
                samples[name].append(clock() - start)

    results = [(name, statistics.median(s), statistics.quantiles(s, n=20)[-1]) for name, s in samples.items()]
    floor = results[0][1]
    by_hand_cost = results[1][1] - floor
    stock_cost = results[2][1] - floor
    print(
        f"\n{per_round * args.rounds} blocks per case in {args.rounds} interleaved rounds, {args.transport} transport"
        + (f" (sqlite_synchronous={args.sqlite_synchronous})" if args.transport == "outbox" else "")
        + f"; median and p95 {'CPU' if args.clock == 'cpu' else 'wall'} time per block\n"
    )
    print(
        "| case | median / block | p95 / block | lineage cost over no lineage | block time vs no lineage "
        "| lineage cost vs by hand (client / stock api) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, median, p95 in results:
        cost = median - floor
        vs = f"{cost / by_hand_cost:.2f}x / {cost / stock_cost:.2f}x" if name != "no lineage" else "-"
        print(
            f"| {name} | {median * 1e6:,.0f} µs | {p95 * 1e6:,.0f} µs | {cost * 1e6:,.0f} µs "
            f"| {median / floor:.2f}x | {vs} |"
        )


def _pg_body(lineage_run, pg, engine) -> None:
    with lineage_run("bench.job", inputs=["pg/alp_bench_source"], outputs=["pg/alp_bench_sink"], connector={"pg": pg}):
        _workload(engine)


if __name__ == "__main__":
    main()
