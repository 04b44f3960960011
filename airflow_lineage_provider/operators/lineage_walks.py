"""The walks :class:`~.collect_lineage.CollectLineageOperator` runs over a lineage store, as output rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

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
        n = tables.nodes.c
        query = select(n.id, n.namespace, n.name).where(n.id.in_(list(ids)))
        return {node: f"{namespace}/{name}" for node, namespace, name in conn.execute(query)}

    def table_edges(
        self, dataset: int, direction: str, depth: int | None, max_nodes: int, since: datetime | None
    ) -> list[dict[str, Any]]:
        """``{depth, target_table, source_column, target_column}`` per dataset edge crossed (``depth`` None:
        unbounded)."""
        spec = graph.DATASET_EDGES[direction]  # type: ignore[index]
        with self.store.read() as conn:
            found = walk_edges_stepwise(conn, spec, [dataset], hops=depth, max_nodes=max_nodes, since=since)
            names = self._names(conn, {node for _, node, _ in found}) if found else {}
        return [
            {"depth": hops, "target_table": names[node], "source_column": None, "target_column": None}
            for _via, node, hops in found
        ]

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
            keys = [field_key(dataset, name) for name in columns]
            roots = list(conn.execute(select(tables.fields.c.id).where(tables.fields.c.field_key.in_(keys))).scalars())
            if not roots:
                return []
            found = walk_edges_stepwise(conn, spec, roots, hops=depth, max_nodes=max_nodes, since=since)
            fields = field_details(conn, list({f for via, node, _ in found for f in (via, node)}))
        rows = []
        for via, node, hops in found:
            _, namespace, name, field = fields[node]
            upstream = direction == "upstream"
            rows.append(
                {
                    "depth": hops,
                    "target_table": f"{namespace}/{name}",
                    "source_column": field if upstream else fields[via][3],
                    "target_column": fields[via][3] if upstream else field,
                }
            )
        return rows
