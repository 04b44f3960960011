"""Walks through dataset identity: the depth-10 upstream walk on the consumer benchmark's graph,
plain and with 20% of its datasets reached only through a symlink alias, side by side.

The plain graph is ``consumer_workload.workload(5000)`` (10 layers of jobs, each reading 2-3 datasets of the
layer before). The aliased graph is the same graph in which, for 20% of the datasets (picked at random among
the datasets a job writes and a later job reads), the job that writes the dataset names it as Spark does: by
its files, ``file`` / ``/warehouse/<layer>/<table>``, with a ``symlinks`` facet naming the ``bench`` table
(type ``TABLE``) that the downstream jobs read. Upstream of such a table the walk goes on only through the
group ``{bench table, its files}``; the answer shows the group once, under the table's name. So both answers
must hold the same nodes and edges, by id, which the benchmark checks before timing anything.

Both graphs are loaded into two stores served side by side (``airflow-lineage serve``, one per store), and
the walk is asked of one server then the other, alternately (the machine is noisy: an A/B comparison must
interleave), after warm-up requests; the figures are medians over ``--repeat`` requests each, with the
median of the per-pair ratios beside. SQLite and PostgreSQL; on PostgreSQL as loaded (no statistics) and
again after a ``VACUUM ANALYZE`` of the two stores' tables. The stores are removed afterwards.

    .venv/bin/python bench/identity_walk.py                      # N = 5,000, SQLite and PostgreSQL, ~4 minutes
    .venv/bin/python bench/identity_walk.py --stores sqlite --repeat 61
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from consumer_bench import BATCH, Ours, postgres_schema, serve_ours  # noqa: E402
from consumer_workload import NAMESPACE, workload  # noqa: E402

#: Share of the datasets reached only through a symlink alias.
SHARE = 0.2
#: Where the aliased datasets' files are: Spark's dataset namespace for local files.
FILES_NAMESPACE = "file"
SYMLINKS_SCHEMA = "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet"
SPARK = "https://github.com/OpenLineage/OpenLineage/tree/1.9.0/integration/spark"


def files_name(table: str) -> str:
    """The storage location Spark names the ``bench`` table ``layerN.table_i`` by."""
    layer, table_name = table.split(".", 1)
    return f"/warehouse/{layer}/{table_name}"


def _read_tables(events: list[dict[str, Any]]) -> set[str]:
    """Names of the ``bench`` datasets some job reads."""
    return {ref["name"] for event in events for ref in event.get("inputs", ()) if ref["namespace"] == NAMESPACE}


def _written_tables(events: list[dict[str, Any]]) -> set[str]:
    return {ref["name"] for event in events for ref in event.get("outputs", ()) if ref["namespace"] == NAMESPACE}


def aliased_workload(n_jobs: int, share: float = SHARE, seed: int = 11) -> tuple[list[dict[str, Any]], set[str]]:
    """The workload with ``share`` of its datasets written under their files' name and a symlink to the table
    (see the module); the events and the aliased table names."""
    events = workload(n_jobs)
    every = _read_tables(events) | _written_tables(events)
    candidates = sorted(_read_tables(events) & _written_tables(events))
    aliased = set(random.Random(seed).sample(candidates, round(share * len(every))))
    for event in events:
        for ref in event.get("outputs", ()):
            if ref["namespace"] == NAMESPACE and ref["name"] in aliased:
                table = ref["name"]
                ref["namespace"], ref["name"] = FILES_NAMESPACE, files_name(table)
                ref.setdefault("facets", {})["symlinks"] = {
                    "_producer": SPARK,
                    "_schemaURL": SYMLINKS_SCHEMA,
                    "identifiers": [{"namespace": NAMESPACE, "name": table, "type": "TABLE"}],
                }
    return events, aliased


def load(consumer: Ours, events: list[dict[str, Any]]) -> None:
    """Post ``events`` in batches of :data:`BATCH`."""
    for offset in range(0, len(events), BATCH):
        response = consumer.post("/api/v1/lineage/batch", events[offset : offset + BATCH])
        assert response.status_code in (200, 204), response.text[:500]


def answer_shape(body: bytes) -> tuple[set[str], set[tuple[str, str]]]:
    """Node ids and edges of a graph answer."""
    graph = json.loads(body)["graph"]
    edges = {(edge["origin"], edge["destination"]) for node in graph for edge in node["outEdges"]}
    return {node["id"] for node in graph}, edges


def interleaved(plain: Ours, aliased: Ours, depth: int, repeat: int, warmup: int = 3) -> dict[str, Any]:
    """Medians (ms) of the walk asked of ``plain`` and ``aliased`` alternately, ``repeat`` times each, after
    ``warmup`` requests each; which server goes first alternates too."""
    for _ in range(warmup):
        plain.walk(depth), aliased.walk(depth)
    times: dict[str, list[float]] = {"plain": [], "aliased": []}
    for index in range(repeat):
        pair = [("plain", plain), ("aliased", aliased)]
        for label, consumer in pair if index % 2 == 0 else pair[::-1]:
            started = time.perf_counter()
            consumer.walk(depth)
            times[label].append((time.perf_counter() - started) * 1000)
    plain_ms, aliased_ms = statistics.median(times["plain"]), statistics.median(times["aliased"])
    ratios = sorted(a / p for a, p in zip(times["aliased"], times["plain"], strict=True))
    return {
        "plain_ms": plain_ms,
        "aliased_ms": aliased_ms,
        "ratio": aliased_ms / plain_ms,
        "paired_ratio_median": statistics.median(ratios),
        "requests_each": repeat,
    }


def check_answers(plain: Ours, aliased: Ours, depth: int) -> dict[str, Any]:
    """The two answers hold the same node ids and edges (the aliased one has every group once, by its table's
    name); their node counts."""
    plain_nodes, plain_edges = answer_shape(plain.walk(depth))
    aliased_nodes, aliased_edges = answer_shape(aliased.walk(depth))
    assert aliased_nodes == plain_nodes, (len(plain_nodes), len(aliased_nodes), sorted(aliased_nodes ^ plain_nodes)[:5])
    assert aliased_edges == plain_edges, (len(plain_edges), len(aliased_edges))
    files = [node for node in aliased_nodes if node.startswith(f"dataset:{FILES_NAMESPACE}:")]
    assert not files, files[:5]
    return {"nodes": len(plain_nodes), "edges": len(plain_edges)}


def analyze_store(url: str) -> None:
    """``VACUUM ANALYZE`` the tables of the PostgreSQL store at ``url`` (its schema only): what autovacuum does
    within a minute of a load (it is off on the test server)."""
    import sqlalchemy as sa

    from airflow_lineage_provider.consumer.store.schema import tables

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            for table in tables.metadata.sorted_tables:
                conn.exec_driver_sql(f"VACUUM ANALYZE {table.name}")
    finally:
        engine.dispose()


@contextmanager
def store_url(kind: str, folder: Path, label: str) -> Iterator[str]:
    """A fresh store URL on ``kind`` (a file under ``folder``, or a private PostgreSQL schema)."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / f'{label}.db'}"
    else:
        with postgres_schema() as url:
            yield url


