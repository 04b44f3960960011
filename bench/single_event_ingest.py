"""Single-event ingest: one OpenLineage event per HTTP request, as the stock HTTP transport sends them.

Each consumer is a server process on 127.0.0.1 with a fresh store: this package's ``airflow-lineage serve``
(SQLite, PostgreSQL; with ``--baseline-tree`` also the same server imported from another checkout, e.g. the
commit before a change) and Feast 0.67's ``feast serve_lineage`` (SQLite registry). Events are the consumer
benchmark's workload (``consumer_workload.py``: START + COMPLETE per job, with inputs, outputs and a schema
facet), pre-encoded JSON.

Per consumer, in this order:

0. **warm-up**, not timed: ``--warm-up`` events (400) posted as in phase 2, so the server has
   compiled its statements for every group size the N clients make, as a long-running server has (without
   it those compilations fall into the timed phases);
1. **one client**: ``--sequential`` events posted one after another on one kept-alive connection; the median
   and 95th percentile time per request (to the last byte of the answer) and events/s;
2. **N clients** (``--clients``, 8: as 8 Airflow workers would): the remaining events split by job among N
   client *processes* (so the clients are not one Python interpreter's GIL), each posting one event per
   request on its own kept-alive connection, all started together; events/s from the first request sent to
   the answer of a read sent after the last answer (an event counts once it is readable: with ``--ingest-apply
   deferred`` the applier's backlog is part of the time), the median and p95 per request, and the CPU time per
   event the consumer's process and this machine's PostgreSQL processes spent meanwhile (``/proc``: a figure the
   machine's other load moves less than events/s), and how busy the whole machine was (all CPUs, clients
   included), how much of its CPU time the hypervisor gave to other VMs (steal) and how much sat idle waiting
   for the disk (iowait, ``/proc/stat``); meanwhile a
   reader asks every 0.1 s for what was answered so far (``GET /api/v1/events?limit=1``, through a deferred
   apply's read barrier): its p50 and p95, what a user reading while producers post waits.

Every answer must be a success (201/200/204): one that is not stops the benchmark. Afterwards the stored
events are counted: an answered event that is not stored would be a lost event.

    .venv/bin/python bench/single_event_ingest.py                               # SQLite, PostgreSQL, Feast
    .venv/bin/python bench/single_event_ingest.py --consumers sqlite postgres --events 6000
    .venv/bin/python bench/single_event_ingest.py --baseline-tree /tmp/before   # A/B against another checkout
    .venv/bin/python bench/single_event_ingest.py --consumers sqlite --profile /tmp/prof  # py-spy --gil, speedscope
    .venv/bin/python bench/single_event_ingest.py --consumers sqlite-inline sqlite-deferred --server-workers 2
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import Consumer, Ours, open_consumer, postgres_schema, serve_ours  # noqa: E402
from consumer_workload import split_by_job, workload  # noqa: E402

PATH = "/api/v1/lineage"
OK = (200, 201, 204)


def _post_all(url: str, bodies: list[bytes], close_each: bool) -> list[float]:
    """Post ``bodies`` one per request on one connection (a new one per request when ``close_each``); the time
    of each request in seconds. Raises on any answer that is not a success."""
    parts = urlsplit(url)
    headers = {"Content-Type": "application/json"}
    if close_each:
        headers["Connection"] = "close"
    host = parts.hostname
    assert host is not None, url
    connection = http.client.HTTPConnection(host, parts.port, timeout=120)
    times = []
    try:
        for body in bodies:
            started = time.perf_counter()
            connection.request("POST", PATH, body=body, headers=headers)
            answer = connection.getresponse()
            text = answer.read()
            times.append(time.perf_counter() - started)
            if answer.status not in OK:
                raise RuntimeError(f"{url} answered {answer.status}: {text[:300]!r}")
            if close_each or answer.getheader("connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection(host, parts.port, timeout=120)
    finally:
        connection.close()
    return times


def _client(url: str, bodies: list[bytes], close_each: bool, start: Any, out: Any) -> None:
    start.wait()
    began = time.perf_counter()
    try:
        times = _post_all(url, bodies, close_each)
        out.put((began, time.perf_counter(), times, None))
    except Exception as error:  # reported by the parent
        out.put((began, time.perf_counter(), [], repr(error)))


def _split_by_job(events: list[dict[str, Any]], clients: int) -> list[list[bytes]]:
    """The events as JSON, split among ``clients`` so that each job's events stay in one client, in order."""
    shares = split_by_job(events, clients, lambda event: event["job"]["name"])
    return [[json.dumps(event).encode() for event in share] for share in shares]


def _summary(times: list[float], seconds: float, count: int) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "events": count,
        "seconds": seconds,
        "events_per_s": count / seconds,
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[int(len(ordered) * 0.95) - 1] * 1000,
    }


