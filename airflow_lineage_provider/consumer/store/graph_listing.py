"""The whole graph a page at a time: nodes in a stable order and the edges leaving them.

A page holds ``limit`` jobs and datasets after ``offset`` of them, in (kind, namespace, name) order — the
order of the index on those columns, so a page is read from the index, not sorted — with the edges whose
*origin* is on the page. Every edge has one origin, so paging through all nodes yields every edge exactly
once, whatever page its destination falls on. A node is what the graph walks show of it (its card, from
the store's graph-card cache, :mod:`.graph_cards`); the page also lists the symlinks of its datasets.

``visible`` (a key limited to namespace patterns, :mod:`.visibility`) keeps nodes in visible namespaces,
edges whose destination is visible too, and symlinks that name a visible namespace; the total counts the
same nodes.
"""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import BigInteger, Connection, String, any_, bindparam, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.nodeids import node_id
from airflow_lineage_provider.consumer.store import subgraph, tables
from airflow_lineage_provider.consumer.store.graph_cards import GraphCard, GraphCards
from airflow_lineage_provider.consumer.store.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.visibility import NODE_KINDS, Visible, namespace_in


class ListedEdge(msgspec.Struct):
    """An edge by node ids (input dataset → job, job → output dataset), with when events showed it."""

    origin: str
    destination: str
    firstSeen: str
    lastSeen: str


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
) -> GraphPage:
    """Nodes ``offset`` to ``offset + limit`` of the graph (only ``namespace``'s, if given), their outgoing
    edges and their datasets' symlinks, and how many nodes all pages hold."""
    n, dialect = tables.nodes.c, conn.dialect.name
    chosen = [n.kind.in_(NODE_KINDS)]
    if namespace is not None:
        chosen.append(n.namespace == namespace)
    if visible is not None:
        chosen.append(namespace_in(n.namespace, visible, dialect))
    total = conn.execute(select(func.count()).select_from(tables.nodes).where(*chosen)).scalar() or 0
    order = (n.kind, n.namespace, n.name)
    picked = (
        select(n.id.label("node_id"), func.row_number().over(order_by=order).label("depth"))
        .where(*chosen)
        .order_by(*order)
        .limit(limit)
        .offset(offset)
    )
    found, _among = subgraph.subgraph(conn, picked, cards)  # nodes in page order (depth is the position)
    ids = list(found)
    if not ids:
        return GraphPage([], [], [], total)
    nodes = [GraphCard(node.id, node.type, node.data) for node in found.values()]
    return GraphPage(nodes, _edges(conn, ids, found, visible), _symlinks(conn, ids, found, visible), total)


def _edges(conn: Connection, ids: list[int], found: dict[int, Any], visible: Visible) -> list[ListedEdge]:
    """The edges leaving the page's nodes, by origin in page order, then destination kind, namespace, name."""
    e, dialect = tables.edges.c, conn.dialect.name
    to = tables.nodes.alias("destination")
    query = (
        select(e.origin_id, to.c.kind, to.c.namespace, to.c.name, iso_utc(e.first_seen), iso_utc(e.last_seen))
        .join_from(tables.edges, to, to.c.id == e.destination_id)
        .where(_one_of(e.origin_id, ids, dialect))
    )
    if visible is not None:
        query = query.where(namespace_in(to.c.namespace, visible, dialect))
    position = {node: index for index, node in enumerate(ids)}
    rows = sorted(conn.execute(query).all(), key=lambda row: (position[row[0]], row[1], row[2], row[3]))
    return [
        ListedEdge(found[origin].id, node_id(kind, namespace, name), first, last)
        for origin, kind, namespace, name, first, last in rows
    ]


def _symlinks(conn: Connection, ids: list[int], found: dict[int, Any], visible: Visible) -> list[ListedSymlink]:
    """The symlinks of the page's datasets (those naming a hidden namespace left out), in page order."""
    s = tables.symlinks.c
    query = select(s.dataset_id, s.namespace, s.name, s.type).where(_one_of(s.dataset_id, ids, conn.dialect.name))
    position = {node: index for index, node in enumerate(ids)}
    rows = sorted(conn.execute(query).all(), key=lambda row: (position[row[0]], row[1], row[2]))
    shown = set(visible) if visible is not None else None
    return [
        ListedSymlink(found[dataset].id, namespace, name, kind)
        for dataset, namespace, name, kind in rows
        if shown is None or namespace in shown
    ]
