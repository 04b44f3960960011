"""``CollectLineageOperator`` end to end on the 1,000,000-edge graph of ``consumer_walk_1m.py``, with 50 failed
columns read from DQX-shaped results: wall time and rows written, on PostgreSQL (and SQLite).

The graph is ``consumer_walk_1m.synthetic_graph`` (20 layers alternating datasets and jobs, 20,000 nodes
each, 2-3 upstream neighbours per node) stored the way the ingest stores table lineage: one io group per
job (its upstream datasets as inputs, its downstream datasets as outputs; ~1,000,000 members), plus one
column edge per input → output pair of a group, between fields ``c0`` ... ``c49`` (``c<k>`` → ``c<k>`` with
``k`` from the pair), all bulk-loaded into the store's own tables and ANALYZEd. The source is the first
dataset of layer 10 with lineage both ways. Its check results are a DQX-shaped table (``_errors`` /
``_warnings`` as JSON, 10,000 rows, issues of three check runs) whose current run flags all 50 columns.

Timed, median of ``--repeat`` runs after a first: ``operator.execute()`` with DQX's defaults (``depth`` 100,
``max_nodes`` 100, no lookback) for the four directions, ``write_mode="overwrite"`` — the seed read, the
four stepwise walks, and the write, each engine created and disposed by the operator as in a task. Side by
side: the same four walks as one recursive CTE each (``walks.walk_edges``, the operator's walk before).

    .venv/bin/python bench/collect_lineage_1m.py [--backends postgres sqlite] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from consumer_bench import postgres_schema  # noqa: E402
from consumer_walk_1m import LAYERS, PER_LAYER, synthetic_graph  # noqa: E402

from airflow_lineage_provider.consumer.store import LineageStore  # noqa: E402
from airflow_lineage_provider.consumer.store.graph import walks  # noqa: E402
from airflow_lineage_provider.consumer.store.schema import tables  # noqa: E402
from airflow_lineage_provider.consumer.store.write.ingest import field_key, io_group_key  # noqa: E402

COLUMNS = [f"c{k}" for k in range(50)]
SOURCE_LAYER = 10
RUN = "dq-run-current"


def source_id(edges: list[tuple[int, int]]) -> int:
    """The first dataset of layer 10 read by a job that writes something: lineage both ways."""
    writers = {origin for origin, _ in edges if (origin - 1) // PER_LAYER % 2 == 1}
    first = SOURCE_LAYER * PER_LAYER + 1
    read_by = defaultdict(set)
    for origin, destination in edges:
        if first <= origin < first + PER_LAYER and destination in writers:
            read_by[origin].add(destination)
    return min(read_by)


def lineage_rows(nodes: list[dict], edges: list[tuple[int, int]]) -> dict[str, list[dict[str, Any]]]:
    """The graph as rows of the store's tables: nodes, io groups and members, fields and column edges."""
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    upstream, downstream = defaultdict(list), defaultdict(list)
    for origin, destination in edges:
        upstream[destination].append(origin)
        downstream[origin].append(destination)
    keys = {node["id"]: node["node_key"] for node in nodes}
    groups: list[dict[str, Any]] = []
    members: list[dict[str, Any]] = []
    fields: dict[str, dict[str, Any]] = {}
    column_edges: dict[tuple[int, int], dict[str, Any]] = {}
    for node in nodes:
        job = node["id"]
        if node["kind"] != "job" or not downstream[job]:
            continue
        inputs, outputs = upstream[job], downstream[job]
        group_id = len(groups) + 1
        key = io_group_key(keys[job], (keys[i] for i in inputs), (keys[o] for o in outputs))
        groups.append({"id": group_id, "group_key": key, "job_id": job, "last_seen": now})
        members += [{"group_id": group_id, "direction": "input", "dataset_id": i} for i in inputs]
        members += [{"group_id": group_id, "direction": "output", "dataset_id": o} for o in outputs]
        for source in inputs:
            for target in outputs:
                name = COLUMNS[(source * 7 + target) % len(COLUMNS)]
                ends = []
                for dataset in (source, target):
                    fkey = field_key(dataset, name)
                    if fkey not in fields:
                        fields[fkey] = {"id": len(fields) + 1, "field_key": fkey, "dataset_id": dataset, "name": name}
                    ends.append(fields[fkey]["id"])
                column_edges[(ends[0], ends[1])] = {
                    "source_field_id": ends[0],
                    "target_field_id": ends[1],
                    "transformation": None,
                    "last_seen": now,
                }
    # The source dataset has all 50 columns, as its check results say.
    source = source_id(edges)
    for name in COLUMNS:
        fkey = field_key(source, name)
        fields.setdefault(fkey, {"id": len(fields) + 1, "field_key": fkey, "dataset_id": source, "name": name})
    return {
        "nodes": nodes,
        "io_groups": groups,
        "io_members": members,
        "fields": list(fields.values()),
        "column_edges": list(column_edges.values()),
    }