def _concurrently(
    consumer: Consumer, events: list[dict[str, Any]], clients: int, close_each: bool, profile: Path | None = None
) -> tuple[list[tuple[float, float, list[float], str | None]], float, float, float, dict[str, int], list[float]]:
    """Post ``events`` split by job among ``clients`` client processes started together: each client's report
    (first request sent, last answer received, request times), when a read after the last answer had an answer
    (:meth:`Consumer.settle`), the CPU seconds the consumer's process and PostgreSQL's processes spent until
    then, the machine's CPU time by kind meanwhile (:func:`_machine_ticks`), and the times of the reads beside the
    clients (:class:`_Reader`). Raises when a client failed."""
    context = multiprocessing.get_context("fork")
    start, out = context.Event(), context.Queue()
    shares = _split_by_job(events, clients)
    workers = [context.Process(target=_client, args=(consumer.url, s, close_each, start, out)) for s in shares]
    for worker in workers:
        worker.start()
    time.sleep(0.5)  # every client connected and waiting
    spy = _profiler(consumer.pid, profile) if profile and consumer.pid else None
    server_pids = _with_descendants(consumer.pid) if consumer.pid else []  # uvicorn's workers too
    server_before, database_before = _cpu_seconds(server_pids), _cpu_seconds(_postgres_pids())
    machine_before = _machine_ticks()
    reads = _Reader(consumer)
    start.set()
    reads.start()
    reports = [out.get(timeout=3600) for _ in workers]
    reads.stop()
    consumer.settle()  # until what was answered is readable (a deferred apply's backlog applied), in the CPU too
    readable = time.perf_counter()
    if spy is not None:
        spy.send_signal(2)  # py-spy writes its profile on SIGINT
        spy.wait(60)
    server_cpu = _cpu_seconds(server_pids) - server_before
    database_cpu = _cpu_seconds(_postgres_pids()) - database_before
    machine_after = _machine_ticks()
    machine = {name: machine_after[name] - machine_before[name] for name in machine_after}
    for worker in workers:
        worker.join()
    errors = [error for *_rest, error in reports if error]
    if errors:
        raise RuntimeError(f"a client failed: {errors[0]}")
    return reports, readable, server_cpu, database_cpu, machine, reads.times


class _Reader:
    """A reader beside the posting clients: every :data:`READ_EVERY` seconds it asks for what was answered so far
    (:meth:`Consumer.settle`, through a deferred apply's read barrier), timing each answer — what a user reading
    the graph while producers post waits. Nothing for a consumer without a settle read (Feast)."""

    def __init__(self, consumer: Consumer) -> None:
        import threading

        self.times: list[float] = []
        self._consumer = type(consumer)(consumer.url)  # its own session
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._active = type(consumer).settle is not Consumer.settle

    def start(self) -> None:
        if self._active:
            self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._active:
            self._thread.join(120)

    def _run(self) -> None:
        while not self._done.wait(READ_EVERY):
            started = time.perf_counter()
            self._consumer.settle()
            self.times.append(time.perf_counter() - started)


#: Seconds between the reads of :class:`_Reader` during the N-client phase.
READ_EVERY = 0.1


def measure(
    consumer: Consumer,
    events: list[dict[str, Any]],
    sequential: int,
    clients: int,
    profile: Path | None = None,
    warm_up: int = 0,
) -> dict[str, Any]:
    """The one-client and N-client phases on ``consumer``, after ``warm_up`` events posted by the N clients (not
    timed: a long-running server has compiled the statements for every group size the clients make)."""
    close_each = consumer.__class__.__name__ == "Feast"
    warm, one, rest = events[:warm_up], events[warm_up : warm_up + sequential], events[warm_up + sequential :]
    if warm:
        _concurrently(consumer, warm, clients, close_each)
    result: dict[str, Any] = {}
    bodies = [json.dumps(e).encode() for e in one]
    started = time.perf_counter()
    times = _post_all(consumer.url, bodies, close_each)
    consumer.settle()
    result["one_client"] = _summary(times, time.perf_counter() - started, len(bodies))
    reports, readable, server_cpu, database_cpu, machine, reads = _concurrently(
        consumer, rest, clients, close_each, profile
    )
    first, last = min(r[0] for r in reports), max(r[1] for r in reports)
    all_times = [t for r in reports for t in r[2]]
    # events/s until everything answered was readable (a deferred apply's backlog included), and until the answers
    result[f"{clients}_clients"] = _summary(all_times, readable - first, len(all_times))
    result[f"{clients}_clients"]["answered_events_per_s"] = len(all_times) / (last - first)
    # CPU per event while the clients posted: the consumer's process (its threads together), and PostgreSQL's
    # processes (the database runs on this machine too; also counts any other client of it meanwhile).
    result["server_cpu_ms_per_event"] = server_cpu * 1000 / len(all_times) if consumer.pid else None
    result["database_cpu_ms_per_event"] = database_cpu * 1000 / len(all_times)
    # How busy the whole machine was meanwhile (all its CPUs: the clients, the kernel's network work, everything
    # else), and the time the hypervisor gave this VM's CPUs to others (steal): a phase with the machine near 100%
    # busy is bound by this machine's CPUs; well below, by the consumer process itself (its interpreter lock).
    ticks = sum(machine.values()) or 1
    result["machine_busy_percent"] = 100 * machine["busy"] / ticks
    result["steal_percent"] = 100 * machine["steal"] / ticks
    # Idle CPU time with a disk write or read outstanding (a commit's or a checkpoint's fsync waiting).
    result["iowait_percent"] = 100 * machine["iowait"] / ticks
    # A read every 0.1 s while the clients post (through the read barrier): its p50 and p95.
    ordered = sorted(reads)
    result["read_p50_ms"] = statistics.median(ordered) * 1000 if ordered else None
    result["read_p95_ms"] = ordered[max(int(len(ordered) * 0.95) - 1, 0)] * 1000 if ordered else None
    result["stored"] = consumer.stored_events()
    result["posted"] = len(events)
    return result


