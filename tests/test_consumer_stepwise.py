"""Walks one hop per statement (``CollectLineageOperator``'s), on SQLite and PostgreSQL: ``max_nodes`` bounds
every hop and the whole walk, ``hops=None`` is unbounded yet ends on cycles, and without bounds hit the
edges are exactly those of the one-statement walk (``walks.walk_edges``)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph import stepwise, walks
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def store(store_url: str) -> Iterator[LineageStore]:
    lineage_store = LineageStore(store_url)
    yield lineage_store
    lineage_store.dispose()


def _ingest(store: LineageStore, flows: list[tuple[str, list[str], list[str]]]) -> dict[str, int]:
    """One COMPLETE event per ``(job, inputs, outputs)``; the datasets' ids by name."""
    events = [
        parse_event(run_event("COMPLETE", job, inputs=[dataset(i) for i in ins], outputs=[dataset(o) for o in outs]))
        for job, ins, outs in flows
    ]
    with store.write() as conn:
        for start in range(0, len(events), 2000):
            ingest_events(conn, events[start : start + 2000])
    n = tables.nodes.c
    with store.read() as conn:
        return dict(conn.execute(sa.select(n.name, n.id).where(n.kind == "dataset")).all())  # type: ignore[arg-type]


def _stepwise(store: LineageStore, root: int, direction: str, **bounds: Any) -> list[tuple[int, int, int]]:
    with store.read() as conn:
        return stepwise.walk_edges_stepwise(conn, walks.DATASET_EDGES[direction], [root], **bounds)  # type: ignore[index]


def test_unbounded_depth_on_a_10000_node_cycle_stays_within_max_nodes_and_ends(store: LineageStore) -> None:
    size = 10_000
    ring = [(f"copy_{i}", [f"d{i}"], [f"d{(i + 1) % size}"]) for i in range(size)]
    ids = _ingest(store, ring)
    root = ids["d0"]

    bounded = _stepwise(store, root, "downstream", hops=None, max_nodes=100)
    assert len(bounded) == 100
    assert [depth for _via, _node, depth in bounded] == list(range(1, 101))
    assert bounded[-1][1] == ids["d100"]

    whole = _stepwise(store, root, "upstream", hops=None, max_nodes=1_000_000)
    assert len(whole) == size  # every edge of the ring once; the walk stops where it closes
    assert whole[-1] == (ids["d1"], root, size)  # the closing edge is returned, not followed


def test_no_hop_reads_more_than_max_nodes_on_either_store(store: LineageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # A root fed by 500 datasets, each fed by 3 more: hop 1 alone has 500 edges, hop 2 has 1,500.
    flows = [("fan_in", [f"s{i}" for i in range(500)], ["root"])]
    flows += [(f"feed_{i}", [f"t{i}_{k}" for k in range(3)], [f"s{i}"]) for i in range(500)]
    ids = _ingest(store, flows)
    hop_sizes: list[int] = []
    real_hop = stepwise._hop

    def counted_hop(*args: Any, **kwargs: Any) -> list[tuple[int, int]]:
        found = real_hop(*args, **kwargs)
        hop_sizes.append(len(found))
        return found

    monkeypatch.setattr(stepwise, "_hop", counted_hop)
    found = _stepwise(store, ids["root"], "upstream", hops=None, max_nodes=40)
    assert len(found) == 40 and hop_sizes == [40]
    assert {depth for _via, _node, depth in found} == {1}

    hop_sizes.clear()
    found = _stepwise(store, ids["root"], "upstream", hops=2, max_nodes=600)
    assert hop_sizes == [500, 100] and len(found) == 600
    assert found[:500] == sorted((ids["root"], ids[f"s{i}"], 1) for i in range(500))


@pytest.mark.parametrize("seed", range(3))
def test_without_bounds_hit_the_edges_are_those_of_the_one_statement_walk(store: LineageStore, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(30)]
    flows = [
        (f"job{k}", rng.sample(names, rng.randrange(1, 4)), rng.sample(names, rng.randrange(1, 3))) for k in range(45)
    ]
    ids = _ingest(store, flows)
    for direction in ("upstream", "downstream"):
        for root in rng.sample(sorted(ids.values()), 5):
            for hops in (1, 3, 6):
                with store.read() as conn:
                    bounds = walks.WalkBounds(hops=hops, max_nodes=100_000)
                    expected = walks.walk_edges(conn, walks.DATASET_EDGES[direction], [root], bounds)  # type: ignore[index]
                found = _stepwise(store, root, direction, hops=hops, max_nodes=100_000)
                assert sorted(found) == sorted(expected), (direction, root, hops)
                assert found == sorted(found, key=lambda edge: (edge[2], edge[0], edge[1]))  # nearest first
                cut = _stepwise(store, root, direction, hops=hops, max_nodes=7)
                assert cut == found[:7]


def test_bounds_are_checked_with_the_value_named(store: LineageStore) -> None:
    with store.read() as conn:
        spec = walks.DATASET_EDGES["upstream"]
        with pytest.raises(ValueError, match="hops must be >= 1 or None, got 0"):
            stepwise.walk_edges_stepwise(conn, spec, [1], hops=0, max_nodes=5)
        with pytest.raises(ValueError, match="max_nodes must be >= 1, got -3"):
            stepwise.walk_edges_stepwise(conn, spec, [1], hops=None, max_nodes=-3)
