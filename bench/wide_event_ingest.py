"""Storing one very wide event: 1,000 inputs x 1,000 outputs (a million input-output pairs), and 100 x 100.

The store keeps one io group per distinct (job, inputs, outputs) instead of the pairs, so the time is linear
in inputs + outputs; ``tests/test_consumer_pairs.py`` checks the rows and the number of statements, this
measures the time. Each repeat ingests the event into a fresh store (a new SQLite file; PostgreSQL reset),
in one write transaction, as ``POST /api/v1/lineage`` does. PostgreSQL at 127.0.0.1:5432, a private schema
per repeat (dropped afterwards).

    .venv/bin/python bench/wide_event_ingest.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.consumer_helpers import dataset, run_event
from support.environment import postgres_schema_url

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event


def _wide(width: int) -> object:
    inputs = [dataset(f"in_{i}") for i in range(width)]
    outputs = [dataset(f"out_{i}") for i in range(width)]
    return parse_event(run_event("COMPLETE", "wide", inputs=inputs, outputs=outputs))


def _timed(url: str, event: object) -> float:
    store = LineageStore(url)
    store.engine  # noqa: B018 - tables created outside the timing
    started = time.perf_counter()
    with store.write() as conn:
        ingest_events(conn, [event])  # type: ignore[list-item]
    took = time.perf_counter() - started
    store.dispose()
    return took


def _time_ingest(backend: str, width: int, repeats: int, workdir: Path) -> list[float]:
    event = _wide(width)
    times = []
    for repeat in range(repeats):
        if backend == "sqlite":
            times.append(_timed(f"sqlite:///{workdir / f'wide-{width}-{repeat}.db'}", event))
        else:
            with postgres_schema_url() as url:
                times.append(_timed(url, event))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="alp-bench-wide-"))
    print("| store | event | median | min | max |")
    print("|---|---|---:|---:|---:|")
    for backend in ("sqlite", "postgres"):
        for width in (100, 1000):
            times = _time_ingest(backend, width, args.repeats, workdir)
            shown = [f"{value * 1000:,.0f} ms" for value in (statistics.median(times), min(times), max(times))]
            print(f"| {backend} | {width:,} x {width:,} | {' | '.join(shown)} |", flush=True)


if __name__ == "__main__":
    main()