def _profiler(pid: int, profile: Path) -> Any:
    """``py-spy record --gil`` of the consumer ``pid`` into ``profile`` (a speedscope file) while the clients
    post; py-spy must be installed (``.venv/bin/pip install py-spy``)."""
    import shutil
    import subprocess

    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    profile.parent.mkdir(parents=True, exist_ok=True)
    command = [spy, "record", "--gil", "--rate", "250", "--format", "speedscope", "-o", str(profile), "-p", str(pid)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first request
    return process


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the live processes among ``pids`` (Linux ``/proc``; 0 elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _with_descendants(pid: int) -> list[int]:
    """``pid`` and the live processes descending from it (``/proc``)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found = [pid]
    for candidate in parents:
        ancestor = parents.get(candidate)
        while ancestor is not None and ancestor not in (pid, 0, 1):
            ancestor = parents.get(ancestor)
        if ancestor == pid:
            found.append(candidate)
    return found


def _machine_ticks() -> dict[str, int]:
    """This machine's CPU time so far, all CPUs together, by kind (``/proc/stat``, in clock ticks; zeros elsewhere):
    ``busy`` (user, nice, system, irq, softirq), ``idle``, ``iowait`` and ``steal``."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except (OSError, ValueError, IndexError):
        values = [0] * 8
    user, nice, system, idle, iowait, irq, softirq, steal = values
    return {"busy": user + nice + system + irq + softirq, "idle": idle, "iowait": iowait, "steal": steal}


def _postgres_pids() -> list[int]:
    """The PostgreSQL server's processes on this machine (by their command name), if any."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@contextmanager
def _workers(store: str, apply: str, workers: int) -> Iterator[Consumer]:
    """The consumer app on ``store`` served by ``uvicorn --workers N`` (``served_app.py``) on a free port; the
    store is created and migrated first, once."""
    import subprocess

    import requests
    from support.feast_consumer import free_port

    from airflow_lineage_provider.consumer.store import LineageStore

    opened = LineageStore(store)
    opened.engine  # noqa: B018 - created and migrated before the workers start
    opened.dispose()
    port = free_port()
    env = {**os.environ, "BENCH_STORE": store, "BENCH_INGEST_APPLY": apply or "auto", "PYTHONPATH": str(HERE)}
    command = [str(Path(sys.executable).parent / "uvicorn"), "--factory", "served_app:make", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    process = subprocess.Popen(command, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{url}/api/v1/namespaces", timeout=2).raise_for_status()
                break
            except requests.RequestException:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"uvicorn --workers {workers} did not start") from None
                time.sleep(0.2)
        consumer = Ours(url)
        consumer.pid = process.pid
        yield consumer
    finally:
        process.terminate()
        process.wait(60)


@contextmanager
def _consumer(kind: str, folder: Path, baseline: Path | None, workers: int = 1) -> Iterator[Consumer]:
    """``sqlite``/``postgres`` (this checkout), ``baseline-sqlite``/``baseline-postgres`` (``--baseline-tree``)
    or ``feast``; ``-deferred`` or ``-inline`` after a store (``postgres-inline``) serves it with that
    ``--ingest-apply``, nothing with the server's default (``auto``: deferred on PostgreSQL, inline on SQLite)."""
    if kind == "feast":
        with open_consumer(kind, folder) as consumer:
            yield consumer
        return
    tree = baseline if kind.startswith("baseline-") else None
    store, _, apply = kind.removeprefix("baseline-").partition("-")
    if apply not in ("", "inline", "deferred"):
        raise SystemExit(f"unknown consumer {kind!r}: a store (sqlite, postgres), then -inline or -deferred or nothing")
    options = ("--ingest-apply", apply) if apply else ()  # nothing: the server's default (auto)
    folder.mkdir(parents=True, exist_ok=True)
    if workers > 1:
        if tree is not None:
            raise SystemExit("--server-workers measures this checkout only, not --baseline-tree")
        if store == "sqlite":
            with _workers(f"sqlite:///{folder / 'lineage.db'}", apply, workers) as consumer:
                yield consumer
        else:
            with postgres_schema() as url, _workers(url, apply, workers) as consumer:
                yield consumer
        return
    if store == "sqlite":
        with serve_ours(f"sqlite:///{folder / 'lineage.db'}", folder, *options, tree=tree) as consumer:
            yield consumer
    else:
        with postgres_schema() as url, serve_ours(url, folder, *options, tree=tree) as consumer:
            yield consumer


def _table(results: dict[str, dict[str, Any]], clients: int) -> str:
    many = f"{clients}_clients"
    lines = [
        f"| consumer | 1 client: events/s | p50 / p95 | {clients} clients: events/s | p50 / p95 "
        "| read p50 / p95 meanwhile | CPU per event: server / PostgreSQL | machine busy / steal / iowait "
        "| stored / posted |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, r in results.items():
        one, multi = r["one_client"], r[many]
        server = r.get("server_cpu_ms_per_event")
        cpu = f"{server:.2f} / {r.get('database_cpu_ms_per_event', 0):.2f} ms" if server is not None else "-"
        read = f"{r['read_p50_ms']:.2f} / {r['read_p95_ms']:.2f} ms" if r.get("read_p50_ms") is not None else "-"
        lines.append(
            f"| {kind} | {one['events_per_s']:,.0f} | {one['p50_ms']:.2f} / {one['p95_ms']:.2f} ms "
            f"| {multi['events_per_s']:,.0f} | {multi['p50_ms']:.2f} / {multi['p95_ms']:.2f} ms "
            f"| {read} | {cpu} | {r['machine_busy_percent']:.0f}% / {r['steal_percent']:.0f}% "
            f"/ {r.get('iowait_percent', 0):.0f}% "
            f"| {r['stored']:,} / {r['posted']:,} |"
        )
    if "feast" in results:
        feast = results["feast"]
        for kind, r in results.items():
            if kind != "feast":
                ratio = r[many]["events_per_s"] / feast[many]["events_per_s"]
                one = r["one_client"]["events_per_s"] / feast["one_client"]["events_per_s"]
                lines.append(f"\n{kind} vs Feast: {one:.1f}x with one client, {ratio:.1f}x with {clients} clients")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=4000, help="events per consumer (a workload of events/2 jobs)")
    parser.add_argument("--sequential", type=int, default=500, help="events posted by the one client")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--warm-up",
        type=int,
        default=400,
        help="events posted by the N clients before the timed phases, not timed (0: none; counted in --events)",
    )
    parser.add_argument("--consumers", nargs="+", default=["sqlite", "postgres", "feast"])
    parser.add_argument("--baseline-tree", type=Path, help="also measure the server imported from this checkout")
    parser.add_argument(
        "--server-workers",
        type=int,
        default=1,
        metavar="N",
        help="serve this package's consumers from N processes (uvicorn --workers N, as Airflow's API server runs "
        "the consumer in each of its workers) instead of one airflow-lineage serve (default 1)",
    )
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    parser.add_argument(
        "--profile", type=Path, help="py-spy --gil profiles of each consumer's N-client phase: <dir>/<consumer>.json"
    )
    args = parser.parse_args()
    kinds = list(args.consumers)
    if args.baseline_tree is not None:
        kinds = [k for kind in kinds for k in ((f"baseline-{kind}", kind) if kind != "feast" else (kind,))]
    events = workload(args.events // 2)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="alp-single-") as tmp:
        for kind in kinds:
            print(f"==> {kind}: {len(events):,} events, 1 client then {args.clients}", flush=True)
            label = kind if kind not in results else f"{kind} ({sum(k.split(' ')[0] == kind for k in results) + 1})"
            # A folder of its own per run: a repeated SQLite consumer must not find the first run's events stored.
            with _consumer(
                kind, Path(tmp) / label.replace(" ", ""), args.baseline_tree, args.server_workers
            ) as consumer:
                profile = args.profile / f"{label}.json" if args.profile else None
                results[label] = measure(consumer, events, args.sequential, args.clients, profile, args.warm_up)
            print(json.dumps(results[label]), flush=True)
    print(_table(results, args.clients))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
