"""A walk's subgraph in Marquez's shape: the picked nodes with their data and the edges among them.

Built in one statement from the walk query, with times formatted by the database and rows read as the
driver returns them: a depth-10 walk on the benchmark graph returns ~3,000 nodes and ~4,400 edges.
"""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import Connection, literal, null, select, union_all

from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.sqltime import iso_utc


def subgraph(conn: Connection, picked: Any) -> tuple[dict[int, dict[str, Any]], list[tuple[int, int]]]:
    """Graph data of the nodes a walk picked and every edge among them, in one statement.

    ``picked`` selects ``(node_id, depth)`` (see :func:`..graph.nearest_nodes`). Returns ``id → node`` in
    Marquez's graph shape (``id``, ``type``, ``data``, empty ``inEdges``/``outEdges``), nearest first,
    and the ``(origin, destination)`` edges. A dataset's ``fields`` are the stored JSON as ``msgspec.Raw``,
    for ``msgspec.json.encode`` to splice in.
    """
    n, d, j, r, e = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c, tables.edges.c
    chosen = picked.cte("picked")
    node_rows = (
        select(
            literal("n").label("row"),
            chosen.c.node_id.label("a"),
            chosen.c.depth.label("b"),
            n.kind,
            n.namespace,
            n.name,
            iso_utc(n.updated_at).label("updated_at"),
            d.fields,
            r.run_uuid,
            r.state,
            iso_utc(r.started_at).label("started_at"),
            iso_utc(r.ended_at).label("ended_at"),
        )
        .join_from(chosen, tables.nodes, n.id == chosen.c.node_id)
        .outerjoin(tables.datasets, d.node_id == n.id)
        .outerjoin(tables.jobs, j.node_id == n.id)
        .outerjoin(tables.runs, r.run_uuid == j.latest_run_uuid)
    )
    origin, destination = chosen.alias("origin"), chosen.alias("destination")
    blank = [null() for _ in range(9)]
    edge_rows = (
        select(literal("e"), e.origin_id, e.destination_id, *blank)
        .join_from(tables.edges, origin, origin.c.node_id == e.origin_id)
        .join(destination, destination.c.node_id == e.destination_id)
    )
    # Every column is already an int or text: read the driver's tuples as they are (thousands of rows).
    result = conn.execute(union_all(node_rows, edge_rows))
    rows = result.cursor.fetchall()
    result.close()
    nodes = {
        row[1]: _graph_node(row)
        for row in sorted((row for row in rows if row[0] == "n"), key=lambda row: (row[2], row[1]))
    }
    return nodes, [(row[1], row[2]) for row in rows if row[0] == "e"]


def _graph_node(row: Any) -> dict[str, Any]:
    _, _, _, kind, namespace, name, updated_at, fields, run_uuid, state, started_at, ended_at = row
    data: dict[str, Any] = {
        "id": {"namespace": namespace, "name": name},
        "name": name,
        "namespace": namespace,
        "updatedAt": updated_at,
    }
    if kind == "dataset":
        data["type"] = "DB_TABLE"
        # Stored as JSON text: spliced into the response as it is, never decoded and encoded again.
        data["fields"] = msgspec.Raw(fields) if fields else []
        return {"id": f"dataset:{namespace}:{name}", "type": "DATASET", "data": data, "inEdges": [], "outEdges": []}
    data["type"] = "BATCH"
    data["simpleName"] = name
    data["latestRun"] = (
        {"id": run_uuid, "state": state, "startedAt": started_at, "endedAt": ended_at} if run_uuid else None
    )
    return {"id": f"job:{namespace}:{name}", "type": "JOB", "data": data, "inEdges": [], "outEdges": []}
