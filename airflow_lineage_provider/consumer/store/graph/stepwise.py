"""Walks one hop per statement: ``max_nodes`` bounds every hop and the whole walk, on SQLite and PostgreSQL.

:mod:`.graph` walks in one recursive CTE, which answers the consumer's graph requests fastest, but SQLite
cannot cap a single hop inside a recursion (it takes a ``LIMIT`` on the recursive term as a bound on the
whole CTE), and an unbounded depth leaves only the overall bound. The walks here, which
``CollectLineageOperator`` runs (through :mod:`..reads`), are breadth first with one statement per hop instead:

* each hop reads the edges leaving the nodes first reached at the hop before (the frontier), distinct, in
  ``(via, node)`` order, at most as many as the walk may still return — so no hop returns more than
  ``max_nodes`` edges, and the walk returns at most ``max_nodes`` in all, nearest first;
* a node is expanded once, at its shortest distance: an edge into a node already reached is returned (it
  is lineage) but not followed, so a cycle ends the walk without a depth bound;
* ``hops=None`` walks until no new node is reached or ``max_nodes`` edges are found.

The edges are those of :func:`.graph.walk_edges` on the same graph when neither walk hits a bound.

Datasets known under several names (:mod:`.identity`): each hop steps into every name of the datasets it
reaches (:class:`.graph.Through`, fields: the field of the same name of every name), and the roots start with
all of theirs, so the walk goes on from each name along its own edges; an edge is then ``(via, name)`` for
each name, and a caller showing one node per dataset maps the names (:mod:`..reads`). By default a store
with such datasets is walked so (``grouped=None``: one probe).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select

from airflow_lineage_provider.consumer.store.graph.walks import Through, WalkSpec, every_name, through_groups
from airflow_lineage_provider.consumer.store.schema import tables

Edge = tuple[int, int, int]
"""``(via, node, depth)``: ``node`` reached from ``via`` at ``depth`` hops from a root."""


def _frontier(spec: WalkSpec, nodes: list[int]) -> object:
    """The frontier as a subquery with a ``node_id`` column, so that a spec's hop joins it as it joins a walk."""
    id_column = tables.fields.c.id if spec.into_fields else tables.nodes.c.id
    return select(id_column.label("node_id")).where(id_column.in_(nodes)).subquery("frontier")


#: Frontier nodes per statement (SQLite's default bound on parameters is 999 in older releases).
CHUNK = 900


def _hop(
    conn: Connection,
    spec: WalkSpec,
    nodes: list[int],
    limit: int,
    since: datetime | None,
    through: Through | None = None,
) -> list[tuple[int, int]]:
    """Distinct ``(via, node)`` edges from the sorted ``nodes``, in that order, at most ``limit``.

    Chunks of the sorted frontier are consecutive ranges of ``via``, so their answers in turn keep the order.
    """
    found: list[tuple[int, int]] = []
    for start in range(0, len(nodes), CHUNK):
        if len(found) >= limit:
            break
        frontier = _frontier(spec, nodes[start : start + CHUNK])
        hop = spec.hop(frontier, "step", dated=since is not None, through=through)  # type: ignore[arg-type]
        via = frontier.c.node_id  # type: ignore[attr-defined]
        query = select(via, hop.next).select_from(hop.joined).distinct()
        if since is not None and hop.seen is not None:
            query = query.where(hop.seen >= since)
        query = query.order_by(via, hop.next).limit(limit - len(found))
        found += [(origin, node) for origin, node in conn.execute(query)]
    return found


def walk_edges_stepwise(
    conn: Connection,
    spec: WalkSpec,
    roots: list[int],
    *,
    hops: int | None,
    max_nodes: int,
    since: datetime | None = None,
    grouped: bool | None = None,
) -> list[Edge]:
    """Edges crossed from ``roots``, nearest first: at most ``max_nodes``, none deeper than ``hops``.

    ``hops=None`` is unbounded depth (the walk still ends: each node is expanded once). ``since`` keeps
    only edges seen at or after it (DQX's lookback). ``grouped``: through datasets known under several names
    (see the module; None: when the store has any).
    """
    if hops is not None and hops < 1:
        raise ValueError(f"hops must be >= 1 or None, got {hops}")
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    grouped = through_groups(conn) if grouped is None else grouped
    through = Through(None, conn.dialect.name) if grouped else None
    reached = set(roots)
    if through is not None and roots:
        reached.update(conn.execute(every_name(spec, roots, through)).scalars())
    frontier = sorted(reached)
    edges: list[Edge] = []
    depth = 0
    while frontier and len(edges) < max_nodes and (hops is None or depth < hops):
        depth += 1
        found = _hop(conn, spec, frontier, max_nodes - len(edges), since, through)
        edges += [(via, node, depth) for via, node in found]
        frontier = sorted({node for _via, node in found} - reached)
        reached.update(frontier)
    return edges
