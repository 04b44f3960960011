"""What a task pays per ``lineage_run`` block (START + COMPLETE), against the same code without lineage.

Cases, each run ``--blocks`` times on the same workload (insert 10 rows into a local SQLite table):

* ``no lineage``          - the workload alone (the floor);
* ``openlineage-python``  - the same two events built by hand with ``event_v2`` and sent with
                            ``OpenLineageClient`` through the file transport (what a user would write);
* ``stock api.emit``      - the same hand-built events through ``airflow.providers.openlineage.api.emit``
                            (the stock provider's route, which ``lineage_run`` takes when OpenLineage is
                            configured for Airflow: it adds secret redaction and logging);
* ``lineage_run``         - ``lineage_run`` with the file transport, no connector;
* ``+ sqlite schema``     - with ``connector=`` a SQLite engine: two tables looked up on COMPLETE;
* ``+ postgres schema``   - with ``connector=`` a PostgreSQL engine on 127.0.0.1 (skipped if unreachable).

Run: ``.venv/bin/python bench/producer_overhead.py [--blocks 2000]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

WORK_ROWS = [(i, i * 1.5) for i in range(10)]


def _workload(engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO sink (n, v) VALUES (?, ?)", WORK_ROWS)


def _timed(blocks: int, body: Callable[[], None]) -> list[float]:
    for _ in range(min(50, blocks)):  # warm-up: imports, client creation, connection pools
        body()
    samples = []
    for _ in range(blocks):
        start = time.perf_counter()
        body()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2000)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="alp-bench-"))
    os.environ["AIRFLOW_HOME"] = str(workdir / "airflow")
    os.environ.update(
        {
            "OPENLINEAGE__TRANSPORT__TYPE": "file",
            "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(workdir / "events.ndjson"),
            "OPENLINEAGE__TRANSPORT__APPEND": "true",
        }
    )
    import logging

    logging.disable(logging.INFO)  # the stock adapter logs every emission at INFO; measure the work, not the log
    import sqlalchemy as sa
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.uuid import generate_new_uuid

    from airflow_lineage_provider import lineage_run

    engine = sa.create_engine(f"sqlite:///{workdir / 'warehouse.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE sink (n INTEGER, v REAL)")
        conn.exec_driver_sql("CREATE TABLE source (id INTEGER PRIMARY KEY, label TEXT, amount NUMERIC(10, 2))")

    client = OpenLineageClient()

    def by_hand() -> None:
        run_id = str(generate_new_uuid())
        now = lambda: time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())  # noqa: E731
        io = {"inputs": [InputDataset("default", "main/source")], "outputs": [OutputDataset("default", "main/sink")]}
        client.emit(RunEvent(eventType=RunState.START, eventTime=now(), run=Run(run_id), job=Job("default", "j"), **io))
        _workload(engine)
        client.emit(
            RunEvent(eventType=RunState.COMPLETE, eventTime=now(), run=Run(run_id), job=Job("default", "j"), **io)
        )

    def through_stock_api() -> None:
        from airflow.providers.openlineage.api import emit

        run_id = str(generate_new_uuid())
        now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        io = {"inputs": [InputDataset("default", "main/source")], "outputs": [OutputDataset("default", "main/sink")]}
        emit(RunEvent(eventType=RunState.START, eventTime=now, run=Run(run_id), job=Job("default", "j"), **io))
        _workload(engine)
        emit(RunEvent(eventType=RunState.COMPLETE, eventTime=now, run=Run(run_id), job=Job("default", "j"), **io))

    def with_lineage(connector=None, prefix="main") -> Callable[[], None]:
        def body() -> None:
            with lineage_run("bench.job", inputs=[f"{prefix}/source"], outputs=[f"{prefix}/sink"], connector=connector):
                _workload(engine)

        return body

    cases: list[tuple[str, Callable[[], None]]] = [
        ("no lineage", lambda: _workload(engine)),
        ("openlineage-python by hand", by_hand),
        ("stock provider api.emit by hand", through_stock_api),
        ("lineage_run (file transport)", with_lineage()),
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

    results = []
    for name, body in cases:
        samples = _timed(args.blocks, body)
        results.append((name, statistics.median(samples), statistics.quantiles(samples, n=20)[-1]))
    floor = results[0][1]
    by_hand_cost = results[1][1] - floor
    print(f"\n{args.blocks} blocks per case; median and p95 wall time per block\n")
    stock_cost = results[2][1] - floor
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
