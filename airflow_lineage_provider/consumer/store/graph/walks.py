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

**Datasets known under several names** (the groups of :mod:`.identity`, ``lineage_dataset_members``): with
``WalkBounds.grouped``, a step into a dataset steps into every name of its group at once — the step
left-joins the member rows of the dataset it reached (none for a dataset alone) and yields
``coalesce(member, dataset)`` — and so do the roots; the next step leaves from each name along its own edges.
A step to another name costs no depth. For column lineage a field stands for the fields of the same name of
every name of its dataset: field → its dataset → the members → their field of that name. The rows stay the
nodes (fields) as stored, every name of a group reached being one; the node walks also carry each row's
group (``canonical``, NULL without one), so that answers can show each group once (:mod:`.subgraph`, the
routers) and draw the edges among the rows as they are. With ``namespaces``, a step never goes into a
hidden name, nor from a visible one to its hidden names. On PostgreSQL the members are read by a
``LATERAL`` lookup (:attr:`Through.lateral`). ``grouped`` is False unless the caller asks
(:func:`through_groups`, one probe), so a store without groups walks with the statements it always did.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from sqlalchemy import CTE, Connection, FromClause, Select, Table, and_, cast, exists, func, literal, null, select, true
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.read.visibility import namespace_in
from airflow_lineage_provider.consumer.store.schema import tables

Direction = Literal["upstream", "downstream"]
#: Which edges a walk crosses and an answer draws, by how they are known (see :func:`declared_filter`): job↔dataset
#: edges, io groups (table lineage) and column edges alike.
Declared = Literal["include", "exclude", "only"]


def declared_filter(edge: Any, declared: Declared) -> ColumnElement[bool] | None:
    """The condition keeping the ``lineage_edges`` rows ``edge`` (a table or alias) that ``declared`` keeps:
    ``exclude`` leaves out edges only declared (by JobEvents, never observed by a run), ``only`` keeps the
    declared ones (observed too or not); None for ``include`` (every edge, no condition)."""
    if declared == "exclude":
        return edge.c.observed_at.is_not(None)
    if declared == "only":
        return edge.c.declared_at.is_not(None)
    return None


@dataclass(frozen=True)
class Hop:
    """The recursive step's joins from the walk to the next vertex: the vertex and when the edge was seen.

    Through groups, ``next`` is each name of the vertex the edge reaches (``target``), and ``canonical`` the
    group's canonical id (NULL without a group; None for fields)."""

    joined: FromClause
    next: ColumnElement[Any]
    seen: ColumnElement[Any] | None
    target: ColumnElement[Any] | None = None
    canonical: ColumnElement[Any] | None = None
    edge: FromClause | None = None
    """The row crossed — an edge, column edge or (when joined) io group, each with ``declared_at`` and
    ``observed_at`` — what ``WalkBounds.declared`` checks."""

    @property
    def stepped_into(self) -> ColumnElement[Any]:
        """The vertex the edge reaches (what the namespace bound checks)."""
        return self.next if self.target is None else self.target

    def through(self, through: Through | None, into_fields: bool, name: str) -> Hop:
        """This hop stepping into every name of the vertex it reaches (itself when ``through`` is None)."""
        if through is None:
            return self
        reach = through.same_fields if into_fields else through.names
        joined, names, canonical = reach(self.joined, self.next, name)
        return Hop(joined, names, self.seen, self.next, canonical, self.edge)


def has_groups(conn: Connection) -> bool:
    """Whether any dataset of the store is known under several names (one index probe): walks then go
    through the groups (``WalkBounds.grouped``)."""
    return conn.execute(select(tables.dataset_members.c.node_id).limit(1)).first() is not None


def through_groups(conn: Connection) -> bool:
    """:func:`has_groups`, for a read about to walk: on PostgreSQL with groups, also ``SET LOCAL jit = off``
    for the rest of the read transaction, in the same statement (``set_config`` on the probe's row).

    The walks through groups look the members up per row (:attr:`Through.lateral`), and PostgreSQL costs each
    lookup with its default estimates when the store has no statistics (as loaded): the benchmark's depth-10
    walk is then estimated past ``jit_above_cost``, and compiling a statement takes ~20-30 ms, more than the
    whole answer (as for the job listings, :mod:`...marquez.jobs`).
    """
    if conn.dialect.name != "postgresql":
        return has_groups(conn)
    probe = select(func.set_config("jit", "off", True)).select_from(tables.dataset_members).limit(1)
    return conn.execute(probe).first() is not None


def walk_probe(conn: Connection) -> tuple[bool, bool]:
    """``(groups, declarations)`` for a read about to walk, in one statement: :func:`through_groups` (with its
    ``jit = off`` on PostgreSQL with groups), and whether the store holds declared lineage
    (:data:`.tables.DECLARED_LINEAGE`), without which every edge is observed."""
    members = select(tables.dataset_members.c.node_id)
    if conn.dialect.name == "postgresql":
        members = select(func.set_config("jit", "off", True)).select_from(tables.dataset_members)
    settings = tables.store_settings.c
    declared = exists(select(settings.name).where(settings.name == tables.DECLARED_LINEAGE))
    groups, declarations = conn.execute(select(members.limit(1).scalar_subquery().is_not(None), declared)).one()
    return bool(groups), bool(declarations)


