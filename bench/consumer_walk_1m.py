"""A bounded walk on a synthetic lineage graph of 1,000,000 edges: this consumer's store on PostgreSQL
(and SQLite), against an in-memory breadth-first search with networkx as the floor.

The graph has 20 layers that alternate datasets and jobs (20,000 nodes per layer); every node past the
first layer has 2-3 upstream neighbours in the layer before: 400,000 nodes, ~1,000,000 edges, bulk-loaded
into the store's own tables (``lineage_nodes``, ``lineage_edges``) with SQLAlchemy, then ANALYZEd. The walk
is upstream from a node of the last layer with ``depth`` 10 (20 edges) and ``maxNodes`` 1,000; networkx does
the same walk (BFS over reversed edges, 20 hops, first 1,000 nodes). The whole graph answer is timed with the
store's graph cards and from a second store object with none (every node's data read every time).

    .venv/bin/pip install networkx   # bench-only dependency
    .venv/bin/python bench/consumer_walk_1m.py [--backends postgres sqlite]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from consumer_bench import PG_URL  # noqa: E402

from airflow_lineage_provider.consumer.routers.graph.graph_walks import lineage_graph  # noqa: E402
from airflow_lineage_provider.consumer.store import LineageStore  # noqa: E402
from airflow_lineage_provider.consumer.store.graph import walks  # noqa: E402
from airflow_lineage_provider.consumer.store.schema import tables  # noqa: E402
from airflow_lineage_provider.consumer.store.write.ingest import node_key  # noqa: E402

LAYERS, PER_LAYER, DEPTH, MAX_NODES = 20, 20_000, 10, 1000


def synthetic_graph(seed: int = 11) -> tuple[list[dict], list[tuple[int, int]]]:
    """Nodes (ids 1..N, layer by layer) and ``(origin, destination)`` edges."""
    rng = random.Random(seed)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    nodes, edges = [], []
    for layer in range(LAYERS):
        kind = "dataset" if layer % 2 == 0 else "job"
        first = layer * PER_LAYER + 1
        for index in range(PER_LAYER):
            node = first + index
            name = f"l{layer}.n{index}"
            nodes.append(
                {
                    "id": node,
                    "node_key": node_key(kind, "synthetic", name),
                    "kind": kind,
                    "namespace": "synthetic",
                    "name": name,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            if layer:
                previous = first - PER_LAYER
                for source in rng.sample(range(PER_LAYER), rng.choice((2, 3, 3))):
                    edges.append((previous + source, node))
    return nodes, edges


def load(store: LineageStore, nodes: list[dict], edges: list[tuple[int, int]]) -> float:
    started = time.perf_counter()
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with store.write() as conn:
        for offset in range(0, len(nodes), 20_000):
            conn.execute(tables.nodes.insert(), nodes[offset : offset + 20_000])
        for offset in range(0, len(edges), 50_000):
            rows = [
                {"origin_id": a, "destination_id": b, "first_seen": now, "last_seen": now}
                for a, b in edges[offset : offset + 50_000]
            ]
            conn.execute(tables.edges.insert(), rows)
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    return time.perf_counter() - started


def measure_store(store: LineageStore, uncached: LineageStore, root: int, repeat: int = 20) -> dict[str, float]:
    """Medians of the walk alone and of the whole graph answer, with graph cards and without (``uncached``)."""
    bounds = walks.WalkBounds(hops=2 * DEPTH, max_nodes=MAX_NODES)
    walk_times, response_times, uncached_times, found = [], [], [], {}
    node_id = f"dataset:synthetic:l{LAYERS - 2}.n0"
    for _ in range(repeat):
        with store.read() as conn:
            started = time.perf_counter()
            found = walks.walk_nodes(conn, walks.NODE_EDGES["upstream"], [root], bounds)
            walk_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        body = lineage_graph(store, node_id, DEPTH, "upstream", MAX_NODES)
        response_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        lineage_graph(uncached, node_id, DEPTH, "upstream", MAX_NODES)
        uncached_times.append(time.perf_counter() - started)
    return {
        "walk_ms": statistics.median(walk_times) * 1000,
        "response_ms": statistics.median(response_times) * 1000,
        "response_no_cache_ms": statistics.median(uncached_times) * 1000,
        "nodes": len(found),
        "farthest": max(found.values()),
        "response_bytes": len(body),
    }


def measure_networkx(edges: list[tuple[int, int]], root: int, repeat: int = 20) -> dict[str, float]:
    import networkx as nx

    started = time.perf_counter()
    upstream = nx.DiGraph()
    upstream.add_edges_from((b, a) for a, b in edges)
    build = time.perf_counter() - started
    times, reached = [], {}
    for _ in range(repeat):
        started = time.perf_counter()
        reached = {root: 0}
        for parent, child in nx.bfs_edges(upstream, root, depth_limit=2 * DEPTH):
            if len(reached) >= MAX_NODES:
                break
            reached[child] = reached[parent] + 1
        times.append(time.perf_counter() - started)
    return {
        "walk_ms": statistics.median(times) * 1000,
        "build_s": build,
        "nodes": len(reached),
        "farthest": max(reached.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["postgres", "sqlite"], choices=["postgres", "sqlite"])
    args = parser.parse_args()
    nodes, edges = synthetic_graph()
    root = LAYERS * PER_LAYER - PER_LAYER - PER_LAYER + 1  # first node of layer 18 (a dataset)
    print(
        f"synthetic graph: {len(nodes):,} nodes, {len(edges):,} edges; depth {DEPTH} (20 edges), maxNodes {MAX_NODES}"
    )
    for backend in args.backends:
        if backend == "postgres":
            schema = f"alp_walk_{uuid.uuid4().hex[:8]}"
            admin = sa.create_engine(PG_URL)
            with admin.begin() as conn:
                conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
            url = f"{PG_URL}?options=-csearch_path%3D{schema}"
        else:
            path = HERE / "results" / f"walk-1m-{uuid.uuid4().hex[:6]}.db"
            path.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{path}"
        store, uncached = LineageStore(url), LineageStore(url, graph_cache_nodes=0)
        try:
            seconds = load(store, nodes, edges)
            result = measure_store(store, uncached, root)
            print(f"{backend}: loaded in {seconds:.0f} s; {result}", flush=True)
        finally:
            store.dispose()
            uncached.dispose()
            if backend == "postgres":
                with admin.begin() as conn:
                    conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
                admin.dispose()
            else:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(f"networkx: {measure_networkx(edges, root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
