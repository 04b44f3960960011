"""Scale out on PostgreSQL: 1, 2 and 4 ``airflow-lineage serve`` processes on one store, the load spread over them.

One PostgreSQL store (a database of its own, created fresh and dropped afterwards unless ``--keep``) is loaded
first with ``--base`` events of ``year_scale.py``'s deployment through one server, then ``VACUUM ANALYZE``. Then,
for each count P of ``--processes`` (1, 2, 4), P fresh ``airflow-lineage serve`` processes on that same store,
each on its own port with the default options (deferred apply: each process answers an ingest once its events
are in the shared ingest log, and every process's applier takes pending events from that log), and the load is
spread round-robin over them:

* **warm-up**, not timed: a few single events per process, and one walk and one listing from each (the statements
  compiled, as in a long-running server);
* **batch ingest**: the next ``--batch-events`` events of the stream in batches of 500, batch *j* posted to process
  *j mod P*, one sender thread per process (a 503 while the ingest log is full is retried after its Retry-After,
  as the shipper does); events/s until the last batch was answered, and until every process answered a read
  without a ``Lineage-Pending-Events`` header (everything applied). Meanwhile a separate client process reads in
  turn from each server, every 0.1 s, alternately the depth-10 upstream walk from one of 20 datasets the latest
  DAGs wrote and ``/api/v1/datasets?limit=100``, each pair in turn as the senders (who post without a key) and as
  a reader with a key of its own that posts nothing (read-your-writes holds per principal: a read behind a bulk
  load waits only for its own principal's events): p50/p95 of each, and how many answers said they were behind;
* **single-event ingest**: the next ``--single-per-process`` x P events, one per request, from 4 client processes
  per server (each job's events in one client); events/s until every server reads everything applied, p50/p99;
* **reads at rest**: :data:`REST_READS` walks and listings again, the load over, round-robin.

Each phase records the CPU the server processes and PostgreSQL's processes used (``psutil``), as a share of one
CPU, and how busy the whole machine was: on a machine of few CPUs, that is where scaling stops. The load
generator (senders, clients, reader) runs on the same machine and is counted in the machine's figure only.
``--serve-option`` passes options to every server: a larger ``--ingest-log-max-events`` and ``--ingest-log-max-bytes``
take the ingest log's bound (and the senders' waits after a 503) out of the batch figures, leaving what the
appliers can apply.

    .venv/bin/python bench/scale_out.py                                  # base 100k events, ~10 minutes
    .venv/bin/python bench/scale_out.py --base 1000000 --batch-events 50000
    .venv/bin/python bench/scale_out.py --serve-option=--ingest-log-max-events=1000000 \
        --serve-option=--ingest-log-max-bytes=4000000000              # no 503 from the log: the appliers' pace
    .venv/bin/python bench/scale_out.py --base 2000 --batch-events 2000 --single-per-process 200   # smoke test

Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs installed
import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import Ours, analyze, serve_ours  # noqa: E402
from single_event_ingest import _client, _split_by_job  # noqa: E402
from year_scale import PENDING_HEADER, Deployment, Stream, _post_batch, fresh_database  # noqa: E402
from year_scale import load as load_batches  # noqa: E402

#: Single-event clients per server process.
CLIENTS_PER_PROCESS = 4
#: Single events per process posted before the timed phases (not timed).
WARM_UP_PER_PROCESS = 100
#: Seconds between the reads of the reader beside the batch load.
READ_EVERY = 0.1
#: Walks and listings read at rest after the load, each.
REST_READS = 20
#: Walk roots the readers cycle through.
ROOTS = 20
#: The key of the reader that posts nothing (a person looking at the lineage page while the export DAG loads):
#: the senders post without a key (anonymous write), so its reads are another principal's than theirs.
READER_KEY = "scale-out-reader"
#: Who the reader beside the load reads as, in turn: the senders' principal, and a principal that posts nothing.
READS_AS = ("sender", "other")


# --- CPU accounting ---------------------------------------------------------------------------------------------


def _postgres_processes() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name"]):
        if process.info["name"] in ("postgres", "postmaster"):
            found.append(process)
    return found


def _cpu(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.Error:  # gone meanwhile
        return 0.0
    return float(times.user + times.system)


class CpuMeter:
    """CPU seconds the servers and PostgreSQL spent from :meth:`start` to :meth:`stop`, and the machine's busy
    share meanwhile (all CPUs; steal is CPU time the hypervisor gave to other machines)."""

    def __init__(self, server_pids: list[int]) -> None:
        self.servers = [psutil.Process(pid) for pid in server_pids]
        self._servers: list[float] = []
        self._postgres: dict[int, float] = {}
        self._machine: Any = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()
        self._servers = [_cpu(process) for process in self.servers]
        self._postgres = {process.pid: _cpu(process) for process in _postgres_processes()}
        self._machine = psutil.cpu_times()

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._started
        servers = [_cpu(process) - before for process, before in zip(self.servers, self._servers, strict=True)]
        # A backend started meanwhile counts from zero; one that ended meanwhile is lost (pools keep theirs).
        postgres = sum(_cpu(process) - self._postgres.get(process.pid, 0.0) for process in _postgres_processes())
        after = psutil.cpu_times()
        spent = {name: getattr(after, name) - getattr(self._machine, name) for name in after._fields}
        total = sum(spent.values()) or 1.0
        idle = spent.get("idle", 0.0) + spent.get("iowait", 0.0)
        return {
            "seconds": wall,
            "servers_cpu_percent": [100 * s / wall for s in servers],
            "servers_cpu_percent_total": 100 * sum(servers) / wall,
            "postgres_cpu_percent": 100 * postgres / wall,
            "machine_busy_percent": 100 * (total - idle) / total,
            "steal_percent": 100 * spent.get("steal", 0.0) / total,
            "cpus": psutil.cpu_count(),
        }


# --- reads --------------------------------------------------------------------------------------------------------


def _read(
    session: requests.Session, url: str, kind: str, root: tuple[str, str], headers: dict[str, str] | None = None
) -> tuple[str, float, int, int]:
    """One walk or listing: ``(kind, ms to the last byte, status, events the answer said it was behind)``."""
    if kind == "walk":
        path = "/api/v1/lineage"
        params: dict[str, str | int] = {
            "nodeId": f"dataset:{root[0]}:{root[1]}",
            "depth": 10,
            "direction": "upstream",
            "maxNodes": 100000,
        }
    else:
        path, params = "/api/v1/datasets", {"limit": 100}
    started = time.perf_counter()
    answer = session.get(f"{url}{path}", params=params, headers=headers, timeout=600)
    elapsed = (time.perf_counter() - started) * 1000
    return kind, elapsed, answer.status_code, int(answer.headers.get(PENDING_HEADER, "0"))


def _reader(urls: list[str], roots: list[tuple[str, str]], stop: Any, out: Any) -> None:
    """In a process of its own: reads in turn from each server (walk, listing, walk ...), in turn as the senders
    and as a reader that posts nothing (:data:`READS_AS`), until ``stop`` is set."""
    sessions = [requests.Session() for _ in urls]
    reads: dict[str, list[tuple[str, float, int, int]]] = {who: [] for who in READS_AS}
    number = 0
    while not stop.wait(READ_EVERY):
        kind = "walk" if number % 2 == 0 else "datasets"
        who = READS_AS[(number // 2) % len(READS_AS)]
        headers = {"X-API-Key": READER_KEY} if who == "other" else None
        server = number % len(urls)
        reads[who].append(_read(sessions[server], urls[server], kind, roots[(number // 4) % len(roots)], headers))
        number += 1
    out.put(reads)


def _summary(reads: list[tuple[str, float, int, int]]) -> dict[str, Any]:
    """p50/p95 of each kind of read, answers not 200, and answers that said they were behind."""
    result: dict[str, Any] = {}
    for kind in ("walk", "datasets"):
        times = sorted(ms for k, ms, status, _ in reads if k == kind and status == 200)
        result[kind] = {
            "reads": len(times),
            "p50_ms": statistics.median(times) if times else None,
            "p95_ms": times[max(0, round(0.95 * len(times)) - 1)] if times else None,
            "not_200": sum(1 for k, _, status, _ in reads if k == kind and status != 200),
            "answered_behind": sum(1 for k, _, _, behind in reads if k == kind and behind),
        }
    return result


@contextmanager
def reading(urls: list[str], roots: list[tuple[str, str]]) -> Iterator[dict[str, list[tuple[str, float, int, int]]]]:
    """A reader process beside the block; the dict holds its reads by whom they were for once the block ends."""
    context = multiprocessing.get_context("fork")
    stop, out = context.Event(), context.Queue()
    process = context.Process(target=_reader, args=(urls, roots, stop, out), daemon=True)
    process.start()
    found: dict[str, list[tuple[str, float, int, int]]] = {}
    try:
        yield found
    finally:
        stop.set()
        found.update(out.get(timeout=600))
        process.join(60)


def rest_reads(consumers: list[Ours], roots: list[tuple[str, str]]) -> dict[str, Any]:
    reads = []
    for number in range(2 * REST_READS):
        consumer = consumers[number % len(consumers)]
        kind = "walk" if number % 2 == 0 else "datasets"
        reads.append(_read(consumer.session, consumer.url, kind, roots[(number // 2) % len(roots)]))
    return _summary(reads)


def settle_all(consumers: list[Ours]) -> float:
    """When every server answers a read that is not behind (every logged event applied)."""
    for consumer in consumers:
        consumer.settle()
    return time.perf_counter()


def _access(folder: Path) -> tuple[str, ...]:
    """Serve options: the senders post without a key (anonymous, admin as on loopback), the other reader with its
    read key (in a keys file: a secret stays out of ``ps``)."""
    keys = folder / "keys.json"
    keys.write_text(json.dumps({"keys": [{"name": "reader", "scope": "read", "secret": READER_KEY}]}))
    return ("--keys-file", str(keys), "--allow-anonymous", "admin")


# --- phases -------------------------------------------------------------------------------------------------------


def warm_up(consumers: list[Ours], stream: Stream, roots: list[tuple[str, str]]) -> None:
    singles(consumers, stream, WARM_UP_PER_PROCESS * len(consumers), None)
    for consumer in consumers:
        _read(consumer.session, consumer.url, "walk", roots[0])
        _read(consumer.session, consumer.url, "datasets", roots[0])


def batches(
    consumers: list[Ours], stream: Stream, count: int, roots: list[tuple[str, str]], progress: Any
) -> dict[str, Any]:
    """``count`` events in batches, round-robin over the servers, one sender each; a reader meanwhile."""
    bodies: list[tuple[bytes, int]] = []  # generated before the clock starts
    first = stream.taken
    while stream.taken - first < count and (item := stream.next()) is not None:
        bodies.append(item)
    sent = sum(size for _, size in bodies)
    task = progress.add_task(f"batch ingest, {len(consumers)} processes", total=sent)
    refused = [0] * len(consumers)
    failures: list[BaseException] = []

    def send(index: int) -> None:
        session = requests.Session()
        try:
            for body, size in bodies[index :: len(consumers)]:
                refused[index] += _post_batch(session, consumers[index].url, body)
                progress.update(task, advance=size)
        except Exception as error:  # raised by the caller: a lost batch would make the rates wrong
            failures.append(error)

    meter = CpuMeter([c.pid for c in consumers])
    senders = [threading.Thread(target=send, args=(i,)) for i in range(len(consumers))]
    with reading([c.url for c in consumers], roots) as reads:
        meter.start()
        started = time.perf_counter()
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        answered = time.perf_counter()
    if failures:
        raise RuntimeError(f"a sender failed: {failures[0]!r}")
    applied = settle_all(consumers)
    cpu = meter.stop()
    return {
        "events": sent,
        "answered_events_per_s": sent / (answered - started),
        "applied_events_per_s": sent / (applied - started),
        "drain_seconds": applied - answered,
        "batches_refused_503": sum(refused),
        "reads_during": _summary(reads["sender"]),
        "reads_during_as_other": _summary(reads["other"]),
        "cpu": cpu,
    }


def singles(consumers: list[Ours], stream: Stream, count: int, meter: CpuMeter | None) -> dict[str, Any]:
    """``count`` events one per request from :data:`CLIENTS_PER_PROCESS` client processes per server."""
    events = stream.events(count)
    clients = CLIENTS_PER_PROCESS * len(consumers)
    shares = _split_by_job(events, clients)
    context = multiprocessing.get_context("fork")
    start, out = context.Event(), context.Queue()
    workers = [
        context.Process(target=_client, args=(consumers[i % len(consumers)].url, share, False, start, out))
        for i, share in enumerate(shares)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.5)  # every client started and waiting
    if meter is not None:
        meter.start()
    start.set()
    reports = [out.get(timeout=3600) for _ in workers]
    readable = settle_all(consumers)
    cpu = meter.stop() if meter is not None else None
    for worker in workers:
        worker.join()
    errors = [error for *_rest, error in reports if error]
    if errors:
        raise RuntimeError(f"a client failed: {errors[0]}")
    first = min(report[0] for report in reports)
    times = sorted(t * 1000 for report in reports for t in report[2])
    return {
        "events": len(times),
        "clients": clients,
        "events_per_s": len(times) / (readable - first),
        "p50_ms": statistics.median(times),
        "p99_ms": times[max(0, round(0.99 * len(times)) - 1)],
        "cpu": cpu,
    }


def _stream_length(args: argparse.Namespace) -> int:
    per_count = [args.batch_events + (WARM_UP_PER_PROCESS + args.single_per_process) * p for p in args.processes]
    return args.base + sum(per_count) + 1_500 * len(args.processes)  # whole batches: up to 499 more per take


def run(args: argparse.Namespace) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = _stream_length(args)
    deployment = Deployment(total, args.seed)
    result: dict[str, Any] = {
        "base": args.base,
        "seed": args.seed,
        "dags": len(deployment.dags),
        "started_at": datetime.now(timezone.utc).isoformat(),
        "cpus": os.cpu_count(),
        "load_average_before": os.getloadavg(),
        "serve_options": args.serve_option,
        "runs": [],
    }
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with (
        fresh_database(args.database, args.keep) as store,
        tempfile.TemporaryDirectory(prefix="alp-scale-out-") as folder,
        Progress(*columns) as progress,
    ):
        stream = Stream(total, args.seed)
        try:
            options = (*_access(Path(folder)), *args.serve_option)
            with serve_ours(store, Path(folder) / "base", *options) as consumer:
                result["base_load"] = load_batches(consumer, stream, args.base, progress)
            analyze(store)
            for count in args.processes:
                roots = list(islice(deployment.roots(stream.day), ROOTS))
                with ExitStack() as servers:
                    consumers = [
                        servers.enter_context(serve_ours(store, Path(folder) / f"p{count}-{i}", *options))
                        for i in range(count)
                    ]
                    warm_up(consumers, stream, roots)
                    point: dict[str, Any] = {"processes": count}
                    point["batch"] = batches(consumers, stream, args.batch_events, roots, progress)
                    meter = CpuMeter([c.pid for c in consumers])
                    point["single"] = singles(consumers, stream, args.single_per_process * count, meter)
                    point["reads_at_rest"] = rest_reads(consumers, roots)
                    point["load_average"] = os.getloadavg()
                    point["stored_events_after"] = consumers[0].stored_events()
                progress.console.print_json(json.dumps(point))
                result["runs"].append(point)
        finally:
            stream.close()
    return result


def table(result: dict[str, Any]) -> Any:
    from rich.table import Table

    shown = Table(title=f"Scale-out on one PostgreSQL store: base {result['base']:,} events, seed {result['seed']}")
    shown.add_column("measure")
    runs = result["runs"]
    for point in runs:
        shown.add_column(f"{point['processes']} process(es)", justify="right")

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    def cpu(phase: dict[str, Any]) -> str:
        c = phase["cpu"]
        each = "+".join(f"{v:.0f}" for v in c["servers_cpu_percent"])
        return f"{each} / {c['postgres_cpu_percent']:.0f} / {c['machine_busy_percent']:.0f}"

    def pair(reads: dict[str, Any], kind: str) -> str:
        return f"{ms(reads[kind]['p50_ms'])}/{ms(reads[kind]['p95_ms'])}"

    def flagged(reads: dict[str, Any]) -> str:
        return f"{sum(r['answered_behind'] for r in reads.values())} / {sum(r['not_200'] for r in reads.values())}"

    rows = [
        ("batch answered ev/s", lambda p: f"{p['batch']['answered_events_per_s']:,.0f}"),
        ("batch applied ev/s", lambda p: f"{p['batch']['applied_events_per_s']:,.0f}"),
        ("batches answered 503", lambda p: f"{p['batch']['batches_refused_503']}"),
        ("walk during load p50/p95 ms", lambda p: pair(p["batch"]["reads_during"], "walk")),
        ("datasets during load p50/p95 ms", lambda p: pair(p["batch"]["reads_during"], "datasets")),
        ("reads behind / not 200 during load", lambda p: flagged(p["batch"]["reads_during"])),
        ("walk during load as another reader p50/p95 ms", lambda p: pair(p["batch"]["reads_during_as_other"], "walk")),
        ("datasets during load as another p50/p95 ms", lambda p: pair(p["batch"]["reads_during_as_other"], "datasets")),
        ("another's reads behind / not 200", lambda p: flagged(p["batch"]["reads_during_as_other"])),
        ("batch CPU %: servers / PG / machine", lambda p: cpu(p["batch"])),
        ("single ev/s; p50/p99 ms",
         lambda p: f"{p['single']['events_per_s']:,.0f}; {p['single']['p50_ms']:.0f}/{p['single']['p99_ms']:.0f}"),
        ("single CPU %: servers / PG / machine", lambda p: cpu(p["single"])),
        ("walk at rest p50/p95 ms", lambda p: pair(p["reads_at_rest"], "walk")),
        ("datasets at rest p50/p95 ms", lambda p: pair(p["reads_at_rest"], "datasets")),
    ]  # fmt: skip
    for label, cell in rows:
        shown.add_row(label, *(cell(point) for point in runs))
    return shown


def main() -> int:
    from rich.console import Console

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=100_000, help="events loaded before the measured runs")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4], help="server processes per run")
    parser.add_argument("--batch-events", type=int, default=20_000, help="events of each run's batch ingest")
    parser.add_argument("--single-per-process", type=int, default=1_000, help="single events per server process")
    parser.add_argument(
        "--serve-option", action="append", default=[], help="passed to every airflow-lineage serve (repeatable)"
    )
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--database", default="alp_scale_out", help="created fresh, dropped afterwards")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale_out.json")
    args = parser.parse_args()
    result = run(args)
    result["finished_at"] = datetime.now(timezone.utc).isoformat()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    Console().print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
