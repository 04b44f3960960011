"""The whole graph a page at a time: nodes in a stable order and the edges leaving them.

A page holds ``limit`` jobs and datasets after ``offset`` of them, in (kind, namespace, name) order — the
order of the index on those columns, so a page is read from the index, not sorted — with the edges whose
*origin* is on the page. Every edge has one origin, so paging through all nodes yields every edge exactly
once, whatever page its destination falls on. A node is what the graph walks show of it (its card, from
the store's graph-card cache, :mod:`.cards`); the page also lists the symlinks of its datasets.

``visible`` (a key limited to namespace patterns, :mod:`.visibility`) keeps nodes in visible namespaces,
edges whose destination is visible too, and symlinks that name a visible namespace; the total counts the
same nodes.

Renderings of templated names are collapsed as in the walks (:mod:`.renderings`) unless asked ``expanded``: a
rendering is on no page (nor in the total), its edges are drawn to or from its pattern's node, each once, and
leave on the pattern's page; the pattern's ``data`` carries ``renderings``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Connection, String, any_, bindparam, cast, column, func, or_, select, values
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.nodeids import node_id
from airflow_lineage_provider.consumer.store.graph import dataset_aliases, job_parents, nodes, renderings, subgraph
from airflow_lineage_provider.consumer.store.graph.cards import GraphCard, GraphCards
from airflow_lineage_provider.consumer.store.read.queries import Admit, name_size, named, stored_size
from airflow_lineage_provider.consumer.store.read.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.read.visibility import NODE_KINDS, Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables


class ListedEdge(msgspec.Struct):
    """An edge by node ids (input dataset → job, job → output dataset), with when events showed it and whether
    a JobEvent declared it and a RunEvent observed it (see docs/declared-lineage.md)."""

    origin: str
    destination: str
    firstSeen: str
    lastSeen: str
    declared: bool
    observed: bool


class ListedSymlink(msgspec.Struct):
    """Another name of a dataset on the page, from a ``symlinks`` facet."""

    dataset: str
    namespace: str
    name: str
    type: str | None


class GraphPage(msgspec.Struct):
    """One page of the graph: ``nodes`` (id, type, data — the walks' node without its edges), the ``edges``
    leaving them, their datasets' ``symlinks``, and ``totalCount``, the nodes of every page."""

    nodes: list[GraphCard]
    edges: list[ListedEdge]
    symlinks: list[ListedSymlink]
    totalCount: int


def _one_of(column: Any, ids: list[int], dialect: str) -> ColumnElement[bool]:
    """``column`` is one of ``ids``, the whole list as one parameter (an array, or JSON for ``json_each``)."""
    if dialect == "postgresql":
        return column == any_(bindparam("page_ids", ids, type_=postgresql.ARRAY(BigInteger)))
    listed = func.json_each(bindparam("page_ids", msgspec.json.encode(ids).decode(), type_=String))
    return column.in_(select(listed.table_valued("value").c.value))


def graph_page(
    conn: Connection,
    limit: int,
    offset: int,
    *,
    namespace: str | None = None,
    visible: Visible = None,
    cards: GraphCards | None = None,
    admit: Admit | None = None,
    shown: renderings.Shown = "collapsed",
) -> GraphPage:
    """Nodes ``offset`` to ``offset + limit`` of the graph (only ``namespace``'s, if given), their outgoing
    edges and their datasets' symlinks, and how many nodes all pages hold; ``admit`` is told what each node adds
    to the page (:func:`_node_sizes`) before any node is read; renderings ``shown`` collapsed or expanded."""
    n, dialect = tables.nodes.c, conn.dialect.name
    chosen: list[ColumnElement[bool]] = [n.kind.in_(NODE_KINDS)]
    if namespace is not None:
        chosen.append(n.namespace == namespace)
    if visible is not None:
        chosen.append(namespace_in(n.namespace, visible, dialect))
    grouped = dataset_aliases.has_groups(conn)
    if grouped:  # a dataset known under several names is one node, under the name the walks show it by
        chosen.append(or_(n.kind != "dataset", dataset_aliases.listed(n, visible, dialect)))
    collapsing = shown == "collapsed" and renderings.has_patterns(conn)
    if collapsing:
        chosen.append(or_(n.kind != "dataset", renderings.not_a_rendering(n.id, visible, dialect)))
    total = conn.execute(select(func.count()).select_from(tables.nodes).where(*chosen)).scalar() or 0
    order = (n.kind, n.namespace, n.name)
    picked = (
        select(n.id.label("node_id"), func.row_number().over(order_by=order).label("depth"))
        .where(*chosen)
        .order_by(*order)
        .limit(limit)
        .offset(offset)
    )
    page = list(conn.execute(picked)) if admit is not None or grouped else None
    if admit is not None and page is not None:
        admit(_node_sizes(conn, [row.node_id for row in page], grouped))
    if grouped and page is not None:
        found, shown_as = _grouped_page(conn, page, cards, visible)
    else:
        found, _among = subgraph.subgraph(conn, picked, cards)  # nodes in page order (depth is the position)
        shown_as = {node: node for node in found}
    ids = list(found)
    if not ids:
        return GraphPage([], [], [], total)
    named = dict(shown_as)  # every (visible) name of the page's datasets → the node shown for it
    collapsed: dict[int, int] = {}
    data = {node: card.data for node, card in found.items()}
    if collapsing:
        patterns = renderings.patterns_among(conn, ids)
        collapsed = renderings.renderings_of(conn, patterns, visible)
        shown_as.update(collapsed)
        for pattern, summary in renderings.summaries(conn, patterns, visible, frozenset()).items():
            data[pattern] = renderings.pattern_data(data[pattern], summary)
    jobs = [node for node, card in found.items() if card.type == "JOB"]
    for node, contained in job_parents.containment(conn, jobs, visible).items():
        data[node] = job_parents.with_containment(data[node], contained)
    nodes = [GraphCard(node.id, node.type, data[key]) for key, node in found.items()]
    edges = _edges(conn, shown_as, found, visible, grouped, collapsing)
    return GraphPage(nodes, edges, _symlinks(conn, named, found, visible), total)


#: Bytes of a node of a page without its names and schema (its id, type, members, times), of an edge leaving it
#: without its ends' names (the ends' kinds, times, flags), of a symlink without its names and type, and of
#: another name of a grouped dataset without its names and producers (a little over each).
CARD_BYTES, EDGE_BYTES, SYMLINK_BYTES, ALIAS_BYTES = 512, 192, 96, 96


def _names_size(node: Any, dialect: str) -> ColumnElement[int]:
    return name_size(node.c.namespace, dialect) + name_size(node.c.name, dialect)


def _node_sizes(conn: Connection, ids: list[int], grouped: bool) -> list[int]:
    """Bytes each node of ``ids`` (a page, in order) adds to the page, read without loading them (an upper bound
    of the encoded page, within a small factor): its card (names, stored schema), the edges leaving it (both
    ends' names) and its symlinks; with groups (``grouped``), each other name of a grouped dataset too, with
    its producers, schema and edges."""
    if not ids:
        return []
    dialect = conn.dialect.name
    parameter = ids if dialect == "postgresql" else msgspec.json.encode(ids).decode()
    sizes = dict(conn.execute(_node_sizes_statement(dialect, grouped), {"page_ids": parameter}).all())
    return [int(sizes.get(node, 0)) for node in ids]


@cache
def _node_sizes_statement(dialect: str, grouped: bool) -> Any:
    """``(node id, bytes)`` of the nodes of ``:page_ids`` (see :func:`_node_sizes`): built once."""
    d, e, s = tables.datasets.c, tables.edges.c, tables.symlinks.c
    node = tables.nodes.alias("sized_node")
    names = _names_size(node, dialect)

    def schema(of: Any) -> Any:
        found = select(stored_size(d.fields, dialect)).where(d.node_id == of).scalar_subquery()
        return func.coalesce(found, 0)

    def edges(of: Any, key: str, *outer: Any) -> Any:
        """The edges leaving ``of``, with the shown node's names (of the outermost statement: ``outer``, the
        tables of the statements in between, correlated explicitly past them)."""
        rows, far = named(dialect, e.destination_id, tables.edges, f"{key}_sized_far")
        found = select(func.sum(EDGE_BYTES + names + _names_size(far, dialect))).select_from(rows)
        found = found.where(e.origin_id == of)
        return func.coalesce((found.correlate(*outer) if outer else found).scalar_subquery(), 0)

    symlink = SYMLINK_BYTES + names + name_size(s.namespace, dialect) + name_size(s.name, dialect)
    symlinks = select(func.sum(symlink + name_size(s.type, dialect))).where(s.dataset_id == node.c.id)
    size = CARD_BYTES + 4 * names + schema(node.c.id) + edges(node.c.id, "page")
    size = size + func.coalesce(symlinks.scalar_subquery(), 0)
    if grouped:
        m, p = tables.dataset_members.c, tables.node_producers.c
        member = tables.nodes.alias("sized_member")
        produced = select(func.sum(4 + name_size(p.producer, dialect))).where(p.node_id == m.member_id)
        each = (
            ALIAS_BYTES
            + _names_size(member, dialect)
            + func.coalesce(produced.scalar_subquery(), 0)
            + schema(m.member_id)
            + edges(m.member_id, "member", node, tables.dataset_members, member)
        )
        members = (
            select(func.sum(each))
            .join_from(tables.dataset_members, member, member.c.id == m.member_id)
            .where(m.node_id == node.c.id, m.member_id != node.c.id)
        )
        size = size + func.coalesce(members.scalar_subquery(), 0)
    if dialect == "postgresql":
        page = node.c.id == any_(bindparam("page_ids", type_=postgresql.ARRAY(BigInteger)))
    else:
        listed = func.json_each(bindparam("page_ids", type_=String)).table_valued("value")
        page = node.c.id.in_(select(listed.c.value))
    return select(node.c.id, size).where(page)


def _grouped_page(
    conn: Connection, page: list[Any], cards: GraphCards | None, visible: Visible
) -> tuple[dict[int, Any], dict[int, int]]:
    """The page's nodes (``page``: its ``(node_id, depth)`` rows) as the walks show them on a store with groups (a
    grouped dataset's card holds its aliases), and ``name → shown node`` for every (visible) name of the page's
    datasets."""
    m, n = tables.dataset_members.c, tables.nodes.c
    ids = [row.node_id for row in page]
    members: dict[int, list[tuple[int, int]]] = {}
    if ids:
        query = select(m.node_id, m.member_id, m.canonical_id).where(_one_of(m.node_id, ids, conn.dialect.name))
        if visible is not None:
            query = query.join(tables.nodes, n.id == m.member_id).where(
                namespace_in(n.namespace, visible, conn.dialect.name)
            )
        for node, member, canonical in conn.execute(query):
            members.setdefault(node, []).append((member, canonical))
    rows: list[tuple[int, int, int | None]] = []
    for row in page:
        group = members.get(row.node_id, [])
        rows.append((row.node_id, row.depth, group[0][1] if group else None))
        rows.extend((member, row.depth, canonical) for member, canonical in group if member != row.node_id)
    if not rows:
        return {}, {}
    columns = (column("node_id", tables.Id), column("depth", tables.Id), column("canonical", tables.Id))
    listed = values(*columns, name="page").data(rows).cte("page")
    # Typed: on PostgreSQL a VALUES column of NULLs only would be text.
    picked_names = select(listed.c.node_id, listed.c.depth, cast(listed.c.canonical, tables.Id).label("canonical"))
    found, _among = subgraph.grouped_subgraph(conn, picked_names, cards, visible)
    shown_of = {node: node for node in found}
    for shown in ids:
        for member, _canonical in members.get(shown, []):
            shown_of[member] = shown
    return {node: found[node] for node in ids if node in found}, shown_of


def _shown_names(conn: Connection, ids: set[int], visible: Visible) -> dict[int, int]:
    """``dataset → the name it is shown by`` for the datasets ``ids`` in a group: the canonical name, or for a
    namespace-limited key that cannot see it, the first visible name (:func:`.nodes.representative`, as the
    listings and walks show a group)."""
    shown = {node: nodes.representative(group, visible) for node, group in dataset_aliases.groups(conn, ids).items()}
    return {node: name for node, name in shown.items() if name is not None}


def _edges(
    conn: Connection,
    shown: dict[int, int],
    found: dict[int, Any],
    visible: Visible,
    grouped: bool,
    collapsing: bool = False,
) -> list[ListedEdge]:
    """The edges leaving the page's nodes (``shown``: every name of the page's datasets, and every rendering of
    its patterns, → its node), each drawn between the nodes shown (``grouped``: the store has groups; a grouped
    dataset's names' edges once; ``collapsing``: a rendering's edges drawn to its pattern), by origin in page
    order, then destination kind, namespace, name."""
    e, dialect = tables.edges.c, conn.dialect.name
    to = tables.nodes.alias("destination")
    query = (
        select(e.origin_id, e.destination_id, to.c.kind, to.c.namespace, to.c.name)
        .add_columns(iso_utc(e.first_seen), iso_utc(e.last_seen))
        .add_columns(e.declared_at.is_not(None), e.observed_at.is_not(None))
        .join_from(tables.edges, to, to.c.id == e.destination_id)
        .where(_one_of(e.origin_id, sorted(shown), dialect))
    )
    if visible is not None:
        query = query.where(namespace_in(to.c.namespace, visible, dialect))
    rows = conn.execute(query).all()
    datasets = {row.destination_id for row in rows if row.kind == "dataset"}
    names = _shown_names(conn, datasets, visible) if grouped else {}
    if collapsing:
        names.update(renderings.rendered_patterns(conn, datasets, visible))
    ends = {row.destination_id: (row.kind, row.namespace, row.name) for row in rows}
    if names:
        n = tables.nodes.c
        wanted = sorted(set(names.values()) - ends.keys())
        if wanted:
            for node, kind, namespace, name in conn.execute(
                select(n.id, n.kind, n.namespace, n.name).where(_one_of(n.id, wanted, dialect))
            ):
                ends[node] = (kind, namespace, name)
    position = {node: index for index, node in enumerate(found)}
    edges: dict[tuple[int, int], tuple[str, str, bool, bool]] = {}
    for row in rows:
        origin, target = shown[row.origin_id], names.get(row.destination_id, row.destination_id)
        first, last, declared, observed = row[5], row[6], bool(row[7]), bool(row[8])
        known = edges.get((origin, target))
        if known is not None:  # the same edge through two names of a dataset: the two together
            first, last = min(known[0], first), max(known[1], last)
            declared, observed = declared or known[2], observed or known[3]
        edges[(origin, target)] = (first, last, declared, observed)
    ordered = sorted(edges, key=lambda pair: (position[pair[0]], *ends[pair[1]]))
    return [
        ListedEdge(found[origin].id, node_id(*ends[target]), *edges[(origin, target)]) for origin, target in ordered
    ]


def _symlinks(conn: Connection, named: dict[int, int], found: dict[int, Any], visible: Visible) -> list[ListedSymlink]:
    """The symlinks of the page's datasets, each under the node shown for it — a symlink of a name merged into
    another node's included (``named``: every name of the page → its shown node) — those naming a hidden
    namespace left out, each once, in page order."""
    s = tables.symlinks.c
    names = list(named)
    query = select(s.dataset_id, s.namespace, s.name, s.type).where(_one_of(s.dataset_id, names, conn.dialect.name))
    position = {node: index for index, node in enumerate(found)}
    shown = set(visible) if visible is not None else None
    listed: dict[tuple[int, str, str], str | None] = {}
    for dataset, namespace, name, kind in conn.execute(query):
        if shown is None or namespace in shown:
            listed.setdefault((named[dataset], namespace, name), kind)
    ordered = sorted(listed.items(), key=lambda item: (position[item[0][0]], item[0][1], item[0][2]))
    return [ListedSymlink(found[node].id, namespace, name, kind) for (node, namespace, name), kind in ordered]
