"""Graph walks: one recursive CTE per walk, the same SQL on SQLite and PostgreSQL.

A walk starts from one or more nodes and follows edges in one direction, breadth first. Each row of the
recursive CTE is a path: ``(node_id, via, depth, path)`` where ``path`` is ``/id/id/.../`` and a hop to
a node already on the row's own path is refused (a full-path cycle guard, as Databricks DQX does on
Spark). Three bounds keep any walk small, however large or cyclic the graph:

* ``hops`` — no path is longer;
* ``max_nodes`` — the walk pulls at most ``hops * max_nodes`` paths (so on average no hop expands more
  than ``max_nodes`` paths; both databases evaluate the CTE lazily and stop there), and the answer holds
  at most ``max_nodes`` distinct nodes, nearest first;
* ``since`` — optionally, only edges seen at or after that time (DQX's ``lookback_days``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, Integer, Select, Table, Text, cast, func, literal, null, select

from airflow_lineage_provider.consumer.store import tables

Direction = Literal["upstream", "downstream"]


@dataclass(frozen=True)
class EdgeSpec:
    """Which edge table a walk follows, and from which column to which."""

    table: Table
    here: str
    next: str
    seen: str = "last_seen"

    def reverse(self) -> EdgeSpec:
        return EdgeSpec(self.table, self.next, self.here, self.seen)


#: The job↔dataset graph, walked toward sources (upstream) or consumers (downstream).
NODE_EDGES: dict[Direction, EdgeSpec] = {
    "upstream": EdgeSpec(tables.edges, here="destination_id", next="origin_id"),
    "downstream": EdgeSpec(tables.edges, here="origin_id", next="destination_id"),
}
#: Table lineage (dataset → dataset through a job).
DATASET_EDGES: dict[Direction, EdgeSpec] = {
    "upstream": EdgeSpec(tables.dataset_edges, here="target_id", next="source_id"),
    "downstream": EdgeSpec(tables.dataset_edges, here="source_id", next="target_id"),
}
#: Column lineage (field → field).
COLUMN_EDGES: dict[Direction, EdgeSpec] = {
    "upstream": EdgeSpec(tables.column_edges, here="target_field_id", next="source_field_id"),
    "downstream": EdgeSpec(tables.column_edges, here="source_field_id", next="target_field_id"),
}


@dataclass(frozen=True)
class WalkBounds:
    """Limits of one walk (see the module docstring)."""

    hops: int
    max_nodes: int
    since: datetime | None = None


def _marker(column: Any) -> Any:
    return cast(literal("/", Text) + cast(column, Text) + literal("/", Text), Text)


def _paths(spec: EdgeSpec, roots: list[int], bounds: WalkBounds, name: str = "walk") -> Select[Any]:
    """``SELECT node_id, via, depth FROM <walk> LIMIT hops * max_nodes`` for the given roots."""
    id_column = tables.fields.c.id if spec.table is tables.column_edges else tables.nodes.c.id
    anchor = select(
        id_column.label("node_id"),
        cast(null(), tables.Id).label("via"),
        literal(0, Integer).label("depth"),
        _marker(id_column).label("path"),
    ).where(id_column.in_(roots))
    walk = anchor.cte(name, recursive=True)
    edge = spec.table.alias("edge")
    following = edge.c[spec.next]
    step = (
        select(
            following,
            walk.c.node_id,
            walk.c.depth + 1,
            cast(walk.c.path + cast(following, Text) + literal("/", Text), Text),
        )
        .join_from(walk, edge, edge.c[spec.here] == walk.c.node_id)
        .where(walk.c.depth < bounds.hops, ~walk.c.path.contains(_marker(following)))
    )
    if bounds.since is not None:
        step = step.where(edge.c[spec.seen] >= bounds.since)
    walk = walk.union_all(step)
    budget = max(1, bounds.hops) * bounds.max_nodes + len(roots)
    return select(walk.c.node_id, walk.c.via, walk.c.depth).limit(budget)


def nearest_nodes(spec: EdgeSpec, roots: list[int], bounds: WalkBounds, name: str = "walk") -> Select[Any]:
    """The walk as a query: ``(node_id, depth)`` of at most ``max_nodes`` nodes, nearest first."""
    paths = _paths(spec, roots, bounds, name).subquery(f"{name}_paths")
    depth = func.min(paths.c.depth).label("depth")
    return (
        select(paths.c.node_id, depth)
        .group_by(paths.c.node_id)
        .order_by(depth, paths.c.node_id)
        .limit(bounds.max_nodes)
    )


def walk_nodes(conn: Connection, spec: EdgeSpec, roots: list[int], bounds: WalkBounds) -> dict[int, int]:
    """Nodes reached from ``roots`` (roots included) → their distance in hops, nearest first."""
    return {node: hops for node, hops in conn.execute(nearest_nodes(spec, roots, bounds))}


def walk_edges(conn: Connection, spec: EdgeSpec, roots: list[int], bounds: WalkBounds) -> list[tuple[int, int, int]]:
    """Distinct edges a walk crossed as ``(via, node, depth)``: ``node`` reached from ``via`` at ``depth``.

    At most ``max_nodes`` edges, nearest first (the rows DQX's ``CollectLineageAction`` writes).
    """
    paths = _paths(spec, roots, bounds).subquery("paths")
    depth = func.min(paths.c.depth)
    query = (
        select(paths.c.via, paths.c.node_id, depth)
        .where(paths.c.via.is_not(None))
        .group_by(paths.c.via, paths.c.node_id)
        .order_by(depth, paths.c.via, paths.c.node_id)
        .limit(bounds.max_nodes)
    )
    return [(via, node, hops) for via, node, hops in conn.execute(query)]


def edges_among(conn: Connection, spec: EdgeSpec, node_ids: set[int] | dict[int, Any]) -> list[tuple[int, int]]:
    """Every edge of ``spec.table`` whose two ends are both in ``node_ids``, as ``(origin, destination)``."""
    origin, destination = spec.table.c[spec.here], spec.table.c[spec.next]
    ids = list(node_ids)
    found: list[tuple[int, int]] = []
    for start in range(0, len(ids), 5000):
        query = select(origin, destination).where(origin.in_(ids[start : start + 5000]))
        found.extend((a, b) for a, b in conn.execute(query) if b in node_ids)
    return found
