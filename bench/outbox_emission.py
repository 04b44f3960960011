"""What a task pays to emit lineage: the outbox against the stock HTTP transport, healthy and with the consumer down.

Each case runs ``lineage_run`` blocks (a START and a COMPLETE each, no connector, an empty body) in this
process, with OpenLineage configured the way a user would (``OPENLINEAGE__TRANSPORT__*``, so the events go
through the stock provider's listener client, as in a task):

* ``noop``                - openlineage-python's ``noop`` transport: everything but the transport (the
                            floor that "the transport's share of a block" is measured from);
* ``null``                - a transport whose ``emit`` does nothing: what the client does for any real
                            transport (``noop`` returns before it), so ``share - null share`` is the
                            transport's own;
* ``outbox, SQLite, NORMAL`` - ``OutboxTransport`` on a local SQLite file as configured by default
                            (``sqlite_synchronous=NORMAL``: an fsync per append, survives a crashed
                            machine, not only a crashed process);
* ``outbox, SQLite, OFF`` - the same with ``sqlite_synchronous=OFF`` (opt in: survives a crashed process);
* ``outbox, durability=process`` - ``OutboxTransport`` with ``durability=process`` (opt in): one ``write`` to
                            this process's spill file per event, no fsync, moved into the SQLite outbox
                            later (survives a crashed process); the move is timed apart, after the rounds
                            (``close()``: what a shipper does with those files);
* ``outbox, PostgreSQL``  - ``OutboxTransport`` on PostgreSQL at 127.0.0.1:5432 (skipped if unreachable);
* ``http, healthy``       - the stock ``http`` transport posting to the fastest loopback consumer there is:
                            a threaded HTTP server in this process on 127.0.0.1 that reads the body and
                            answers 201 at once (no parsing, nothing stored).

These cases are interleaved (``--rounds`` rounds of ``blocks / rounds`` blocks each, A/B/C/A/B/C...: the
machine is noisy) and reported as ratios to ``http, healthy`` from the same run, measured two ways:

* in the transport: the time inside the transport's ``emit`` per event (median);
* the transport's share of a block: the block's median minus the ``noop`` block's median, per event.

Then, not interleaved: ``http, healthy (airflow-lineage serve)`` (this package's own consumer in its own
process, SQLite store: a real consumer next to Airflow) and ``http, consumer down`` (nothing listening:
the stock transport's retries make each event wait seconds, so only ``--down-blocks`` blocks).

Run: ``.venv/bin/python bench/outbox_emission.py [--blocks 1000] [--rounds 10] [--down-blocks 3]``; prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from openlineage.client.transport.transport import Transport

REPO = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("LINEAGE_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
OUTBOX = "airflow_lineage_provider.outbox.OutboxTransport"


def configure(transport: dict[str, str]) -> None:
    from airflow_lineage_provider.producer import client

    for key in [k for k in os.environ if k.startswith("OPENLINEAGE__")]:
        del os.environ[key]
    for key, value in transport.items():
        os.environ[f"OPENLINEAGE__TRANSPORT__{key.upper()}"] = value
    client.reset()


TRANSPORT_TIME: list[float] = []


class NullTransport:
    """A transport that takes each event and does nothing: the openlineage-python client's full path to a
    transport, which the ``noop`` transport skips (the client returns before calling it)."""

    kind = "null"

    def __init__(self, config: object) -> None:
        self.config = config

    def emit(self, event: object) -> None:
        return None

    def close(self, timeout: float = -1) -> bool:
        return True


def _null_transport_class() -> type[Transport]:
    from openlineage.client.transport.transport import Config, Transport

    return cast("type[Transport]", type("NullTransport", (NullTransport, Transport), {"config_class": Config}))


NULL = _null_transport_class()


#: The clock every figure is taken with (``--clock``).
CLOCK: list[Callable[[], float]] = [time.perf_counter]


def time_transports() -> None:
    """Wrap the transports' ``emit`` so the time spent inside them is measured apart from the rest."""
    from openlineage.client.transport.http import HttpTransport
    from openlineage.client.transport.noop import NoopTransport

    from airflow_lineage_provider.outbox.transport import OutboxTransport

    for cls in (HttpTransport, OutboxTransport, NoopTransport, NULL):
        original = cls.emit

        def timed(self: object, event: object, _original=original) -> object:
            started = CLOCK[0]()
            try:
                return _original(self, event)
            finally:
                TRANSPORT_TIME.append(CLOCK[0]() - started)

        cls.emit = timed  # type: ignore[method-assign]


def run_blocks(blocks: int) -> list[float]:
    from airflow_lineage_provider import lineage_run

    samples = []
    for index in range(blocks):
        started = CLOCK[0]()
        with lineage_run("bench.load", inputs=[f"raw/orders_{index}"], outputs=["main/orders"]):
            pass
        samples.append(CLOCK[0]() - started)
    return samples