@dataclass(frozen=True)
class Through:
    """How a walk steps into every (visible) name of the datasets it reaches."""

    namespaces: tuple[str, ...] | None
    """Only names in these namespaces are stepped into (None: every name)."""
    dialect: str

    @property
    def lateral(self) -> bool:
        """Whether the members are read by a ``LATERAL`` subquery per row (PostgreSQL).

        Without statistics (a store as loaded) PostgreSQL's estimate of the members per dataset is far too
        high, and it then hashes the whole member table on every step of the recursion. A lateral subquery
        behind ``OFFSET 0`` (so that it is not pulled up into a join) is an index lookup per row whatever the
        estimates. SQLite looks the members up by index in a join anyway, and has no ``LATERAL``.
        """
        return self.dialect == "postgresql"

    def _members(self, name: str) -> tuple[Any, FromClause]:
        """The member rows (an alias) and what to join them from: with the name's node when ``namespaces``
        keeps visible names only."""
        member = tables.dataset_members.alias(f"{name}_alias")
        if self.namespaces is None:
            return member, member
        named = tables.nodes.alias(f"{name}_alias_node")
        visible = namespace_in(named.c.namespace, self.namespaces, self.dialect)
        return member, member.join(named, and_(named.c.id == member.c.member_id, visible))

    def names(self, joined: FromClause, dataset: Any, name: str) -> tuple[FromClause, Any, Any]:
        """``joined`` with one row per (visible) name of ``dataset`` (itself alone without a group): the name's
        id column and the group's canonical id column (NULL without a group)."""
        member, source = self._members(name)
        if self.lateral:
            query = select(member.c.member_id, member.c.canonical_id).select_from(source)
            rows = query.where(member.c.node_id == dataset).offset(0).lateral(f"{name}_names")
            joined, found = joined.outerjoin(rows, true()), rows.c
        else:
            joined, found = joined.outerjoin(source, member.c.node_id == dataset), member.c
        return joined, func.coalesce(found.member_id, dataset), found.canonical_id

    def same_fields(self, joined: FromClause, field_id: Any, name: str) -> tuple[FromClause, Any, None]:
        """``joined`` with one row per field of the same name in each (visible) name of the field's dataset
        (the field itself without a group), and that field's id column."""
        field, same = tables.fields.alias(f"{name}_at_field"), tables.fields.alias(f"{name}_same_field")
        member = tables.dataset_members.alias(f"{name}_alias")
        if self.lateral:
            chain: FromClause = field.join(member, member.c.node_id == field.c.dataset_id)
            chain, reached = self._visible(chain, member, name, outer=False)
            chain = chain.join(same, and_(same.c.dataset_id == reached, same.c.name == field.c.name))
            query = select(same.c.id).select_from(chain).where(field.c.id == field_id)
            rows = query.offset(0).lateral(f"{name}_fields")
            return joined.outerjoin(rows, true()), func.coalesce(rows.c.id, field_id), None
        joined = joined.join(field, field.c.id == field_id).outerjoin(member, member.c.node_id == field.c.dataset_id)
        joined, reached = self._visible(joined, member, name, outer=True)
        joined = joined.outerjoin(same, and_(same.c.dataset_id == reached, same.c.name == field.c.name))
        return joined, func.coalesce(same.c.id, field_id), None

    def _visible(self, joined: FromClause, member: Any, name: str, outer: bool) -> tuple[FromClause, Any]:
        """``joined`` keeping the members in visible namespaces (``outer``: by a left join, whose NULL stops
        what is joined on it), and the column of the kept member's id."""
        if self.namespaces is None:
            return joined, member.c.member_id
        named = tables.nodes.alias(f"{name}_alias_node")
        on = and_(named.c.id == member.c.member_id, namespace_in(named.c.namespace, self.namespaces, self.dialect))
        return (joined.outerjoin(named, on) if outer else joined.join(named, on)), named.c.id


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

    def hop(self, walk: CTE, name: str, dated: bool, through: Through | None = None) -> Hop:
        """One edge from the walk's node (``dated``: the edge's time is read; ``through``: into every name of
        the vertex reached)."""
        edge = self.table.alias(f"{name}_edge")
        hop = Hop(walk.join(edge, edge.c[self.here] == walk.c.node_id), edge.c[self.next], edge.c[self.seen], edge=edge)
        return hop.through(through, self.into_fields, name)


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

    def hop(self, walk: CTE, name: str, dated: bool, through: Through | None = None) -> Hop:
        """One step dataset → group → dataset from the walk's node (``dated``: the group's time is read;
        ``through``: into every name of the dataset reached)."""
        member, other = tables.io_members.alias(f"{name}_member"), tables.io_members.alias(f"{name}_other")
        joined = walk.join(member, and_(member.c.dataset_id == walk.c.node_id, member.c.direction == self.here))
        seen, group = None, None
        if dated:
            group = tables.io_groups.alias(f"{name}_group")
            joined = joined.join(group, group.c.id == member.c.group_id)
            seen = group.c.last_seen
        joined = joined.join(other, and_(other.c.group_id == member.c.group_id, other.c.direction == self.next))
        return Hop(joined, other.c.dataset_id, seen, edge=group).through(through, False, name)


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
    grouped: bool = False
    """Step into every name of a dataset known under several names (see the module; :func:`through_groups`)."""
    declared: Declared = "include"
    """Which job↔dataset edges are crossed: every one (``include``), none only declared (``exclude``: every
    edge a run observed), only declared ones (``only``); see :func:`declared_filter`."""

    def through(self, dialect: str) -> Through | None:
        """How steps go through dataset groups (None: they do not)."""
        return Through(self.namespaces, dialect) if self.grouped else None

    def budget(self, roots: int) -> int:
        """Rows of the recursion read at most: ``max_nodes`` per hop, for at most 8 hops' worth."""
        return self.max_nodes * min(max(self.hops, 1), 8) + roots


