"""The walks :class:`~.collect_lineage.CollectLineageOperator` runs over a lineage store, as output rows.

A dataset known under several names (:mod:`..consumer.store.identity`) is one table here too: the walks go
through every name of it (:mod:`..consumer.store.stepwise`), a row names a table by its group's canonical
name, and rows made the same by that are written once.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select

from airflow_lineage_provider.consumer.store import LineageStore, graph, nodes, tables
from airflow_lineage_provider.consumer.store.columns import field_details
from airflow_lineage_provider.consumer.store.ingest import field_key
from airflow_lineage_provider.consumer.store.stepwise import walk_edges_stepwise


class LineageWalker:
    """Table and column walks from one dataset of the store at ``url``."""

    def __init__(self, url: str) -> None:
        self.store = LineageStore(url)

    def close(self) -> None:
        self.store.dispose()

    def dataset_id(self, namespace: str, name: str) -> int | None:
        """The store's id of the dataset, or None when it has never been seen."""
        with self.store.read() as conn:
            found = nodes.find_node(conn, "dataset", f"{namespace}:{name}")
        return found[0] if found is not None and (found[1], found[2]) == (namespace, name) else None

    def _names(self, conn: Any, ids: set[int]) -> dict[int, str]:
        """``id → "namespace/name"`` of the datasets ``ids``, by their group's canonical name when in one."""
        n, m = tables.nodes.c, tables.dataset_members.c
        shown = tables.nodes.alias("shown")
        found: dict[int, str] = {}
        listed = sorted(ids)
        for start in range(0, len(listed), nodes.CHUNK):
            query = (
                select(n.id, func.coalesce(shown.c.namespace, n.namespace), func.coalesce(shown.c.name, n.name))
                .select_from(tables.nodes)
                .outerjoin(tables.dataset_members, and_(m.node_id == n.id, m.member_id == n.id))
                .outerjoin(shown, shown.c.id == m.canonical_id)
                .where(n.id.in_(listed[start : start + nodes.CHUNK]))
            )
            found.update((node, f"{namespace}/{name}") for node, namespace, name in conn.execute(query))
        return found

    def table_edges(
        self, dataset: int, direction: str, depth: int | None, max_nodes: int, since: datetime | None
    ) -> list[dict[str, Any]]:
        """``{depth, target_table, source_column, target_column}`` per dataset edge crossed (``depth`` None:
        unbounded)."""
        spec = graph.DATASET_EDGES[direction]  # type: ignore[index]
        with self.store.read() as conn:
            grouped = graph.through_groups(conn)
            found = walk_edges_stepwise(
                conn, spec, [dataset], hops=depth, max_nodes=max_nodes, since=since, grouped=grouped
            )
            names = self._names(conn, {node for _, node, _ in found}) if found else {}
        rows = [
            {"depth": hops, "target_table": names[node], "source_column": None, "target_column": None}
            for _via, node, hops in found
        ]
        return _once(rows) if grouped else rows

    def column_edges(
        self,
        dataset: int,
        columns: list[str],
        edge_type: str,
        depth: int | None,
        max_nodes: int,
        since: datetime | None,
    ) -> list[dict[str, Any]]:
        """``{depth, target_table, source_column, target_column}`` per column edge crossed from ``columns``."""
        if not columns:
            return []
        direction = edge_type.removeprefix("column_")
        spec = graph.COLUMN_EDGES[direction]  # type: ignore[index]
        with self.store.read() as conn:
            grouped = graph.through_groups(conn)
            roots = _column_roots(conn, dataset, columns, grouped)
            if not roots:
                return []
            found = walk_edges_stepwise(
                conn, spec, roots, hops=depth, max_nodes=max_nodes, since=since, grouped=grouped
            )
            fields = field_details(conn, list({f for via, node, _ in found for f in (via, node)}))
            names = self._names(conn, {fields[node][0] for _, node, _ in found}) if found else {}
        rows = []
        for via, node, hops in found:
            dataset_id, _namespace, _name, field = fields[node]
            upstream = direction == "upstream"
            rows.append(
                {
                    "depth": hops,
                    "target_table": names[dataset_id],
                    "source_column": field if upstream else fields[via][3],
                    "target_column": fields[via][3] if upstream else field,
                }
            )
        return _once(rows) if grouped else rows


def _column_roots(conn: Any, dataset: int, columns: list[str], grouped: bool) -> list[int]:
    """Ids of the fields ``columns`` of the dataset (``grouped``: of any name of it, :mod:`.identity`)."""
    f, m = tables.fields.c, tables.dataset_members.c
    if not grouped:
        keys = [field_key(dataset, name) for name in columns]
        return list(conn.execute(select(f.id).where(f.field_key.in_(keys))).scalars())
    names = select(m.member_id).where(m.node_id == dataset)
    query = select(f.id).where(or_(f.dataset_id == dataset, f.dataset_id.in_(names)), f.name.in_(columns))
    return list(conn.execute(query.order_by(f.id)).scalars())


def _once(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without repeats, in order (several names of one table give the same row)."""
    return [dict(row) for row in dict.fromkeys(tuple(row.items()) for row in rows)]
