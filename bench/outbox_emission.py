"""What a task pays to emit lineage: the outbox against the stock HTTP transport, healthy and with the consumer down.

Each case runs ``--blocks`` ``lineage_run`` blocks (a START and a COMPLETE each, no connector, an empty
body) in this process, with openlineage-python's client configured the way a user would:

* ``outbox, SQLite``      - ``OutboxTransport`` on a local SQLite file (the embedded default);
* ``outbox, PostgreSQL``  - ``OutboxTransport`` on PostgreSQL at 127.0.0.1:5432 (skipped if unreachable);
* ``http, healthy``       - the stock ``http`` transport posting to a loopback consumer (a threaded HTTP
                            server in this process, answering 201 at once);
* ``http, healthy (airflow-lineage serve)`` - the same, posting to this package's own consumer in its own
                            process (SQLite store): a real consumer a user would run next to Airflow;
* ``http, consumer down`` - the stock ``http`` transport with nothing listening on the port: its retries
                            (5, with backoff) make each event wait seconds, so this case runs only
                            ``--down-blocks`` blocks (default 3) and is reported per block;
* ``outbox, consumer down`` - the outbox when the consumer is down: emission never talks to the
                            consumer, so this is the ``outbox, SQLite`` case again, measured again.

Run: ``.venv/bin/python bench/outbox_emission.py [--blocks 1000] [--down-blocks 3]``; prints a Markdown table
with the median and p99 per block and the ratio to ``http, healthy``.
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
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
PG_URL = os.environ.get("LINEAGE_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


def configure(transport: dict[str, str]) -> None:
    from airflow_lineage_provider.producer import client

    for key in [k for k in os.environ if k.startswith("OPENLINEAGE__")]:
        del os.environ[key]
    for key, value in transport.items():
        os.environ[f"OPENLINEAGE__TRANSPORT__{key.upper()}"] = value
    client.reset()


TRANSPORT_TIME: list[float] = []


def time_transports() -> None:
    """Wrap the transports' ``emit`` so the time spent inside them is measured apart from the rest."""
    from openlineage.client.transport.http import HttpTransport

    from airflow_lineage_provider.outbox.transport import OutboxTransport

    for cls in (HttpTransport, OutboxTransport):
        original = cls.emit

        def timed(self: object, event: object, _original=original) -> object:
            started = time.perf_counter()
            try:
                return _original(self, event)
            finally:
                TRANSPORT_TIME.append(time.perf_counter() - started)

        cls.emit = timed  # type: ignore[method-assign]


def run_blocks(blocks: int) -> list[float]:
    from airflow_lineage_provider import lineage_run

    samples = []
    for index in range(blocks):
        started = time.perf_counter()
        with lineage_run("bench.load", inputs=[f"raw/orders_{index}"], outputs=["main/orders"]):
            pass
        samples.append(time.perf_counter() - started)
    return samples


def case(name: str, transport: dict[str, str], blocks: int, warmup: int = 20) -> tuple[str, list[float], list[float]]:
    configure(transport)
    run_blocks(warmup)
    TRANSPORT_TIME.clear()
    samples = run_blocks(blocks)
    emits = list(TRANSPORT_TIME)
    print(f"  {name}: {statistics.median(samples) * 1e6:.0f} us median over {blocks} blocks", file=sys.stderr)
    return name, samples, emits


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=1000)
    parser.add_argument("--down-blocks", type=int, default=3)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="alp-bench-outbox-"))
    os.environ["AIRFLOW_HOME"] = str(workdir / "airflow")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # no log line per event in any case
    from support.consumer_server import ConsumerServer

    outbox = "airflow_lineage_provider.outbox.OutboxTransport"
    time_transports()
    results: list[tuple[str, list[float], list[float]]] = []
    results.append(case("outbox, SQLite", {"type": outbox, "url": f"sqlite:///{workdir / 'outbox.db'}"}, args.blocks))
    pg = postgres_url()
    if pg:
        results.append(case("outbox, PostgreSQL", {"type": outbox, "url": pg}, args.blocks))
    with ConsumerServer() as consumer:
        results.append(case("http, healthy", {"type": "http", "url": consumer.url}, args.blocks))
    with served_consumer(workdir) as url:
        results.append(case("http, healthy (airflow-lineage serve)", {"type": "http", "url": url}, args.blocks))
    down = ConsumerServer()
    down.stop()  # the port now refuses connections
    results.append(case("http, consumer down", {"type": "http", "url": down.url}, args.down_blocks, warmup=0))
    results.append(
        case("outbox, consumer down", {"type": outbox, "url": f"sqlite:///{workdir / 'outbox2.db'}"}, args.blocks)
    )

    by_name = {name: (blocks, emits) for name, blocks, emits in results}
    healthy_block = statistics.median(by_name["http, healthy"][0])
    healthy_emit = statistics.median(by_name["http, healthy"][1])
    print(
        f"\n{args.blocks} `lineage_run` blocks (START + COMPLETE) per case; consumer-down HTTP: {args.down_blocks}.\n"
    )
    print("| case | per block, median | per block, p99 | in the transport, per event (median) | "
          "block vs http healthy | transport vs http healthy |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for name, (blocks, emits) in by_name.items():
        median, emit = statistics.median(blocks), statistics.median(emits)
        p99 = sorted(blocks)[max(0, int(len(blocks) * 0.99) - 1)]
        print(
            f"| {name} | {median * 1e6:,.0f} us | {p99 * 1e6:,.0f} us | {emit * 1e6:,.0f} us | "
            f"{median / healthy_block:.2f}x | {emit / healthy_emit:.3f}x |"
        )
    if pg:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_URL)
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP SCHEMA IF EXISTS alp_bench_outbox CASCADE")
        engine.dispose()


if __name__ == "__main__":
    main()