def carries_canonical(spec: WalkSpec, bounds: WalkBounds) -> bool:
    """Whether the walk's rows carry each node's group (``canonical``): node walks through groups."""
    return bounds.grouped and not spec.into_fields


def _named(spec: WalkSpec, roots: list[int], through: Through | None, name: str) -> tuple[Hop, Any]:
    """The roots with every (visible) name of each (``through``), and the condition selecting the roots."""
    table = tables.fields if spec.into_fields else tables.nodes
    return Hop(table, table.c.id, None).through(through, spec.into_fields, name), table.c.id.in_(roots)


def every_name(spec: WalkSpec, roots: list[int], through: Through) -> Select[Any]:
    """The ids of the roots and of every (visible) name of each (fields: of the same name), distinct."""
    root, chosen = _named(spec, roots, through, "named")
    return select(root.next).select_from(root.joined).where(chosen).distinct()


def _anchor(spec: WalkSpec, roots: list[int], bounds: WalkBounds, dialect: str, name: str, with_via: bool) -> Any:
    """The roots as the walk's first rows: ``(node_id, [via,] depth [, canonical])``, every name of a root
    that is a dataset known under several names (visible ones) through groups."""
    root, chosen = _named(spec, roots, bounds.through(dialect), f"{name}_root")
    columns = [root.next.label("node_id")]
    if with_via:
        columns.append(cast(null(), tables.Id).label("via"))
    columns.append(literal(0).label("depth"))
    if carries_canonical(spec, bounds):
        assert root.canonical is not None  # a node walk through groups carries it (Hop.through)
        columns.append(root.canonical.label("canonical"))
    return select(*columns).select_from(root.joined).where(chosen)


def walk_cte(
    spec: WalkSpec, roots: list[int], bounds: WalkBounds, dialect: str, name: str = "walk", with_via: bool = False
) -> CTE:
    """The recursive CTE of one walk: ``(node_id, [via,] depth [, canonical])`` rows, bounded as the module
    says (``canonical``: see :func:`carries_canonical`)."""
    walk = _anchor(spec, roots, bounds, dialect, name, with_via).cte(name, recursive=True)
    dated = bounds.since is not None or bounds.declared != "include"  # an io group's row is read for either
    hop = spec.hop(walk, name, dated=dated, through=bounds.through(dialect))
    step_columns = [hop.next] + ([walk.c.node_id] if with_via else []) + [walk.c.depth + 1]
    if carries_canonical(spec, bounds):
        step_columns.append(hop.canonical)
    step = select(*step_columns).select_from(hop.joined)
    step = step.where(walk.c.depth < bounds.hops)
    if hop.seen is not None and bounds.since is not None:
        step = step.where(hop.seen >= bounds.since)
    kept = declared_filter(hop.edge, bounds.declared) if hop.edge is not None else None
    if kept is not None:
        step = step.where(kept)
    if bounds.namespaces is not None:
        step = _within(step, hop.stepped_into, spec.into_fields, bounds.namespaces, dialect, name)
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
    """The walk as a query: ``(node_id, depth [, canonical])`` of at most ``max_nodes`` nodes, nearest first
    (``canonical``: see :func:`carries_canonical`)."""
    carried = ("canonical",) if carries_canonical(spec, bounds) else ()
    rows = _rows(walk_cte(spec, roots, bounds, dialect, name), bounds, roots, "node_id", "depth", *carried)
    depth = func.min(rows.c.depth).label("depth")
    columns = [rows.c.node_id, depth] + [func.max(rows.c.canonical).label("canonical") for _ in carried]
    return select(*columns).group_by(rows.c.node_id).order_by(depth, rows.c.node_id).limit(bounds.max_nodes)


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