def results_rows(count: int = 10_000, seed: int = 5) -> list[dict[str, Any]]:
    """DQX-shaped check results: issues of three runs; the current run's flag all 50 columns."""
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        errors = [
            {
                "name": "rule",
                "message": "failed",
                "columns": rng.sample(COLUMNS, 2),
                "run_id": rng.choice([RUN, "a", "b"]),
            }
        ]
        warnings = [{"name": "warn", "message": "odd", "columns": [COLUMNS[index % 50]], "run_id": RUN}]
        rows.append(
            {"id": index, "_errors": json.dumps(errors), "_warnings": json.dumps(warnings if index < 500 else [])}
        )
    return rows


def load(url: str, rows: dict[str, list[dict[str, Any]]]) -> float:
    started = time.perf_counter()
    store = LineageStore(url)
    with store.write() as conn:
        for name, batch in rows.items():
            table = getattr(tables, name)
            for offset in range(0, len(batch), 50_000):
                conn.execute(table.insert(), batch[offset : offset + 50_000])
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "postgresql":
            for name in ("io_groups", "fields"):
                table = getattr(tables, name).name
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
                )
        conn.commit()
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    store.dispose()
    return time.perf_counter() - started


def warehouse(url: str) -> None:
    """The check results table, and no lineage table yet."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE dq_output (id INTEGER, _errors TEXT, _warnings TEXT)")
        conn.execute(sa.text("INSERT INTO dq_output VALUES (:id, :_errors, :_warnings)"), results_rows())
    engine.dispose()


def run_operator(store_url: str, warehouse_conn: str, prefix: str, source: int, repeat: int) -> dict[str, Any]:
    from airflow_lineage_provider.operators.collect_lineage import CollectLineageOperator, LineageSearch

    os.environ["AIRFLOW_CONN_BENCH_WAREHOUSE"] = warehouse_conn
    os.environ["AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL"] = store_url
    no_lookback = LineageSearch(lookback_days=None)  # depth 100, max_nodes 100: DQX's defaults
    operator = CollectLineageOperator(
        task_id="collect",
        source_namespace="synthetic",
        source_name=f"l{SOURCE_LAYER}.n{source - SOURCE_LAYER * PER_LAYER - 1}",
        output_table=f"{prefix}dq_lineage",  # not lineage_edges: the store's own table may share the schema
        output_conn_id="bench_warehouse",
        write_mode="overwrite",
        results_output_table=f"{prefix}dq_output",
        upstream=no_lookback,
        downstream=no_lookback,
        column_upstream=no_lookback,
        column_downstream=no_lookback,
    )
    times, result = [], {}
    for attempt in range(repeat + 1):
        started = time.perf_counter()
        result = operator.execute({"run_id": RUN})
        if attempt:
            times.append(time.perf_counter() - started)
    if result["status"] != "ok":
        raise RuntimeError(f"the operator answered {result}")
    return {"wall_ms": statistics.median(times) * 1000, "rows": result["rows"], "counts": result["counts"]}


def _recursive(conn: Any, spec: Any, roots: list[int]) -> list[tuple[int, int, int]]:
    return walks.walk_edges(conn, spec, roots, walks.WalkBounds(hops=100, max_nodes=100))


def _stepwise(conn: Any, spec: Any, roots: list[int]) -> list[tuple[int, int, int]]:
    from airflow_lineage_provider.consumer.store.graph.stepwise import walk_edges_stepwise

    return walk_edges_stepwise(conn, spec, roots, hops=100, max_nodes=100)


def four_walks(store_url: str, walk: Any, source: int, repeat: int) -> dict[str, Any]:
    """The operator's four walks alone, with ``walk``, over one open store: median time and edges found."""
    store = LineageStore(store_url)
    keys = [field_key(source, name) for name in COLUMNS]
    times, found = [], 0
    try:
        for attempt in range(repeat + 1):
            started = time.perf_counter()
            with store.read() as conn:
                roots = list(
                    conn.execute(sa.select(tables.fields.c.id).where(tables.fields.c.field_key.in_(keys))).scalars()
                )
                found = sum(
                    len(walk(conn, spec, start))
                    for spec, start in (
                        (walks.DATASET_EDGES["upstream"], [source]),
                        (walks.DATASET_EDGES["downstream"], [source]),
                        (walks.COLUMN_EDGES["upstream"], roots),
                        (walks.COLUMN_EDGES["downstream"], roots),
                    )
                )
            if attempt:
                times.append(time.perf_counter() - started)
    finally:
        store.dispose()
    return {"walks_ms": statistics.median(times) * 1000, "edges": found}


