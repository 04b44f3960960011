"""The lineage store's public read API for code outside the consumer: walks from one dataset, as rows.

``CollectLineageOperator`` (:mod:`..operators.collect_lineage`) reads the store through this module only;
what the store keeps and how it walks (:mod:`.store.graph.stepwise`, :mod:`.store.graph`, its tables) stays inside
the consumer and may change without touching the operator.

A dataset known under several names (:mod:`.store.graph.identity`) is one table here too: the walks go through
every name of it, a row names a table by its group's canonical name, and rows made the same by that are
returned once.

Example::

    walker = LineageWalker("sqlite:////tmp/lineage.db")
    try:
        orders = walker.dataset_id("postgres://db:5432", "analytics.public.orders")
        if orders is not None:
            rows = walker.table_edges(orders, "upstream", depth=3, max_nodes=100, since=None)
    finally:
        walker.close()
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from sqlalchemy import Connection, and_, func, or_, select

from airflow_lineage_provider.consumer.store.graph import nodes, walks
from airflow_lineage_provider.consumer.store.graph.columns import field_details
from airflow_lineage_provider.consumer.store.graph.stepwise import walk_edges_stepwise
from airflow_lineage_provider.consumer.store.graph.walks import Direction
from airflow_lineage_provider.consumer.store.read.read_only import ReadOnlyStore
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import field_key


class WalkRow(TypedDict):
    """One edge a walk crossed, named as DQX's lineage table names it."""

    depth: int
    """Hops from the walk's source dataset (1: a direct neighbour)."""
    target_table: str
    """The table reached, ``namespace/name`` (its group's canonical name when it has several)."""
    target_namespace: str
    """The namespace of the table reached (of its group's canonical name)."""
    target_name: str
    """The table reached by its own name, as DQX's rows name it (its group's canonical name)."""
    source_column: str | None
    """Column walks: the upstream end's column (None for table walks)."""
    target_column: str | None
    """Column walks: the downstream end's column (None for table walks)."""


def _direction(value: str) -> Direction:
    """``upstream`` or ``downstream`` (a ``column_`` prefix, as in the operator's edge types, is dropped)."""
    direction = value.removeprefix("column_")
    if direction == "upstream":
        return "upstream"
    if direction == "downstream":
        return "downstream"
    raise ValueError(f"a walk goes upstream or downstream, got {value!r}")


class LineageWalker:
    """Table and column walks from one dataset of the lineage store at ``url``.

    Each walk is breadth first, one statement per hop, each node expanded once at its nearest depth (so a
    cycle ends it): ``depth`` bounds the hops (None: unbounded), ``max_nodes`` the edges returned (no hop
    reads more), and ``since`` keeps only lineage seen at or after that time (None: all of it).
    """

    def __init__(self, url: str) -> None:
        # Read-only: never migrates the store nor applies its ingest log (that is the consumer's, of whatever
        # release); a walk waits a bounded time for what was logged before it to be applied (see
        # ..store.read_only). Raises StoreVersionError on first use for a store at another schema version.
        self.store = ReadOnlyStore(url)

    def close(self) -> None:
        """Close the store's connections."""
        self.store.dispose()

    def dataset_id(self, namespace: str, name: str) -> int | None:
        """The store's id of the dataset, or None when it has never been seen."""
        with self.store.read() as conn:
            found = nodes.find_node(conn, "dataset", f"{namespace}:{name}")
        return found[0] if found is not None and (found[1], found[2]) == (namespace, name) else None

    def table_edges(
        self, dataset: int, direction: str, depth: int | None, max_nodes: int, since: datetime | None
    ) -> list[WalkRow]:
        """A row per dataset edge crossed from ``dataset`` (``direction``: ``upstream`` or ``downstream``),
        nearest first; ``source_column`` and ``target_column`` are None."""
        spec = walks.DATASET_EDGES[_direction(direction)]
        with self.store.read() as conn:
            grouped = walks.through_groups(conn)
            found = walk_edges_stepwise(
                conn, spec, [dataset], hops=depth, max_nodes=max_nodes, since=since, grouped=grouped
            )
            names = _table_names(conn, {node for _, node, _ in found}) if found else {}
        rows = [_row(hops, names[node], None, None) for _via, node, hops in found]
        return _once(rows) if grouped else rows

    def column_edges(
        self,
        dataset: int,
        columns: list[str],
        direction: str,
        depth: int | None,
        max_nodes: int,
        since: datetime | None,
    ) -> list[WalkRow]:
        """A row per column edge crossed from the ``columns`` of ``dataset``, nearest first (``direction``:
        ``upstream`` or ``downstream``, also accepted as ``column_upstream`` / ``column_downstream``)."""
        if not columns:
            return []
        upstream = _direction(direction) == "upstream"
        spec = walks.COLUMN_EDGES["upstream" if upstream else "downstream"]
        with self.store.read() as conn:
            grouped = walks.through_groups(conn)
            roots = _column_roots(conn, dataset, columns, grouped)
            if not roots:
                return []
            found = walk_edges_stepwise(
                conn, spec, roots, hops=depth, max_nodes=max_nodes, since=since, grouped=grouped
            )
            fields = field_details(conn, list({f for via, node, _ in found for f in (via, node)}))
            names = _table_names(conn, {fields[node][0] for _, node, _ in found}) if found else {}
        rows: list[WalkRow] = []
        for via, node, hops in found:
            dataset_id, _namespace, _name, field = fields[node]
            source_column, target_column = (field, fields[via][3]) if upstream else (fields[via][3], field)
            rows.append(_row(hops, names[dataset_id], source_column, target_column))
        return _once(rows) if grouped else rows


