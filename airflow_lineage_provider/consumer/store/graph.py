"""Graph walks: one recursive CTE per walk, on SQLite and PostgreSQL.

A walk starts from one or more nodes and follows edges in one direction, breadth first. The CTE's rows
are ``(node_id, depth)`` — or ``(node_id, via, depth)`` when the caller wants the edges crossed — and are
combined with ``UNION``, which drops a row already produced. That is the cycle guard: a node is expanded
at most once per depth, so diamonds do not multiply the work and cycles end at the depth bound. (A
full-path guard, as DQX carries on Spark, enumerates every path instead: on the benchmark's 10-layer
graph a depth-10 walk has 18,147 paths for 2,955 nodes, and the count grows exponentially with depth.)

Bounds, each applied inside the recursion:

* ``hops`` — edges from a root; no row is deeper;
* ``max_nodes`` — the walk reads at most ``budget(bounds)`` rows (``max_nodes`` times the number of hops,
  at most 8 times), in breadth-first order, and stops there: SQLite takes the bound as the ``LIMIT`` of
  the recursive select, PostgreSQL evaluates the CTE lazily under an outer ``LIMIT`` and also caps each
  hop at ``max_nodes`` rows (a ``LIMIT`` on the recursive term, which SQLite does not accept). The answer
  holds at most ``max_nodes`` distinct nodes, nearest first, each at its shortest distance;
* ``since`` — optionally, only edges seen at or after that time (DQX's ``lookback_days``; for table
  lineage, an io group's ``last_seen``);
* ``namespaces`` — optionally, only nodes in these namespaces (a key limited to namespace patterns, see
  :mod:`.visibility`): the recursive step joins the node it steps into (for column lineage, the field's
  dataset) and keeps it only when its namespace is listed. A hidden node is never a row, so nothing beyond
  it is reached through it, and the subgraph, drawn among the rows, has no edge into it. The roots are
  the caller's to check. None (every namespace) builds the statement without that join.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from sqlalchemy import CTE, Connection, FromClause, Select, Table, and_, cast, func, literal, null, select
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.visibility import namespace_in

Direction = Literal["upstream", "downstream"]


@dataclass(frozen=True)
class Hop:
    """The recursive step's joins from the walk to the next vertex: the vertex and when the edge was seen."""

    joined: FromClause
    next: ColumnElement[Any]
    seen: ColumnElement[Any] | None


@dataclass(frozen=True)
class EdgeSpec:
    """Which edge table a walk follows, and from which column to which."""

    table: Table
    here: str
    next: str
    seen: str = "last_seen"

    @property
    def into_fields(self) -> bool:
        """Whether the walk's vertices are dataset fields (column lineage) rather than nodes."""
        return self.table is tables.column_edges

    def hop(self, walk: CTE, name: str, dated: bool) -> Hop:
        """One edge from the walk's node (``dated``: the edge's time is read)."""
        edge = self.table.alias(f"{name}_edge")
        return Hop(walk.join(edge, edge.c[self.here] == walk.c.node_id), edge.c[self.next], edge.c[self.seen])


@dataclass(frozen=True)
class IoGroupSpec:
    """Table lineage through io groups: a dataset, the groups listing it as ``here``, their ``next`` datasets.

    One hop is dataset → membership (the ``(dataset_id, direction, group_id)`` index) → the group's members
    in the other direction (its primary key), so a pair is reached only through a group holding both, and
    the group's row is read only for ``since``. A group of 2,000 inputs is stepped through lazily: the
    walk's bounds stop it as they stop any other edge table.
    """

    here: str
    next: str
    into_fields: ClassVar[bool] = False

    def hop(self, walk: CTE, name: str, dated: bool) -> Hop:
        """One step dataset → group → dataset from the walk's node (``dated``: the group's time is read)."""
        member, other = tables.io_members.alias(f"{name}_member"), tables.io_members.alias(f"{name}_other")
        joined = walk.join(member, and_(member.c.dataset_id == walk.c.node_id, member.c.direction == self.here))
        seen = None
        if dated:
            group = tables.io_groups.alias(f"{name}_group")
            joined = joined.join(group, group.c.id == member.c.group_id)
            seen = group.c.last_seen
        joined = joined.join(other, and_(other.c.group_id == member.c.group_id, other.c.direction == self.next))
        return Hop(joined, other.c.dataset_id, seen)


#: What a walk follows: an edge table, or table lineage's io groups.
WalkSpec = EdgeSpec | IoGroupSpec

