"""Task processes appending to one SQLite outbox at once: how long an append waits, with the writers' queue and
without it.

Airflow runs tasks side by side, and each appends its events to the same outbox file. SQLite lets one writer
at a time commit; without a queue, a writer that finds the lock taken sleeps in SQLite's busy handler (up to
100 ms a try) while the others take the lock in turn, so an unlucky one can wait out the whole busy timeout
(2 s) and spill. With the queue (``airflow_lineage_provider/sqlite_writers.py``) appenders wait their turn.

``--processes`` processes (8) each append ``--appends`` events (300, ~1 KB each) through
:class:`~airflow_lineage_provider.outbox.writer.OutboxWriter` (what ``OutboxTransport.emit`` calls), started
together, pausing ``--think`` seconds after each append (several values: 0 is a saturated outbox, a few ms
tasks that emit often). Per case: appends/s over all processes, the per-append p50 / p95 / p99 / max, and how
many events were spilled. Each think time runs ``--rounds`` times with the queue on and off in turn
(``LINEAGE_SQLITE_WRITER_QUEUE=off``), each on a fresh outbox in a temporary folder.

A second case, *newcomers*: ``--processes`` processes start together on a new outbox (a burst of tasks; the
first to get there creates it) and append without pause, and ``--newcomers`` processes (4) start one after
another meanwhile, as new tasks do. Each times its first append — connecting, checking the outbox's schema (a
write transaction) and storing one event — and counts what it spilled.

    .venv/bin/python bench/outbox_concurrent_appends.py
    .venv/bin/python bench/outbox_concurrent_appends.py --processes 8 --appends 300 --think 0 0.008 0.02 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from typing import Any

SWITCH = "LINEAGE_SQLITE_WRITER_QUEUE"


def _payload(index: int) -> str:
    return json.dumps(
        {
            "eventType": "START",
            "eventTime": "2026-12-03T00:00:00Z",
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": "bench", "name": f"task_{index}"},
            "inputs": [{"namespace": "postgres://db:5432", "name": "public.orders"}],
            "outputs": [{"namespace": "postgres://db:5432", "name": "public.totals"}],
            "producer": "https://example.com/bench",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "padding": "x" * 600,
        }
    )


def _appender(url: str, appends: int, think: float, start: Any, results: Any) -> None:
    from airflow_lineage_provider.outbox import store
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    writer = OutboxWriter(url)
    writer.append(store.record_from_payload(_payload(-1)))  # connected, schema checked: not timed
    records = [store.record_from_payload(_payload(i)) for i in range(appends)]
    start.wait()
    waits, spilled = [], 0
    for record in records:
        began = time.perf_counter()
        spilled += not writer.append(record)
        waits.append(time.perf_counter() - began)
        if think:
            time.sleep(think)
    results.put((waits, spilled))


def run_case(processes: int, appends: int, think: float, queue: bool) -> dict[str, Any]:
    """One case on a fresh outbox: appends/s, per-append percentiles (ms) and events spilled."""
    os.environ[SWITCH] = "on" if queue else "off"  # read by each forked appender
    folder = tempfile.mkdtemp(prefix="outbox-appends-")
    url = f"sqlite:///{folder}/outbox.db"
    from airflow_lineage_provider.outbox.database import dispose_engines, outbox_engine

    outbox_engine(url)  # created and migrated here, once: only appends are timed (the newcomers case times creation)
    dispose_engines()
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_appender, args=(url, appends, think, start, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    time.sleep(2)  # every appender connected and waiting
    began = time.perf_counter()
    start.set()
    done = [results.get(timeout=600) for _ in workers]
    elapsed = time.perf_counter() - began
    for worker in workers:
        worker.join(timeout=60)
    waits = sorted(wait for one, _spilled in done for wait in one)

    def at(share: float) -> float:
        return waits[min(len(waits) - 1, int(share * len(waits)))] * 1000

    return {
        "queue": queue,
        "think_s": think,
        "appends_per_s": len(waits) / elapsed,
        "p50_ms": statistics.median(waits) * 1000,
        "p95_ms": at(0.95),
        "p99_ms": at(0.99),
        "max_ms": waits[-1] * 1000,
        "spilled": sum(spilled for _one, spilled in done),
        "appends": len(waits),
    }


def _busy_appender(url: str, index: int, seconds: float, results: Any) -> None:
    """Append for ``seconds`` after a timed first append (0: the first append only)."""
    from airflow_lineage_provider.outbox import store
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    record = store.record_from_payload(_payload(index * 10_000))
    began = time.perf_counter()
    writer = OutboxWriter(url)
    first_spilled = not writer.append(record)
    first = time.perf_counter() - began
    spilled, appended, end = int(first_spilled), 1, time.monotonic() + seconds
    while time.monotonic() < end:
        spilled += not writer.append(store.record_from_payload(_payload(index * 10_000 + appended)))
        appended += 1
    results.put((appended, spilled, first, first_spilled))


def run_newcomers(processes: int, newcomers: int, queue: bool) -> dict[str, Any]:
    """``processes`` start together on a new outbox (a burst of tasks: the first creates it) and append
    without pause, and ``newcomers`` start 0.15 s apart meanwhile: each group's first appends' median and
    longest time (ms), and how many first appends (and of all the busy appenders' events) spilled."""
    os.environ[SWITCH] = "on" if queue else "off"
    folder = tempfile.mkdtemp(prefix="outbox-newcomers-")
    url = f"sqlite:///{folder}/outbox.db"
    context = multiprocessing.get_context("fork")
    busy_results, first_results = context.Queue(), context.Queue()
    seconds = 1.0 + 0.15 * newcomers
    busy = [context.Process(target=_busy_appender, args=(url, i, seconds, busy_results)) for i in range(processes)]
    for worker in busy:
        worker.start()
    time.sleep(0.5)  # the busy appenders are appending
    late = []
    for index in range(newcomers):
        late.append(context.Process(target=_busy_appender, args=(url, processes + index, 0.0, first_results)))
        late[-1].start()
        time.sleep(0.15)
    firsts = [first_results.get(timeout=600) for _ in late]
    appended = [busy_results.get(timeout=600) for _ in busy]
    for worker in busy + late:
        worker.join(timeout=60)
    times = sorted(first for _n, _spilled, first, _first_spilled in firsts)
    burst = sorted(first for _n, _spilled, first, _first_spilled in appended)
    return {
        "case": "newcomers",
        "queue": queue,
        "burst_first_p50_ms": statistics.median(burst) * 1000,
        "burst_first_max_ms": burst[-1] * 1000,
        "burst_first_spilled": sum(first_spilled for *_rest, first_spilled in appended),
        "first_append_p50_ms": statistics.median(times) * 1000,
        "first_append_max_ms": times[-1] * 1000,
        "newcomers_spilled": sum(first_spilled for *_rest, first_spilled in firsts),
        "newcomers": newcomers,
        "busy_spilled": sum(spilled for _n, spilled, *_rest in appended),
        "busy_appends": sum(n for n, *_rest in appended),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--appends", type=int, default=300, help="appends per process")
    parser.add_argument(
        "--think",
        type=float,
        nargs="*",
        default=[0.0, 0.008, 0.02],
        help="seconds after each (none: the newcomers case only)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each case, the queue on and off in turn")
    parser.add_argument("--newcomers", type=int, default=4, help="processes starting during the newcomers case")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args()
    rows = []
    for think in args.think:
        for round_ in range(args.rounds):
            for queue in (True, False) if round_ % 2 == 0 else (False, True):
                row = run_case(args.processes, args.appends, think, queue)
                rows.append(row)
                print(json.dumps(row), flush=True)
    newcomer_rows = []
    for round_ in range(args.rounds):
        for queue in (True, False) if round_ % 2 == 0 else (False, True):
            row = run_newcomers(args.processes, args.newcomers, queue)
            newcomer_rows.append(row)
            print(json.dumps(row), flush=True)
    print(
        f"\n{args.processes} processes x {args.appends} appends, one SQLite outbox\n\n"
        "| think between appends | queue | appends/s | p50 / p95 / p99 / max | spilled |\n|---:|---|---:|---:|---:|"
    )
    for row in rows:
        print(
            f"| {row['think_s'] * 1000:g} ms | {'on' if row['queue'] else 'off'} | {row['appends_per_s']:,.0f} "
            f"| {row['p50_ms']:.2f} / {row['p95_ms']:.1f} / {row['p99_ms']:.1f} / {row['max_ms']:.0f} ms "
            f"| {row['spilled']:,} of {row['appends']:,} |"
        )
    print(
        f"\n{args.processes} processes starting together on a new outbox, then {args.newcomers} more while they "
        "append without pause: first appends\n\n"
        "| queue | burst p50 / max | burst spilled | newcomers p50 / max | newcomers spilled | all spilled |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    for row in newcomer_rows:
        print(
            f"| {'on' if row['queue'] else 'off'} "
            f"| {row['burst_first_p50_ms']:.0f} / {row['burst_first_max_ms']:.0f} ms "
            f"| {row['burst_first_spilled']} of {args.processes} "
            f"| {row['first_append_p50_ms']:.0f} / {row['first_append_max_ms']:.0f} ms "
            f"| {row['newcomers_spilled']} of {row['newcomers']} | {row['busy_spilled']:,} of {row['busy_appends']:,} |"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows + newcomer_rows, out, indent=2)


if __name__ == "__main__":
    main()