def aliased_groups(body: bytes) -> int:
    """Nodes of a graph answer that list an alias (the aliased tables the walk reached)."""
    graph = json.loads(body)["graph"]
    return sum(1 for node in graph if node["data"].get("aliases"))


def measure(kind: str, n_jobs: int, repeat: int, folder: Path) -> dict[str, Any]:
    """Load both graphs into two stores on ``kind``, serve them side by side, check and time the walks."""
    folder.mkdir(parents=True, exist_ok=True)
    plain_events = workload(n_jobs)
    aliased_events, aliased = aliased_workload(n_jobs)
    result: dict[str, Any] = {"store": kind, "jobs": n_jobs, "aliased_datasets": len(aliased)}
    with ExitStack() as stack:
        urls = {label: stack.enter_context(store_url(kind, folder, label)) for label in ("plain", "aliased")}
        plain = stack.enter_context(serve_ours(urls["plain"], folder / "plain"))
        alias = stack.enter_context(serve_ours(urls["aliased"], folder / "aliased"))
        load(plain, plain_events)
        load(alias, aliased_events)
        result.update(check_answers(plain, alias, 10))
        result["groups_in_answer"] = aliased_groups(alias.walk(10))
        result["depth10"] = interleaved(plain, alias, 10, repeat)
        if kind == "postgres":
            analyze_store(urls["plain"])
            analyze_store(urls["aliased"])
            result["depth10_analyzed"] = interleaved(plain, alias, 10, repeat)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--repeat", type=int, default=31, help="requests per graph (at least 15)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "identity_walk.json")
    args = parser.parse_args()
    if args.repeat < 15:
        parser.error("--repeat must be at least 15")
    work = HERE / "results" / "identity_walk_work"
    results = []
    for kind in args.stores:
        folder = work / f"{kind}-{uuid.uuid4().hex[:6]}"
        try:
            row = measure(kind, args.jobs, args.repeat, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # two stores of ~10,000 events each
        results.append(row)
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