class _Answer201(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real consumer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def fast_responder() -> Iterator[str]:
    """A threaded HTTP server in this process on 127.0.0.1 that reads each body and answers 201 at once."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer201)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def postgres_url() -> str | None:
    import sqlalchemy as sa

    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=2):
            pass
    except OSError:
        return None
    engine = sa.create_engine(PG_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS alp_bench_outbox CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA alp_bench_outbox")
    engine.dispose()
    return sa.make_url(PG_URL).set(query={"options": "-csearch_path=alp_bench_outbox"}).render_as_string(False)


@contextlib.contextmanager
def served_consumer(workdir: Path) -> Iterator[str]:
    """This package's consumer (``airflow-lineage serve``, SQLite store) in its own process on 127.0.0.1."""
    import requests

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [str(Path(sys.executable).parent / "airflow-lineage"), "serve", "--port", str(port)]
    command += ["--store", f"sqlite:///{workdir / 'consumer.db'}", "--log-level", "warning"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                requests.get(f"{url}/api/v1/namespaces", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def move_journal(outbox: Path, expected: int) -> str:
    """Move the ``durability=process`` case's spill files into its outbox, as a shipper would, and check
    that every event emitted (warm-ups included) arrived; the time and count, as text."""
    import sqlalchemy as sa

    from airflow_lineage_provider.outbox.writer import OutboxWriter

    writer = OutboxWriter(f"sqlite:///{outbox}")
    started = time.perf_counter()
    moved = writer.drain_spill()
    seconds = time.perf_counter() - started
    engine = sa.create_engine(f"sqlite:///{outbox}")
    with engine.connect() as conn:
        stored = conn.exec_driver_sql("SELECT count(*) FROM lineage_outbox_events").scalar_one()
    engine.dispose()
    if stored < expected:
        raise SystemExit(f"durability=process: {stored} events in the outbox, {expected} were emitted")
    per_event = seconds / max(moved, 1) * 1e6
    return f"{moved:,} events in {seconds * 1e3:,.0f} ms ({per_event:,.0f} us per event), {stored:,} stored"


def measure(transport: dict[str, str], blocks: int, warmup: int) -> tuple[list[float], list[float]]:
    configure(transport)
    run_blocks(warmup)
    TRANSPORT_TIME.clear()
    samples = run_blocks(blocks)
    return samples, list(TRANSPORT_TIME)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--down-blocks", type=int, default=3)
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time (default), or this process's CPU time (all its threads: the in-process HTTP server's too), "
        "which a machine loaded by other processes disturbs far less",
    )
    args = parser.parse_args()
    if args.clock == "cpu":
        CLOCK[0] = time.process_time

    workdir = Path(tempfile.mkdtemp(prefix="alp-bench-outbox-"))
    os.environ["AIRFLOW_HOME"] = str(workdir / "airflow")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # no log line per event in any case
    time_transports()
    per_round = max(1, args.blocks // args.rounds)
    results: dict[str, tuple[list[float], list[float]]] = {}
    with fast_responder() as responder:
        cases = {
            "noop": {"type": "noop"},
            "null (a transport doing nothing)": {"type": f"{__name__}.NULL"},
            "outbox, SQLite, NORMAL": {"type": OUTBOX, "url": f"sqlite:///{workdir / 'outbox-normal.db'}"},
            "outbox, SQLite, OFF": {
                "type": OUTBOX,
                "url": f"sqlite:///{workdir / 'outbox-off.db'}",
                "sqlite_synchronous": "OFF",
            },
            "outbox, durability=process": {
                "type": OUTBOX,
                "url": f"sqlite:///{workdir / 'outbox-process.db'}",
                "durability": "process",
            },
            "http, healthy": {"type": "http", "url": responder},
        }
        pg = postgres_url()
        if pg:
            cases["outbox, PostgreSQL"] = {"type": OUTBOX, "url": pg}
        results = {name: ([], []) for name in cases}
        for round_ in range(args.rounds):
            for name, transport in cases.items():
                blocks, emits = measure(transport, per_round, warmup=10)
                results[name][0].extend(blocks)
                results[name][1].extend(emits)
            print(f"  round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    journal_move = move_journal(workdir / "outbox-process.db", per_round * args.rounds * 2)
    with served_consumer(workdir) as url:
        results["http, healthy (airflow-lineage serve)"] = measure({"type": "http", "url": url}, per_round * 2, 20)
    if args.down_blocks > 0:
        down = socket.socket()
        down.bind(("127.0.0.1", 0))
        down_url = f"http://127.0.0.1:{down.getsockname()[1]}"
        down.close()  # the port now refuses connections
        results["http, consumer down"] = measure({"type": "http", "url": down_url}, args.down_blocks, warmup=0)

    noop_block = statistics.median(results["noop"][0])
    healthy_block = statistics.median(results["http, healthy"][0])
    healthy_emit = statistics.median(results["http, healthy"][1])
    healthy_share = (healthy_block - noop_block) / 2
    print(
        f"\n{per_round * args.rounds} `lineage_run` blocks (START + COMPLETE) per interleaved case in {args.rounds} "
        f"rounds; airflow-lineage serve: {per_round * 2}; consumer-down HTTP: {args.down_blocks}.\n"
    )
    print("| case | per block, median | per block, p99 | in the transport, per event (median) | "
          "share of the block over noop, per event | transport vs http healthy | share vs http healthy |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (blocks, emits) in results.items():
        median = statistics.median(blocks)
        emit = statistics.median(emits) if emits else 0.0  # the client skips a noop transport's emit
        p99 = sorted(blocks)[max(0, int(len(blocks) * 0.99) - 1)]
        share = (median - noop_block) / 2
        vs_emit = f"{emit / healthy_emit:.3f}x ({healthy_emit / emit:.1f}x cheaper)" if emit > 0 else "-"
        vs_share = f"{share / healthy_share:.3f}x ({healthy_share / share:.1f}x cheaper)" if share > 0 else "-"
        print(
            f"| {name} | {median * 1e6:,.0f} us | {p99 * 1e6:,.0f} us | {emit * 1e6:,.0f} us | "
            f"{share * 1e6:,.0f} us | {vs_emit} | {vs_share} |"
        )
    print(f"\n`durability=process`: moving its events into the outbox afterwards: {journal_move}.")
    if pg:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_URL)
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA IF EXISTS alp_bench_outbox CASCADE")
        engine.dispose()


if __name__ == "__main__":
    main()