@contextmanager
def _backend(kind: str) -> Iterator[tuple[str, str, str, str]]:
    """A fresh store and warehouse: ``(store URL, warehouse connection URI, table prefix, warehouse URL)``.

    On PostgreSQL both live in one private schema (the prefix qualifies the operator's tables, since an
    Airflow connection carries no search path); on SQLite, two files in a temporary folder.
    """
    if kind == "postgres":
        with postgres_schema() as store_url:
            schema = cast(str, make_url(store_url).query["options"]).split("=", 1)[1]  # one options= parameter
            yield store_url, "postgresql://postgres@127.0.0.1:5432/test", f"{schema}.", store_url
        return
    (HERE / "results").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=HERE / "results", prefix="collect-1m-") as folder:
        warehouse_url = f"sqlite:///{Path(folder) / 'warehouse.db'}"
        yield f"sqlite:///{Path(folder) / 'lineage.db'}", warehouse_url, "", warehouse_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["postgres", "sqlite"], choices=["postgres", "sqlite"])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    nodes, edges = synthetic_graph()
    rows = lineage_rows(nodes, edges)
    print(
        f"graph: {len(nodes):,} nodes ({LAYERS} layers), {len(rows['io_members']):,} io-group members "
        f"({len(rows['io_groups']):,} groups), {len(rows['column_edges']):,} column edges, "
        f"{len(rows['fields']):,} fields; 50 failed columns from 10,000 DQX-shaped result rows",
        flush=True,
    )
    for backend in args.backends:
        with _backend(backend) as (store_url, conn_uri, prefix, warehouse_url):
            seconds = load(store_url, rows)
            warehouse(warehouse_url)
            source = source_id(edges)
            operator = run_operator(store_url, conn_uri, prefix, source, args.repeat)
            stepwise = four_walks(store_url, _stepwise, source, args.repeat)
            recursive = four_walks(store_url, _recursive, source, args.repeat)
            print(
                f"{backend}: loaded in {seconds:.0f} s; operator end to end {operator['wall_ms']:.0f} ms, "
                f"{operator['rows']} rows {operator['counts']}; its four walks alone {stepwise['walks_ms']:.0f} ms "
                f"({stepwise['edges']} edges); as recursive CTEs {recursive['walks_ms']:.0f} ms "
                f"({recursive['edges']} edges)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
