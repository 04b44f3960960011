"""``GET /api/v1/column-lineage``: field-level lineage from ``columnLineage`` facets, in Marquez's shape.

Starts, as Marquez's: ``datasetField:<ns>:<name>:<field>`` (one field), ``dataset:<ns>:<name>`` (every field of
the dataset that takes part in column lineage) and ``job:<ns>:<name>`` (every such field of the datasets the
job reads and writes). Marquez's ``withDownstream``: ``false`` walks upstream only, ``true`` both ways; ours,
``direction`` (``upstream``, ``downstream``, ``both``), says it instead; with neither, upstream only (Marquez's
default). Both at once is a 400. ``depth`` counts column edges.

For a key limited to namespace patterns, a field is visible when its dataset's namespace is: the walk
never steps into a hidden field (nor beyond it), no edge or input field names one, and a hidden root
answers 404 exactly like a missing one.

Datasets known under several names (:mod:`...store.graph.identity`): a field of one name of a dataset is the field of
the same name of every other name of it. The walk goes through all of them (:mod:`..store.graph`), the start
fields of a dataset or job are those of every (visible) name, and each field is shown once, under the name
its dataset is shown under in graph answers (``datasetField:<canonical namespace>:<canonical name>:<field>``;
for a key that cannot see the canonical name, the first visible name); edges and ``inputFields`` made the
same by that are listed once. A ``datasetField`` id naming a field through any name of its dataset finds it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.deps import Settings, Store
from airflow_lineage_provider.consumer.limits.walk_limits import Walk
from airflow_lineage_provider.consumer.models import ColumnLineageGraph, Problem
from airflow_lineage_provider.consumer.routers.graph.graph_walks import (
    DeclaredEdges,
    Depth,
    MaxNodes,
    NodeId,
    picked_nodes,
)
from airflow_lineage_provider.consumer.security.access import Access, NamespaceScope
from airflow_lineage_provider.consumer.security.auth import Reader, requires
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph import columns, nodes, walks
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store_view import StoreView

router = APIRouter(tags=["lineage"], dependencies=[Depends(requires(Access.READ))])


WithDownstream = Annotated[
    bool | None,
    Query(alias="withDownstream", description="Marquez's: false (upstream only) or true (both ways)."),
]
ColumnDirection = Annotated[
    Literal["upstream", "downstream", "both"] | None,
    Query(description="Which way to walk (instead of withDownstream); upstream when neither is given."),
]


def walk_direction(with_downstream: bool | None, direction: str | None) -> str:
    """The walk's direction from Marquez's ``withDownstream`` or our ``direction`` (400 when both are given)."""
    if with_downstream is not None and direction is not None:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"withDownstream={str(with_downstream).lower()} and direction={direction}: give one of them",
        )
    if with_downstream is not None:
        return "both" if with_downstream else "upstream"
    return direction or "upstream"


def _roots(conn: Any, node_id: str, kind: str, rest: str, visible: Visible = None, grouped: bool = False) -> list[int]:
    if kind in ("dataset", "job"):
        node = nodes.find_node(conn, kind, rest, visible)
        if node is None:
            roots = []
        elif kind == "dataset":
            roots = columns.dataset_field_ids(conn, node[0], grouped, visible)
        else:
            roots = columns.job_field_ids(conn, node[0], visible, grouped)
    else:
        field = nodes.find_field(conn, rest, visible, grouped)
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
    declared: walks.Declared = "include",
    walk: Walk | None = None,
) -> bytes:
    """The column-lineage graph around a field (or the fields of a dataset or of a job's datasets) as JSON bytes,
    within ``namespaces``; ``walk``: the limiter's handle, through which it can be stopped (:mod:`..walk_limits`)."""
    kind, rest = nodeids.parse(node_id)
    check = walk.check if walk is not None else _go_on
    with StoreView(store, namespaces).walking(walk) as (conn, visible):
        grouped = walks.through_groups(conn)
        roots = _roots(conn, node_id, kind, rest, visible, grouped)
        bounds = walks.WalkBounds(
            hops=depth,
            max_nodes=max(max_nodes, len(roots)),
            namespaces=None if visible is None else tuple(visible),
            grouped=grouped,
            declared=declared,
        )
        check()  # just before the walk's statement: once it runs, an interrupt stops it
        picked = {
            node: hops
            for node, hops in conn.execute(
                picked_nodes(roots, direction, bounds, walks.COLUMN_EDGES, conn.dialect.name)
            )
        }
        check()
        details = columns.field_details(conn, list(picked))
        edges = columns.edges_among(conn, picked, declared)
        check()
        datasets = list({d[0] for d in details.values()})
        shown = columns.shown_datasets(conn, datasets, visible) if grouped else {}
        types = columns.field_types(conn, datasets, shown)
    check()
    return msgspec.json.encode({"graph": _graph(picked, details, edges, types, shown)})


def _go_on() -> None:
    """No check between the steps of a walk run outside a limiter."""


def _graph(
    picked: dict[int, int],
    details: dict[int, tuple[int, str, str, str]],
    edges: list[tuple[int, int, Any, bool, bool]],
    types: dict[int, dict[str, str | None]],
    shown: dict[int, tuple[int, str, str]],
) -> list[dict[str, Any]]:
    """The answer's nodes, nearest first: one per field as shown (``shown``: the name each dataset in a group is
    shown under, see the module), with its edges and input fields, each once."""
    of: dict[int, str] = {}  # field id → the id of the node showing it
    nodes: dict[str, dict[str, Any]] = {}
    for field_id in picked:
        dataset_id, namespace, name, field = details[field_id]
        _shown_id, namespace, name = shown.get(dataset_id, (dataset_id, namespace, name))
        of[field_id] = key = nodeids.field_node_id(namespace, name, field)
        node = nodes.get(key)
        field_type = types.get(dataset_id, {}).get(field)
        if node is None:
            data: dict[str, Any] = {"namespace": namespace, "dataset": name, "field": field}
            if field_type is not None:  # Marquez leaves out what it does not know
                data["fieldType"] = field_type
            data["inputFields"] = []
            nodes[key] = {"id": key, "type": "DATASET_FIELD", "data": data, "inEdges": [], "outEdges": []}
        elif field_type is not None and "fieldType" not in node["data"]:  # the type another name of it has
            data = node["data"]
            node["data"] = {**{k: v for k, v in data.items() if k != "inputFields"}, "fieldType": field_type}
            node["data"]["inputFields"] = data["inputFields"]
    drawn: set[tuple[str, str]] = set()
    for source, target, transformations, declared, observed in edges:
        origin, destination = of[source], of[target]
        if origin == destination and source != target:
            continue  # an edge between two names of one field
        if (origin, destination) in drawn:  # the same edge through another name: its flags merge
            edge = next(e for e in nodes[origin]["outEdges"] if e["destination"] == destination)
            edge["declared"] |= declared
            edge["observed"] |= observed
            continue
        drawn.add((origin, destination))
        edge = {"origin": origin, "destination": destination, "declared": declared, "observed": observed}
        nodes[origin]["outEdges"].append(edge)
        nodes[destination]["inEdges"].append(edge)
        nodes[destination]["data"]["inputFields"].append(_input_field(nodes[origin]["data"], transformations))
    return list(nodes.values())


def _input_field(source: dict[str, Any], transformations: Any) -> dict[str, Any]:
    """An ``inputFields`` item: the source field, with Marquez's ``transformationDescription`` and
    ``transformationType`` when the facet gave them, and the facet's ``transformations`` as stored."""
    item = {"namespace": source["namespace"], "dataset": source["dataset"], "field": source["field"]}
    if isinstance(transformations, dict):
        item.update((k, v) for k, v in transformations.items() if k.startswith("transformation") and v is not None)
    if transformations is not None:
        item["transformations"] = transformations
    return item


@router.get(
    "/api/v1/column-lineage",
    response_model=ColumnLineageGraph,
    responses={400: {"model": Problem}, 404: {"model": Problem}},
    summary="Column lineage around a dataset field (or the fields of a dataset, or of a job's datasets)",
)
async def get_column_lineage(
    request: Request,
    store: Store,
    settings: Settings,
    principal: Reader,
    node_id: NodeId,
    depth: Depth = 20,
    with_downstream: WithDownstream = None,
    direction: ColumnDirection = None,
    max_nodes: MaxNodes = None,
    declared: DeclaredEdges = "include",
) -> Response:
    return await request.app.state.walks.answer(
        request,
        column_graph,
        store,
        node_id,
        depth,
        walk_direction(with_downstream, direction),
        max_nodes or settings.default_max_nodes,
        principal.namespaces,
        declared,
    )
