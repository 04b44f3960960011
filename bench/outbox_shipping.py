"""Shipping and export throughput of the outbox: events per second to a loopback consumer and to files.

An SQLite outbox is filled with ``--events`` events (START/COMPLETE pairs built with openlineage-python,
stored through ``OutboxTransport``'s own append path), then delivered by each case as a new destination
(so every case ships the same backlog):

* ``batched``          - ``Shipper`` with ``--batch-size`` events per ``POST .../batch``;
* ``one POST per event`` - ``Shipper`` against a consumer without a batch endpoint (what the stock HTTP
                           transport does, one request per event);
* ``export``           - ``Exporter`` writing NDJSON files partitioned by date/hour;
* ``export, gzip``     - the same, ``.ndjson.gz``.

The consumer is a threaded HTTP server in this process on 127.0.0.1 that parses every request's JSON (the
test consumer of tests/support/consumer_server.py): it shares the 2 cores with the shipper.

Run: ``.venv/bin/python bench/outbox_shipping.py [--events 100000] [--batch-size 500]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def fill(url: str, count: int) -> float:
    """Store ``count`` events through the transport; return the seconds it took."""
    from support.outbox_helpers import run_event

    from airflow_lineage_provider.outbox import OutboxConfig, OutboxTransport

    outbox = OutboxTransport(OutboxConfig.from_dict({"url": url}))
    started = time.perf_counter()
    for index in range(count // 2):
        run_id = str(uuid.uuid4())
        outbox.emit(run_event("START", run_id, index=index))
        outbox.emit(run_event("COMPLETE", run_id, event_time="2026-03-04T06:07:07+00:00", index=index))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=500)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="alp-bench-ship-"))
    os.environ["AIRFLOW_HOME"] = str(workdir / "airflow")
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    from support.consumer_server import ConsumerServer

    from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig
    from airflow_lineage_provider.outbox.export import Exporter
    from airflow_lineage_provider.outbox.shipper import DeliveryPolicy, Shipper
    from airflow_lineage_provider.outbox.writer import OutboxWriter

    url = f"sqlite:///{workdir / 'outbox.db'}"
    filled = fill(url, args.events)
    print(f"  filled {args.events} events in {filled:.1f}s ({args.events / filled:,.0f}/s)", file=sys.stderr)
    writer = OutboxWriter(url)
    from airflow.sdk import ObjectStoragePath  # noqa: F401 - imported before the clock starts, as in a running DAG

    rows: list[tuple[str, int, float, int]] = []

    for name, batch_endpoint in (("batched", True), ("one POST per event", False)):
        with ConsumerServer() as consumer:
            consumer.batch_endpoint = batch_endpoint
            shipper = Shipper(writer, name, ConsumerConfig.from_dict({"url": consumer.url}),
                              DeliveryPolicy(batch_size=args.batch_size))  # fmt: skip
            started = time.perf_counter()
            report = shipper.ship()
            elapsed = time.perf_counter() - started
            assert report.delivered == args.events == len(consumer.events), report
            rows.append((name, report.delivered, elapsed, report.requests))
            print(f"  {name}: {report.delivered / elapsed:,.0f} events/s", file=sys.stderr)
    for name, compress in (("export", False), ("export, gzip", True)):
        exporter = Exporter(writer, str(workdir / name.replace(", ", "-")), name=name, compress=compress)
        started = time.perf_counter()
        exported = exporter.export()
        elapsed = time.perf_counter() - started
        assert exported.exported == args.events, exported
        rows.append((name, exported.exported, elapsed, exported.files))
        print(f"  {name}: {exported.exported / elapsed:,.0f} events/s", file=sys.stderr)

    single = next(r for r in rows if r[0] == "one POST per event")
    print(f"\n{args.events:,} events in an SQLite outbox (filled through the transport at {args.events / filled:,.0f} "
          f"events/s); batch size {args.batch_size}.\n")  # fmt: skip
    print("| case | events | seconds | events/s | requests or files | vs one POST per event |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, count, elapsed, requests in rows:
        ratio = (count / elapsed) / (single[1] / single[2])
        print(f"| {name} | {count:,} | {elapsed:.1f} | {count / elapsed:,.0f} | {requests:,} | {ratio:.1f}x |")


if __name__ == "__main__":
    main()
