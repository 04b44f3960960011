"""Table lineage (source dataset → target dataset through a job), stored as io groups, on SQLite and PostgreSQL.

An event pairs every input with every output. The store keeps one group per distinct (job, inputs,
outputs) instead of the pairs, so an event costs rows, time and memory linear in its inputs + outputs,
while a walk finds exactly the pairs: source → target through a job iff one event of the job read the
source and wrote the target, seen when the latest such event was.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import T0, dataset, run_event

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph import walks
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import LineageEvent, parse_event

pytest_plugins = ("support.consumer_fixtures",)

Edge = tuple[int, int, int]


@pytest.fixture
def store(store_url: str) -> Iterator[LineageStore]:
    lineage_store = LineageStore(store_url)
    yield lineage_store
    lineage_store.dispose()


def _event(job: str, inputs: list[str], outputs: list[str], time: float = 0) -> LineageEvent:
    return parse_event(
        run_event(
            "COMPLETE", job, time=time, inputs=[dataset(n) for n in inputs], outputs=[dataset(n) for n in outputs]
        )
    )


def _wide(inputs: int, outputs: int) -> LineageEvent:
    """One event of job ``wide`` reading ``in_0`` ... and writing ``out_0`` ...."""
    return _event("wide", [f"in_{i}" for i in range(inputs)], [f"out_{i}" for i in range(outputs)])


def _ingest(store: LineageStore, *batches: list[LineageEvent]) -> None:
    for batch in batches:
        with store.write() as conn:
            ingest_events(conn, batch)


def _ids(store: LineageStore) -> dict[str, int]:
    """Dataset name → node id."""
    n = tables.nodes.c
    with store.read() as conn:
        return dict(conn.execute(sa.select(n.name, n.id).where(n.kind == "dataset")).all())  # type: ignore[arg-type]


def _count(store: LineageStore, table: sa.Table) -> int:
    with store.read() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def _walk(
    store: LineageStore,
    root: int,
    direction: str,
    hops: int = 1,
    max_nodes: int = 100_000,
    since: datetime | None = None,
) -> list[Edge]:
    bounds = walks.WalkBounds(hops=hops, max_nodes=max_nodes, since=since)
    with store.read() as conn:
        return walks.walk_edges(conn, walks.DATASET_EDGES[direction], [root], bounds)  # type: ignore[index]


def _statements_to_ingest(store: LineageStore, event: LineageEvent) -> int:
    """How many SQL statements storing ``event`` takes (its time is measured by bench/wide_event_ingest.py)."""
    executed: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        executed.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        with store.write() as conn:
            ingest_events(conn, [event])
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
    return len(executed)


def test_an_event_with_1000_inputs_and_1000_outputs_is_stored_in_batched_statements_and_linear_rows(
    store: LineageStore,
) -> None:
    wide = _statements_to_ingest(store, _wide(1000, 1000))
    assert _count(store, tables.io_groups) == 1
    assert _count(store, tables.io_members) == 2000
    assert _count(store, tables.edges) == 2000
    narrow = _statements_to_ingest(store, _event("narrow", [f"a_{i}" for i in range(10)], ["b_0"]))
    # Rows travel in batches (SQLite splits a batch by its parameter limit): a statement per dataset would
    # be 2,000 more, one per pair a million.
    assert wide <= 2 * narrow, (narrow, wide)


def test_an_event_with_1000_inputs_and_1000_outputs_is_stored_within_100_mb(store: LineageStore) -> None:
    event = _wide(1000, 1000)
    store.engine  # noqa: B018 - create the tables outside the measure
    tracemalloc.start()
    try:
        with store.write() as conn:
            ingest_events(conn, [event])
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20, f"ingesting 1,000 x 1,000 allocated up to {peak / 2**20:.0f} MiB"


def test_a_walk_from_an_output_of_a_wide_event_finds_every_input_and_back(store: LineageStore) -> None:
    _ingest(store, [_wide(1000, 1000)])
    ids = _ids(store)
    inputs = sorted(ids[f"in_{i}"] for i in range(1000))
    outputs = sorted(ids[f"out_{i}"] for i in range(1000))
    out_7, in_3 = ids["out_7"], ids["in_3"]
    assert _walk(store, out_7, "upstream", hops=2) == [(out_7, source, 1) for source in inputs]
    assert _walk(store, in_3, "downstream", hops=2) == [(in_3, target, 1) for target in outputs]
    assert _walk(store, out_7, "downstream") == _walk(store, in_3, "upstream") == []


def test_a_walk_through_a_group_of_2000_inputs_reads_no_more_rows_than_max_nodes_allows(
    store: LineageStore,
) -> None:
    _ingest(store, [_wide(2000, 2000)])
    root = _ids(store)["out_0"]
    bounds = walks.WalkBounds(hops=2, max_nodes=25)
    spec = walks.DATASET_EDGES["upstream"]
    with store.read() as conn:
        walk = walks.walk_cte(spec, [root], bounds, conn.dialect.name, with_via=True)
        rows = conn.execute(sa.select(sa.func.count()).select_from(walk)).scalar_one()
        found = walks.walk_edges(conn, spec, [root], bounds)
    assert rows <= bounds.budget(1) == 51
    assert len(found) == 25 and {(via, depth) for via, _node, depth in found} == {(root, 1)}


@pytest.mark.parametrize("batches", ["one batch", "one batch per event"])
def test_pairs_are_those_of_one_event_not_every_input_and_output_of_the_job(store: LineageStore, batches: str) -> None:
    events = [_event("load", ["a"], ["x"]), _event("load", ["b"], ["y"], time=1)]
    _ingest(store, *([events] if batches == "one batch" else [[event] for event in events]))
    a, b, x, y = (_ids(store)[name] for name in "abxy")
    assert _walk(store, x, "upstream") == [(x, a, 1)]
    assert _walk(store, y, "upstream") == [(y, b, 1)]
    assert _walk(store, a, "downstream") == [(a, x, 1)]
    assert _walk(store, b, "downstream") == [(b, y, 1)]


@pytest.mark.parametrize("batches", ["one batch", "later event first", "earlier event first"])
def test_an_io_set_seen_again_reuses_its_group_at_its_latest_time(store: LineageStore, batches: str) -> None:
    later, earlier = _event("load", ["a", "b"], ["x"], time=10), _event("load", ["b", "a", "b"], ["x"], time=5)
    _ingest(
        store,
        *{
            "one batch": [[later, earlier]],
            "later event first": [[later], [earlier]],
            "earlier event first": [[earlier], [later]],
        }[batches],
    )
    with store.read() as conn:
        groups = conn.execute(sa.select(tables.io_groups.c.last_seen)).scalars().all()
    assert groups == [T0 + timedelta(seconds=10)]
    assert _count(store, tables.io_members) == 3


def test_since_keeps_a_pair_seen_recently_through_any_of_its_groups(store: LineageStore) -> None:
    month = 30 * 86400
    _ingest(store, [_event("load", ["a", "c"], ["x"], time=0), _event("load", ["a", "b"], ["x"], time=month)])
    a, b, c, x = (_ids(store)[name] for name in "abcx")
    recent = T0 + timedelta(seconds=month - 60)
    assert _walk(store, x, "upstream") == sorted([(x, a, 1), (x, b, 1), (x, c, 1)])
    assert _walk(store, x, "upstream", since=recent) == sorted([(x, a, 1), (x, b, 1)])
    assert _walk(store, c, "downstream", since=recent) == []


def _expected_walk(
    pairs: dict[tuple[str, str, str], datetime], root: str, direction: str, hops: int, since: datetime | None
) -> set[tuple[str, str, int]]:
    """``walk_edges`` computed from the pairs themselves: each edge from a node at its shortest distance."""
    steps: dict[str, set[str]] = {}
    for (source, target, _job), seen in pairs.items():
        if since is None or seen >= since:
            here, there = (target, source) if direction == "upstream" else (source, target)
            steps.setdefault(here, set()).add(there)
    distance, frontier = {root: 0}, [root]
    for depth in range(1, hops):
        frontier = [n for node in frontier for n in steps.get(node, ()) if n not in distance]
        distance.update((node, depth) for node in frontier)
    return {(via, node, d + 1) for via, d in distance.items() for node in steps.get(via, ())}


@pytest.mark.parametrize("seed", range(4))
def test_walks_find_exactly_the_pairs_of_random_events(store: LineageStore, seed: int) -> None:
    rng = random.Random(seed)
    names, jobs = [f"d{i}" for i in range(12)], ["j0", "j1", "j2"]
    events, pairs = [], {}
    groups: set[tuple[str, frozenset[str], frozenset[str]]] = set()
    for _ in range(40):
        job, seconds = rng.choice(jobs), rng.randrange(100)
        inputs, outputs = rng.sample(names, rng.randrange(5)), rng.sample(names, rng.randrange(4))
        events.append(_event(job, inputs, outputs, time=seconds))
        for source in inputs:
            for target in outputs:
                at = T0 + timedelta(seconds=seconds)
                pairs[(source, target, job)] = max(at, pairs.get((source, target, job), at))
        if inputs and outputs:
            groups.add((job, frozenset(inputs), frozenset(outputs)))
    _ingest(store, events[:15], events[15:30], events[30:])

    assert _count(store, tables.io_groups) == len(groups)
    assert _count(store, tables.io_members) == sum(len(inputs) + len(outputs) for _, inputs, outputs in groups)
    ids = _ids(store)
    name_of = {node: name for name, node in ids.items()}
    for root in names:
        if root not in ids:
            continue
        for direction in ("upstream", "downstream"):
            for hops in (1, 3):
                for since in (None, T0 + timedelta(seconds=50)):
                    found = _walk(store, ids[root], direction, hops=hops, since=since)
                    assert found == sorted(found, key=lambda edge: (edge[2], edge[0], edge[1]))
                    named = {(name_of[via], name_of[node], depth) for via, node, depth in found}
                    assert named == _expected_walk(pairs, root, direction, hops, since), (root, direction, hops, since)


def _members(store: LineageStore) -> Any:
    m = tables.io_members.c
    with store.read() as conn:
        return conn.execute(sa.select(m.group_id, m.direction, sa.func.count()).group_by(m.group_id, m.direction)).all()


def test_an_event_without_inputs_or_without_outputs_stores_no_group(store: LineageStore) -> None:
    _ingest(store, [_event("extract", [], ["x"]), _event("drop", ["x"], []), _event("copy", ["x"], ["y"])])
    assert sorted((direction, count) for _group, direction, count in _members(store)) == [("input", 1), ("output", 1)]
