"""Consumer benchmark: this package's consumer (SQLite and PostgreSQL) side by side with Feast 0.67's
``feast serve_lineage``, on the workload of ``consumer_workload.py`` (10 layers of jobs, each reading 2-3
datasets of the layer before, START + COMPLETE with schema facets), at N = 1,000 and 5,000 jobs.

Measured per consumer and N: batch ingest (batches of 500) and single-event ingest in events/s, depth-3
and depth-10 upstream walks from a last-layer dataset (median of repeated queries, with node counts so the
answers can be compared; for this consumer also the first request, the median of depth-10 walks each after a
write elsewhere in the store (no answer kept from before is served, graph cards stay warm), and the median from a
second server on the same store with its graph-card cache off), the largest graph query, three correctness checks, the
server's memory, and the listings (median and p99 of :data:`LISTING_REPEAT` requests each, 50 for Feast, timed
to the last byte of the response without parsing it): for this
consumer Marquez's get-job, list-jobs (a page of 100), get-dataset, list-runs and search; for Feast the
comparable endpoints it has (all jobs, a job's runs, a dataset's versions; no single job, no single
dataset, no search). On PostgreSQL the listings are measured twice: right after the load, and after a
``VACUUM ANALYZE`` (what autovacuum does within a minute of a load; it is off on the test server).

Depth: both are asked the same ``depth``. This consumer counts jobs (Marquez's depth); Feast counts edges
of its own graph, which also holds a direct dataset -> dataset edge for every input/output pair, and adds
the far end of the last edge, so its depth d reaches d + 1 dataset layers. Node counts are recorded with
every timing so the answers can be compared; at depth 10 both return the whole upstream graph.

    .venv/bin/python bench/consumer_bench.py                       # everything, ~10 minutes
    .venv/bin/python bench/consumer_bench.py --sizes 1000 --consumers sqlite postgres
    .venv/bin/python bench/consumer_bench.py --sizes 5000 --only-listings    # listings only, ~5 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_workload import NAMESPACE, workload  # noqa: E402

PG_URL = os.environ.get("LINEAGE_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
ROOT = "layer9.table_0"
MIDDLE = "layer4.table_0"
BATCH = 500
#: The job and dataset the one-object listings ask for, and the search term (matches ~10% of the jobs).
LISTED_JOB, LISTED_DATASET, SEARCH = "layer9.job_0", ROOT, "job_1"
#: Requests per listing (p99 is their 99th percentile).
LISTING_REPEAT = 200
#: A listing request: path, query parameters, and the member of the answer holding the listed items.
Listing = tuple[str, dict[str, Any], str]


def _rss_kib(pid: int) -> tuple[int, int]:
    """(current, peak) resident memory of a process in KiB, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _percentiles(call: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Median and 99th percentile wall time (ms) of ``repeat`` calls after two warm-up ones, and the last result."""
    call(), call()
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=100)[98], result


def _timed(call: Callable[[], Any], repeat: int) -> tuple[float, Any, float]:
    """Median wall time of ``repeat`` calls after a first one, the last result, and the first call's time.

    The first call is the cold one: this consumer reads every node's data from the store then, later calls
    find what did not change in its graph cards.
    """
    started = time.perf_counter()
    call()
    first = time.perf_counter() - started
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result, first


#: The header of a read answered from the graph as applied while events were still pending (their number).
PENDING_HEADER = "Lineage-Pending-Events"


class Consumer:
    """One consumer under test: how to post to it and how to ask it for a graph."""

    name = ""
    pid = 0

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()

    def post(self, path: str, body: Any) -> requests.Response:
        return self.session.post(f"{self.url}{path}", json=body, timeout=600)

    def walk(self, depth: int, root: str = ROOT, direction: str = "upstream") -> bytes:
        """The response body of an upstream/downstream/both walk (timed without client-side parsing)."""
        raise NotImplementedError

    def count(self, body: bytes) -> int:
        """Nodes in a graph response."""
        raise NotImplementedError

    def full_graph(self) -> bytes:
        """Both directions, unbounded depth, from a dataset of the middle layer."""
        raise NotImplementedError

    def run_state(self, run_id: str) -> str:
        raise NotImplementedError

    def stored_events(self) -> int:
        raise NotImplementedError

    def settle(self) -> None:
        """Return once every event answered so far is readable (a read; nothing for a consumer that applies
        events before it answers)."""

    def listings(self) -> dict[str, Listing | None]:
        """``name -> (path, params, key of the listed items)``; None where the consumer has no such endpoint."""
        raise NotImplementedError

    def body(self, path: str, params: dict[str, Any]) -> bytes:
        """The response body of a GET (timed to its last byte, without parsing it)."""
        response = self.session.get(f"{self.url}{path}", params=params, timeout=600)
        response.raise_for_status()
        return response.content


class Ours(Consumer):
    store = ""

    def walk(self, depth: int, root: str = ROOT, direction: str = "upstream") -> bytes:
        params: dict[str, str | int] = {
            "nodeId": f"dataset:{NAMESPACE}:{root}",
            "depth": depth,
            "direction": direction,
            "maxNodes": 100000,
        }
        response = self.session.get(f"{self.url}/api/v1/lineage", params=params, timeout=600)
        response.raise_for_status()
        return response.content

    def count(self, body: bytes) -> int:
        return len(json.loads(body)["graph"])

    def full_graph(self) -> bytes:
        return self.walk(100, MIDDLE, "both")

    def run_state(self, run_id: str) -> str:
        return self.session.get(f"{self.url}/api/v1/runs/{run_id}", timeout=60).json()["state"]

    def stored_events(self) -> int:
        return self.session.get(f"{self.url}/api/v1/events", params={"limit": 1}, timeout=60).json()["totalCount"]

    def settle(self) -> None:
        """Return once a read sees every answered event applied: a read behind a large backlog answers at once
        from what is applied, saying how many events it did not see (:data:`PENDING_HEADER`)."""
        while True:
            answer = self.session.get(f"{self.url}/api/v1/events", params={"limit": 1}, timeout=60)
            answer.raise_for_status()
            if int(answer.headers.get(PENDING_HEADER, "0")) == 0:
                return
            time.sleep(0.05)

    def listings(self) -> dict[str, Listing | None]:
        jobs = f"/api/v1/namespaces/{NAMESPACE}/jobs"
        return {
            "get_job": (f"{jobs}/{LISTED_JOB}", {}, "latestRuns"),
            "list_jobs": (jobs, {"limit": 100}, "jobs"),
            "get_dataset": (f"/api/v1/namespaces/{NAMESPACE}/datasets/{LISTED_DATASET}", {}, "fields"),
            "list_runs": (f"{jobs}/{LISTED_JOB}/runs", {}, "runs"),
            "search": ("/api/v1/search", {"q": SEARCH}, "results"),
        }


class Feast(Consumer):
    def post(self, path: str, body: Any) -> requests.Response:
        # Feast answers a full batch with a 204 carrying a body ("null"); uvicorn then aborts the connection,
        # so each post uses its own connection rather than a kept-alive one that would be reset under the next.
        return self.session.post(f"{self.url}{path}", json=body, timeout=600, headers={"Connection": "close"})

    def walk(self, depth: int, root: str = ROOT, direction: str = "upstream") -> bytes:
        path = f"lineage/openlineage/graph/dataset/{NAMESPACE}/{root}"
        params: dict[str, str | int] = {"depth": min(depth, 50), "direction": direction}
        response = self.session.get(f"{self.url}/api/v1/{path}", params=params, timeout=600)
        response.raise_for_status()
        return response.content

    def count(self, body: bytes) -> int:
        return len(json.loads(body)["nodes"])

    def full_graph(self) -> bytes:
        return self.walk(50, MIDDLE, "both")

    def whole_graph(self) -> bytes:
        response = self.session.get(f"{self.url}/api/v1/lineage/openlineage/graph", timeout=600)
        response.raise_for_status()
        return response.content

    def run_state(self, run_id: str) -> str:
        found = self.session.get(f"{self.url}/api/v1/lineage/openlineage/runs/{run_id}", timeout=60).json()
        return str(found.get("state") or found.get("run", {}).get("state") or found)

    def listings(self) -> dict[str, Listing | None]:
        base = "/api/v1/lineage/openlineage"
        return {
            "get_job": None,  # Feast has no one-job read
            "list_jobs": (f"{base}/jobs", {}, "jobs"),  # every job: no paging
            "get_dataset": None,  # no one-dataset read; the nearest, a dataset's versions, is dataset_versions
            "dataset_versions": (f"{base}/datasets/{NAMESPACE}/{LISTED_DATASET}/versions", {}, "versions"),
            "list_runs": (f"{base}/runs", {"job_namespace": NAMESPACE, "job_name": LISTED_JOB}, "runs"),
            "search": None,  # no search
        }

    def stored_events(self) -> int:
        rows, offset = 0, 0
        while True:
            page = self.session.get(
                f"{self.url}/api/v1/lineage/openlineage/events", params={"limit": 1000, "offset": offset}, timeout=600
            ).json()["events"]
            rows += len(page)
            offset += 1000
            if len(page) < 1000:
                return rows


@contextmanager
def serve_ours(store: str, folder: Path, *options: str, tree: Path | None = None) -> Iterator[Ours]:
    """``airflow-lineage serve`` on ``store``, importing the package from ``tree`` when given (another checkout)."""
    from support.served import serve_consumer

    with serve_consumer(store, folder, *options, tree=tree) as served:
        consumer = Ours(served.url)
        consumer.store = store
        consumer.pid = served.pid
        yield consumer


@contextmanager
def postgres_schema(prefix: str = "alp_bench", keep: bool = False) -> Iterator[str]:
    """A store URL on a fresh schema (named ``prefix`` and a random suffix) of ``PG_URL``'s database, dropped
    afterwards unless ``keep`` (then its name is printed)."""
    import sqlalchemy as sa

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        if keep:
            print(f"kept schema {schema}")
        else:
            with admin.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@contextmanager
def open_consumer(kind: str, folder: Path) -> Iterator[Consumer]:
    consumer: Consumer
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        with serve_ours(f"sqlite:///{folder / 'lineage.db'}", folder) as consumer:
            yield consumer
    elif kind == "postgres":
        with postgres_schema() as url, serve_ours(url, folder) as consumer:
            yield consumer
    else:
        from support.feast_consumer import FeastLineageServer

        with FeastLineageServer(folder) as server:
            consumer = Feast(server.url)
            consumer.pid = server.process.pid if server.process else 0
            yield consumer


def correctness(consumer: Consumer, events: list[dict[str, Any]]) -> dict[str, Any]:
    """Duplicates stored, state after COMPLETE-before-START, and the answer to a malformed body."""
    before = consumer.stored_events()
    consumer.post("/api/v1/lineage/batch", events[:10])
    duplicates = consumer.stored_events() - before
    run_id = str(uuid.uuid4())
    complete, start = dict(events[1]), dict(events[0])
    complete["run"], start["run"] = {"runId": run_id}, {"runId": run_id}
    consumer.post("/api/v1/lineage", complete)
    consumer.post("/api/v1/lineage", start)
    malformed = consumer.post("/api/v1/lineage", {"eventType": "START", "run": {}, "job": {}}).status_code
    return {
        "resent_10_stored_again": duplicates,
        "complete_then_start_state": consumer.run_state(run_id),
        "malformed_status": malformed,
    }


def listings(consumer: Consumer, result: dict[str, Any], suffix: str = "") -> None:
    """Median and p99 of each listing of ``consumer`` into ``result`` (None where it has no such endpoint)."""
    repeat = LISTING_REPEAT if isinstance(consumer, Ours) else LISTING_REPEAT // 4
    for name, listing in consumer.listings().items():
        if listing is None:
            result[f"{name}{suffix}"] = None
            continue
        path, params, key = listing

        def read(p: str = path, q: dict[str, Any] = params) -> bytes:
            return consumer.body(p, q)

        median, p99, body = _percentiles(read, repeat)
        items = len(json.loads(body)[key])
        result[f"{name}{suffix}"] = {"median_ms": median, "p99_ms": p99, "items": items, "bytes": len(body)}
    if isinstance(consumer, Ours) and not suffix:
        result["list_jobs_first_read"] = first_reads(consumer)


def first_reads(consumer: Ours) -> dict[str, Any]:
    """Median and p99 of reading each page of 100 jobs but the first once (offsets 100, 200, ...): pages no request
    has read before, so every Job on them is built from the store (none kept in memory yet)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/jobs"
    total = json.loads(consumer.body(path, {"limit": 1}))["totalCount"]
    times = []
    for offset in range(100, total, 100):
        start = time.perf_counter()
        consumer.body(path, {"limit": 100, "offset": offset})
        times.append((time.perf_counter() - start) * 1000)
    p99 = statistics.quantiles(times, n=100)[98]
    return {"median_ms": statistics.median(times), "p99_ms": p99, "pages": len(times)}


def _listings(consumer: Consumer, kind: str, result: dict[str, Any]) -> None:
    """The listings of ``consumer``; on PostgreSQL first as loaded (no statistics), then after ``ANALYZE``."""
    if kind == "postgres" and isinstance(consumer, Ours):
        listings(consumer, result, "_unanalyzed")
        analyze(consumer.store)
    listings(consumer, result)


def analyze(store: str) -> None:
    """``VACUUM ANALYZE`` a PostgreSQL store: what autovacuum does within a minute of a load (it is off on the
    test server): statistics for the planner, and the visibility map index-only scans need."""
    import sqlalchemy as sa

    engine = sa.create_engine(store, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    finally:
        engine.dispose()


def changed_store_walk_ms(consumer: Ours, template: dict[str, Any], repeat: int) -> float:
    """Median seconds of the depth-10 walk when the store changed since the last one: before each walk (untimed) a
    START of a job outside the walked graph is posted and applied, so no answer kept from before is served, while
    the graph cards of the walked nodes stay valid (their versions did not move)."""
    times = []
    for index in range(repeat + 1):
        touch = {**template, "inputs": [], "outputs": []}
        touch["job"] = {"facets": {}, "namespace": "bench-touch", "name": f"touch_{index}"}
        touch["run"] = {"facets": {}, "runId": str(uuid.uuid4())}
        consumer.post("/api/v1/lineage", touch).raise_for_status()
        consumer.settle()
        started = time.perf_counter()
        consumer.walk(10)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def measure(kind: str, n_jobs: int, folder: Path, budget: float, only_listings: bool = False) -> dict[str, Any]:
    events = workload(n_jobs)
    single, rest = events[: min(500, len(events) // 10)], events[min(500, len(events) // 10) :]
    result: dict[str, Any] = {"consumer": kind, "jobs": n_jobs, "events": len(events)}
    with open_consumer(kind, folder) as consumer:
        started = time.perf_counter()
        for event in single:
            consumer.post("/api/v1/lineage", event).raise_for_status()
        result["single_events_per_s"] = len(single) / (time.perf_counter() - started)
        started, sent = time.perf_counter(), 0
        for offset in range(0, len(rest), BATCH):
            response = consumer.post("/api/v1/lineage/batch", rest[offset : offset + BATCH])
            assert response.status_code in (200, 204), response.text[:500]
            sent += len(rest[offset : offset + BATCH])
            if time.perf_counter() - started > budget:
                result["ingest_stopped_after_s"] = budget
                break
        elapsed = time.perf_counter() - started
        result["batch_events_per_s"] = sent / elapsed
        result["batch_ingested"] = sent
        if only_listings:
            _listings(consumer, kind, result)
            result["rss_mib"], result["peak_rss_mib"] = (v / 1024 for v in _rss_kib(consumer.pid))
            return result
        repeat = 3 if kind == "feast" else 15
        # Walks read what is applied: past a backlog of a few thousand events a read no longer waits for it.
        consumer.settle()
        for depth in (3, 10):

            def walk(d: int = depth) -> bytes:
                return consumer.walk(d)

            seconds, body, first = _timed(walk, repeat)
            result[f"walk_depth{depth}_ms"], result[f"walk_depth{depth}_nodes"] = seconds * 1000, consumer.count(body)
            result[f"walk_depth{depth}_first_ms"] = first * 1000
        if isinstance(consumer, Ours):
            result["walk_depth10_changed_ms"] = changed_store_walk_ms(consumer, events[0], repeat) * 1000
        if isinstance(consumer, Ours) and kind == "postgres":
            # The repeated depth-10 walk again as a long-running store has it: analyzed by autovacuum.
            analyze(consumer.store)
            seconds, _body, _first = _timed(lambda: consumer.walk(10), repeat)
            result["walk_depth10_analyzed_ms"] = seconds * 1000
        seconds, body, _first = _timed(consumer.full_graph, 3)
        result["full_graph_ms"], result["full_graph_nodes"] = seconds * 1000, consumer.count(body)
        if isinstance(consumer, Feast):
            seconds, body, _first = _timed(consumer.whole_graph, 3)
            result["feast_whole_graph_ms"], result["feast_whole_graph_nodes"] = seconds * 1000, consumer.count(body)
        if isinstance(consumer, Ours):
            # The same walks from a second server on the same store with no graph cards: every node's
            # data is read from the store on every request (the cold path, measured as a median).
            with serve_ours(consumer.store, folder, "--graph-cache-nodes", "0") as uncached:
                for depth in (3, 10):

                    def walk_uncached(d: int = depth) -> bytes:
                        return uncached.walk(d)

                    seconds, _body, _first = _timed(walk_uncached, repeat)
                    result[f"walk_depth{depth}_no_cache_ms"] = seconds * 1000
        _listings(consumer, kind, result)
        result.update(correctness(consumer, events))
        result["rss_mib"], result["peak_rss_mib"] = (v / 1024 for v in _rss_kib(consumer.pid))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument(
        "--consumers", nargs="+", default=["sqlite", "postgres", "feast"], choices=["sqlite", "postgres", "feast"]
    )
    parser.add_argument(
        "--feast-budget", type=float, default=240, help="seconds of batch ingest allowed to Feast per size"
    )
    parser.add_argument("--only-listings", action="store_true", help="ingest, then only the listings (no walks)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "consumer_bench.json")
    args = parser.parse_args()
    results = []
    work = HERE / "results" / "consumer_bench_work"
    for n_jobs in args.sizes:
        for kind in args.consumers:
            budget = args.feast_budget if kind == "feast" else 3600
            folder = work / f"{kind}-{n_jobs}-{uuid.uuid4().hex[:6]}"
            row = measure(kind, n_jobs, folder, budget, only_listings=args.only_listings)
            results.append(row)
            print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