def _row(depth: int, target: tuple[str, str], source_column: str | None, target_column: str | None) -> WalkRow:
    """A walk row reaching the table ``target`` (``(namespace, name)``)."""
    namespace, name = target
    return {
        "depth": depth,
        "target_table": f"{namespace}/{name}",
        "target_namespace": namespace,
        "target_name": name,
        "source_column": source_column,
        "target_column": target_column,
    }


def _table_names(conn: Connection, ids: set[int]) -> dict[int, tuple[str, str]]:
    """``id → (namespace, name)`` of the datasets ``ids``, by their group's canonical name when in one."""
    n, m = tables.nodes.c, tables.dataset_members.c
    shown = tables.nodes.alias("shown")
    found: dict[int, tuple[str, str]] = {}
    listed = sorted(ids)
    for start in range(0, len(listed), nodes.CHUNK):
        query = (
            select(n.id, func.coalesce(shown.c.namespace, n.namespace), func.coalesce(shown.c.name, n.name))
            .select_from(tables.nodes)
            .outerjoin(tables.dataset_members, and_(m.node_id == n.id, m.member_id == n.id))
            .outerjoin(shown, shown.c.id == m.canonical_id)
            .where(n.id.in_(listed[start : start + nodes.CHUNK]))
        )
        found.update((node, (namespace, name)) for node, namespace, name in conn.execute(query))
    return found


def _column_roots(conn: Connection, dataset: int, columns: list[str], grouped: bool) -> list[int]:
    """Ids of the fields ``columns`` of the dataset (``grouped``: of any name of it, :mod:`.store.graph.identity`)."""
    f, m = tables.fields.c, tables.dataset_members.c
    if not grouped:
        keys = [field_key(dataset, name) for name in columns]
        return list(conn.execute(select(f.id).where(f.field_key.in_(keys))).scalars())
    names = select(m.member_id).where(m.node_id == dataset)
    query = select(f.id).where(or_(f.dataset_id == dataset, f.dataset_id.in_(names)), f.name.in_(columns))
    return list(conn.execute(query.order_by(f.id)).scalars())


def _once(rows: list[WalkRow]) -> list[WalkRow]:
    """``rows`` without repeats, in order (several names of one table give the same row)."""
    seen: set[tuple[int, str, str | None, str | None]] = set()
    kept: list[WalkRow] = []
    for row in rows:
        key = (row["depth"], row["target_table"], row["source_column"], row["target_column"])
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept
