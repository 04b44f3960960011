"""``GET /api/v1/lineage``: the job/dataset graph around a node, in Marquez's shape.

For a key limited to namespace patterns the walk stops at the boundary: it never steps into a node in a
hidden namespace (the walk's ``namespaces`` bound, applied in the recursive step, see :mod:`..store.graph`),
so nothing beyond one is reached through it and no edge into one is drawn; a hidden root answers 404
exactly like a missing node. The graph cards hold one node's own data each, so a card read for another
key is only ever served for a node this walk reached.

One node per dataset: in a store where datasets are known under several names (:mod:`...store.graph.identity`),
the walk goes through every name of a dataset it reaches (a step to another name costs no depth; names in
hidden namespaces are not stepped through), and the answer shows each such dataset once, as
``dataset:<namespace>:<name>`` of its canonical name (for a key that cannot see that name, its first visible
name), with every edge into any of its names drawn to it, once. Its ``data`` adds ``aliases`` — every other
(visible) name, each with ``via`` (``symlink``, ``dataSource``, ``namespaceAlias``) and ``producers`` — and
its own ``producers``. A ``nodeId`` naming any name of the dataset answers the same graph. A store without
such datasets answers with the statements it always did, after one probe (:func:`...store.graph.walks.through_groups`).

Declared and observed lineage (``docs/declared-lineage.md``): every edge says whether a JobEvent ``declared`` it
and a run ``observed`` it, a node no RunEvent named has ``declaredOnly: true``, and ``declared=exclude`` leaves
out the edges only declared (the walk does not cross them), ``declared=only`` keeps only declared ones.

Templated names (``docs/declared-lineage.md#renderings-in-graph-answers``): the renderings of a pattern
(``orders_20260201`` of ``orders_{{ ds_nodash }}``) are drawn as the pattern's node by default, which carries
``data.renderings`` (count, latest, expanded); ``renderings=expanded`` draws every rendering as itself,
``expand=<pattern's nodeId>`` (repeatable) those of one pattern (:mod:`...store.graph.renderings`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from pydantic import Field
from sqlalchemy import Connection, Select, func, select, union_all

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.deps import NO_NUL, Settings, Store
from airflow_lineage_provider.consumer.limits.walk_limits import Walk
from airflow_lineage_provider.consumer.models import LineageGraph, Problem
from airflow_lineage_provider.consumer.security.access import Access, NamespaceScope
from airflow_lineage_provider.consumer.security.auth import Reader, requires
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.graph import answers, job_parents, nodes, renderings, subgraph, walks
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store_view import StoreView

router = APIRouter(tags=["lineage"], dependencies=[Depends(requires(Access.READ))])

NodeId = Annotated[
    str,
    Query(
        alias="nodeId",
        description="dataset:<namespace>:<name> or job:<namespace>:<name>; namespaces and names may contain : and /.",
        max_length=20000,
        pattern=NO_NUL,
    ),
]
Depth = Annotated[
    int,
    Query(ge=0, le=100, description="How many jobs away from the node to go (Marquez's depth)."),
]
Direction = Annotated[Literal["upstream", "downstream", "both"], Query(description="Which way to walk.")]
MaxNodes = Annotated[int | None, Query(alias="maxNodes", ge=1, le=100_000, description="At most this many nodes.")]
DeclaredEdges = Annotated[
    walks.Declared,
    Query(
        description="Edges only declared (by JobEvents, never observed by a run): include them (default), exclude "
        "them (and the nodes reached only through them), or show only declared edges (observed too or not)."
    ),
]

#: Most patterns one answer may be asked to expand.
MAX_EXPANDED = 100
ShownRenderings = Annotated[
    renderings.Shown,
    Query(
        alias="renderings",
        description="Renderings of a templated declared name (orders_20260201 of orders_{{ ds_nodash }}): drawn "
        "as the pattern's one node (collapsed, the default; its data.renderings says how many and the latest) or "
        "each as itself (expanded).",
    ),
]
ListedRenderings = Annotated[
    renderings.Shown,
    Query(
        alias="renderings",
        description="Renderings of a templated declared name (orders_20260201 of orders_{{ ds_nodash }}) are "
        "datasets: listed (expanded, the default) or left out, the pattern standing for them (collapsed).",
    ),
]
Expand = Annotated[
    list[Annotated[str, Field(max_length=20000, pattern=NO_NUL)]] | None,
    Query(
        description="nodeId of a pattern whose renderings are drawn as themselves while the others stay collapsed "
        f"(repeatable, at most {MAX_EXPANDED}).",
    ),
]


def hops_for(kind: str, depth: int) -> int:
    """Edges a walk may cross: two per job level, plus one from a job root to its own datasets."""
    return 2 * depth + (1 if kind == "job" else 0)


def picked_nodes(
    roots: list[int],
    direction: str,
    bounds: walks.WalkBounds,
    spec: dict[walks.Direction, walks.EdgeSpec],
    dialect: str,
) -> Select[Any]:
    """``(node_id, depth [, canonical])`` picked by the walk(s) of ``direction`` (both: one walk each way,
    merged; ``canonical``: see :func:`...store.graph.walks.carries_canonical`)."""
    if direction != "both":
        return walks.nearest_nodes(spec[direction], roots, bounds, dialect)  # type: ignore[index]  # upstream or downstream here
    both = union_all(
        walks.nearest_nodes(spec["upstream"], roots, bounds, dialect, name="up").subquery().select(),
        walks.nearest_nodes(spec["downstream"], roots, bounds, dialect, name="down").subquery().select(),
    ).subquery("both_ways")
    depth = func.min(both.c.depth).label("depth")
    carried = [func.max(both.c.canonical).label("canonical")] if "canonical" in both.c else []
    return (
        select(both.c.node_id, depth, *carried)
        .group_by(both.c.node_id)
        .order_by(depth, both.c.node_id)
        .limit(bounds.max_nodes)
    )


def _not_found(node_id: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no node {node_id!r} in this lineage store")


def lineage_graph(
    store: LineageStore,
    node_id: str,
    depth: int,
    direction: str,
    max_nodes: int,
    namespaces: NamespaceScope | None = None,
    declared: walks.Declared = "include",
    shown: renderings.Shown = "collapsed",
    expand: tuple[str, ...] = (),
    walk: Walk | None = None,
) -> bytes:
    """The graph around ``node_id`` as JSON bytes (``{"graph": [...]}``), within ``namespaces`` if given,
    crossing and drawing the edges ``declared`` keeps (see :func:`...store.graph.walks.declared_filter`), renderings
    ``shown`` collapsed or expanded, ``expand`` the node ids of patterns expanded (:mod:`...store.graph.renderings`);
    ``walk``: the limiter's handle, through which it can be stopped (:mod:`..walk_limits`)."""
    kind, rest = nodeids.parse(node_id)
    if kind == "datasetField":
        raise nodeids.NodeIdError("datasetField: ids belong to /api/v1/column-lineage")
    asked = Asked(node_id, depth, direction, max_nodes, namespaces, declared, shown, expand)
    kept = answers.answers_of(store)
    if kept is None:
        return _built(store, asked, kind, rest, walk)
    # The same request on an unchanged store gets the same bytes (the version is read before the read begins).
    version = kept.version()
    body = kept.get(asked, version)
    if body is None:
        body = _built(store, asked, kind, rest, walk)
        kept.keep(asked, version, body)
    return body


class Asked(NamedTuple):
    """What a graph answer depends on besides the store's data: the request and the principal's scope."""

    node_id: str
    depth: int
    direction: str
    max_nodes: int
    namespaces: NamespaceScope | None
    declared: walks.Declared
    shown: renderings.Shown
    expand: tuple[str, ...]


def _built(store: LineageStore, asked: Asked, kind: str, rest: str, walk: Walk | None) -> bytes:
    """:func:`lineage_graph`'s answer read from the store (``kind``, ``rest``: the asked node id parsed)."""
    node_id, depth, direction, max_nodes, namespaces, declared, shown, expand = asked
    with StoreView(store, namespaces).walking(walk) as (conn, visible):
        root = nodes.find_node(conn, kind, rest, visible)
        if root is None:
            raise _not_found(node_id)
        grouped, declarations = walks.walk_probe(conn)
        templated = declarations and renderings.has_patterns(conn)  # templated names come with JobEvents only
        pattern = templated and kind == "dataset" and renderings.may_be_pattern(root[1], root[2])
        rendering_roots = renderings.rendering_roots(conn, root[0], visible) if pattern else []
        collapse = _collapse(conn, root[0], shown, expand, visible) if templated else None
        bounds = walks.WalkBounds(
            hops=hops_for(kind, depth),
            max_nodes=max_nodes,
            namespaces=None if visible is None else tuple(visible),
            grouped=grouped,
            declared=declared,
        )
        roots = [root[0], *rendering_roots]  # a pattern's walk starts from its renderings too
        picked = picked_nodes(roots, direction, bounds, walks.NODE_EDGES, conn.dialect.name)
        if walk is not None:
            walk.check()  # just before the walk's statement: once it runs, an interrupt stops it
        if grouped:
            found, edges = subgraph.grouped_subgraph(
                conn, picked, store.graph_cards, visible, declared, declarations, collapse
            )
        else:
            found, edges = subgraph.subgraph(conn, picked, store.graph_cards, declared, declarations, collapse)
        if walk is not None:
            walk.check()
        jobs = [node for node, drawn in found.items() if drawn.type == "JOB"]
        for node, contained in job_parents.containment(conn, jobs, visible).items():
            found[node].data = job_parents.with_containment(found[node].data, contained)
        for origin, destination, flags in edges:
            source, target = found[origin], found[destination]
            edge = subgraph.Edge(source.id, target.id, bool(flags & subgraph.DECLARED), bool(flags & subgraph.OBSERVED))
            source.outEdges.append(edge)
            target.inEdges.append(edge)
        body = msgspec.json.encode({"graph": list(found.values())})
        # Free the burst's objects while collection is still paused: freed by reference counting, they
        # never reach the collector, which would otherwise scan them all once it is re-enabled.
        del found, edges
    return body


def _collapse(
    conn: Connection, root: int, shown: renderings.Shown, expand: tuple[str, ...], visible: Visible
) -> renderings.Collapse:
    """How this answer draws renderings: ``expand`` names patterns by node id (one not found expands nothing)."""
    if shown == "expanded":
        return renderings.Collapse(None, root, visible)
    expanded = set()
    for node_id in expand:
        kind, rest = nodeids.parse(node_id)
        found = nodes.find_node(conn, kind, rest, visible) if kind == "dataset" else None
        if found is not None:
            expanded.add(found[0])
    return renderings.Collapse(frozenset(expanded), root, visible)


@router.get(
    "/api/v1/lineage",
    response_model=LineageGraph,
    responses={400: {"model": Problem}, 404: {"model": Problem}},
    summary="The lineage graph around a job or dataset",
)
async def get_lineage(
    request: Request,
    store: Store,
    settings: Settings,
    principal: Reader,
    node_id: NodeId,
    depth: Depth = 20,
    direction: Direction = "both",
    max_nodes: MaxNodes = None,
    declared: DeclaredEdges = "include",
    shown: ShownRenderings = "collapsed",
    expand: Expand = None,
) -> Response:
    if expand is not None and len(expand) > MAX_EXPANDED:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            detail=f"expand names {len(expand)} patterns: at most {MAX_EXPANDED}; ask renderings=expanded instead",
        )
    return await request.app.state.walks.answer(
        request,
        lineage_graph,
        store,
        node_id,
        depth,
        direction,
        max_nodes or settings.default_max_nodes,
        principal.namespaces,
        declared,
        shown,
        tuple(expand or ()),
    )
