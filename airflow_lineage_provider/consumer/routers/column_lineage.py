"""``GET /api/v1/column-lineage``: field-level lineage from ``columnLineage`` facets, in Marquez's shape.

For a key limited to namespace patterns, a field is visible when its dataset's namespace is: the walk
never steps into a hidden field (nor beyond it), no edge or input field names one, and a hidden root
answers 404 exactly like a missing one.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import APIRouter, Depends, HTTPException, Request, Response, status

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.access import Access, NamespaceScope
from airflow_lineage_provider.consumer.auth import Reader, requires
from airflow_lineage_provider.consumer.deps import Settings, Store
from airflow_lineage_provider.consumer.models import ColumnLineageGraph, Problem
from airflow_lineage_provider.consumer.routers.lineage import Depth, Direction, MaxNodes, NodeId, picked_nodes
from airflow_lineage_provider.consumer.store import LineageStore, columns, graph, nodes
from airflow_lineage_provider.consumer.store.visibility import Visible, visible_namespaces

router = APIRouter(tags=["lineage"], dependencies=[Depends(requires(Access.READ))])


def _parsed(node_id: str) -> tuple[str, str]:
    """``(kind, rest)`` of a column-lineage start (checked before the store is asked anything)."""
    kind, rest = nodeids.parse(node_id)
    if kind == "job":
        raise nodeids.NodeIdError(
            "column lineage starts from a datasetField:<ns>:<name>:<field> or dataset:<ns>:<name>"
        )
    return kind, rest


def _roots(conn: Any, node_id: str, kind: str, rest: str, visible: Visible = None) -> list[int]:
    if kind == "dataset":
        dataset = nodes.find_node(conn, "dataset", rest, visible)
        roots = columns.dataset_field_ids(conn, dataset[0]) if dataset else []
    else:
        field = nodes.find_field(conn, rest, visible)
        roots = [field[0]] if field else []
    if not roots:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, detail=f"no column lineage for {node_id!r} in this lineage store"
        )
    return roots


def column_graph(
    store: LineageStore,
    node_id: str,
    depth: int,
    direction: str,
    max_nodes: int,
    namespaces: NamespaceScope | None = None,
) -> bytes:
    """The column-lineage graph around a field (or all fields of a dataset) as JSON bytes, within ``namespaces``."""
    kind, rest = _parsed(node_id)
    with store.read() as conn:
        visible = visible_namespaces(conn, namespaces)
        roots = _roots(conn, node_id, kind, rest, visible)
        bounds = graph.WalkBounds(
            hops=depth,
            max_nodes=max(max_nodes, len(roots)),
            namespaces=None if visible is None else tuple(visible),
        )
        picked = {
            node: hops
            for node, hops in conn.execute(
                picked_nodes(roots, direction, bounds, graph.COLUMN_EDGES, conn.dialect.name)
            )
        }
        details = columns.field_details(conn, list(picked))
        edges = columns.edges_among(conn, picked)
        types = columns.field_types(conn, list({d[0] for d in details.values()}))
    nodes: dict[int, dict[str, Any]] = {}
    for field_id in picked:
        dataset_id, namespace, name, field = details[field_id]
        nodes[field_id] = {
            "id": nodeids.field_node_id(namespace, name, field),
            "type": "DATASET_FIELD",
            "data": {
                "namespace": namespace,
                "dataset": name,
                "field": field,
                "fieldType": types.get(dataset_id, {}).get(field),
                "inputFields": [],
            },
            "inEdges": [],
            "outEdges": [],
        }
    for source, target, transformations in edges:
        edge = {"origin": nodes[source]["id"], "destination": nodes[target]["id"]}
        nodes[source]["outEdges"].append(edge)
        nodes[target]["inEdges"].append(edge)
        src = nodes[source]["data"]
        nodes[target]["data"]["inputFields"].append(
            {
                "namespace": src["namespace"],
                "dataset": src["dataset"],
                "field": src["field"],
                "transformations": transformations,
            }
        )
    return msgspec.json.encode({"graph": list(nodes.values())})


@router.get(
    "/api/v1/column-lineage",
    response_model=ColumnLineageGraph,
    responses={400: {"model": Problem}, 404: {"model": Problem}},
    summary="Column lineage around a dataset field (or every field of a dataset)",
)
async def get_column_lineage(
    request: Request,
    store: Store,
    settings: Settings,
    principal: Reader,
    node_id: NodeId,
    depth: Depth = 20,
    direction: Direction = "both",
    max_nodes: MaxNodes = None,
) -> Response:
    return await request.app.state.walks.answer(
        column_graph,
        store,
        node_id,
        depth,
        direction,
        max_nodes or settings.default_max_nodes,
        principal.namespaces,
    )