#: The job↔dataset graph, walked toward sources (upstream) or consumers (downstream).
NODE_EDGES: dict[Direction, EdgeSpec] = {
    "upstream": EdgeSpec(tables.edges, here="destination_id", next="origin_id"),
    "downstream": EdgeSpec(tables.edges, here="origin_id", next="destination_id"),
}
#: Table lineage (dataset → dataset through a job): from outputs to inputs of the same io group, or back.
DATASET_EDGES: dict[Direction, IoGroupSpec] = {
    "upstream": IoGroupSpec(here="output", next="input"),
    "downstream": IoGroupSpec(here="input", next="output"),
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
    namespaces: tuple[str, ...] | None = None
    """Only nodes in these namespaces are stepped into (None: every namespace)."""

    def budget(self, roots: int) -> int:
        """Rows of the recursion read at most: ``max_nodes`` per hop, for at most 8 hops' worth."""
        return self.max_nodes * min(max(self.hops, 1), 8) + roots


def walk_cte(
    spec: WalkSpec, roots: list[int], bounds: WalkBounds, dialect: str, name: str = "walk", with_via: bool = False
) -> CTE:
    """The recursive CTE of one walk: ``(node_id, [via,] depth)`` rows, bounded as the module says."""
    id_column = tables.fields.c.id if spec.into_fields else tables.nodes.c.id
    columns = [id_column.label("node_id")]
    if with_via:
        columns.append(cast(null(), tables.Id).label("via"))
    anchor = select(*columns, literal(0).label("depth")).where(id_column.in_(roots))
    walk = anchor.cte(name, recursive=True)
    hop = spec.hop(walk, name, dated=bounds.since is not None)
    step_columns = [hop.next] + ([walk.c.node_id] if with_via else []) + [walk.c.depth + 1]
    step = select(*step_columns).select_from(hop.joined)
    step = step.where(walk.c.depth < bounds.hops)
    if hop.seen is not None and bounds.since is not None:
        step = step.where(hop.seen >= bounds.since)
    if bounds.namespaces is not None:
        step = _within(step, hop.next, spec.into_fields, bounds.namespaces, dialect, name)
    if dialect == "sqlite":
        bounded = walk.union(step)
        bounded.element = bounded.element.limit(bounds.budget(len(roots)))
        return bounded
    return walk.union(step.limit(bounds.max_nodes))


def _within(
    step: Select[Any], into: ColumnElement[Any], into_fields: bool, namespaces: tuple[str, ...], dialect: str, name: str
) -> Any:
    """``step`` keeping only the nodes (fields: of datasets) in ``namespaces`` it steps ``into``."""
    node = tables.nodes.alias(f"{name}_node")
    if into_fields:
        field = tables.fields.alias(f"{name}_field")
        step = step.join(field, field.c.id == into).join(node, node.c.id == field.c.dataset_id)
    else:
        step = step.join(node, node.c.id == into)
    return step.where(namespace_in(node.c.namespace, namespaces, dialect))


def _rows(walk: CTE, bounds: WalkBounds, roots: list[int], *columns: str) -> Any:
    """The first ``budget`` rows of the walk (PostgreSQL stops the recursion once they are read)."""
    return select(*(walk.c[name] for name in columns)).limit(bounds.budget(len(roots))).subquery()


def nearest_nodes(
    spec: WalkSpec, roots: list[int], bounds: WalkBounds, dialect: str, name: str = "walk"
) -> Select[Any]:
    """The walk as a query: ``(node_id, depth)`` of at most ``max_nodes`` nodes, nearest first."""
    rows = _rows(walk_cte(spec, roots, bounds, dialect, name), bounds, roots, "node_id", "depth")
    depth = func.min(rows.c.depth).label("depth")
    return (
        select(rows.c.node_id, depth).group_by(rows.c.node_id).order_by(depth, rows.c.node_id).limit(bounds.max_nodes)
    )


def walk_nodes(conn: Connection, spec: WalkSpec, roots: list[int], bounds: WalkBounds) -> dict[int, int]:
    """Nodes reached from ``roots`` (roots included) → their distance in hops, nearest first."""
    query = nearest_nodes(spec, roots, bounds, conn.dialect.name)
    return {node: hops for node, hops in conn.execute(query)}


def walk_edges(conn: Connection, spec: WalkSpec, roots: list[int], bounds: WalkBounds) -> list[tuple[int, int, int]]:
    """Distinct edges a walk crossed as ``(via, node, depth)``: ``node`` reached from ``via`` at ``depth``.

    At most ``max_nodes`` edges, nearest first (the rows DQX's ``CollectLineageAction`` writes).
    """
    walk = walk_cte(spec, roots, bounds, conn.dialect.name, with_via=True)
    rows = _rows(walk, bounds, roots, "via", "node_id", "depth")
    depth = func.min(rows.c.depth)
    query = (
        select(rows.c.via, rows.c.node_id, depth)
        .where(rows.c.via.is_not(None))
        .group_by(rows.c.via, rows.c.node_id)
        .order_by(depth, rows.c.via, rows.c.node_id)
        .limit(bounds.max_nodes)
    )
    return [(via, node, hops) for via, node, hops in conn.execute(query)]
