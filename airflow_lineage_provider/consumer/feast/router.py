"""The routes of Feast's OpenLineage consumer API under ``/api/v1/lineage/openlineage``.

Reads need read access and go through the request's :class:`~..store_view.StoreView`: a key limited to
namespaces sees its namespaces' rows and the edges between them, and gets 404 for a node or run it cannot see.
``retention/prune`` and ``reset`` are admin operations on the store, as ``POST /api/v1/retention`` and
``POST /api/v1/reset`` are (the same service functions, audit log and namespace confinement).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response, status

from airflow_lineage_provider.consumer.deps import NO_NUL, Store, stored_answer
from airflow_lineage_provider.consumer.feast import graph, models
from airflow_lineage_provider.consumer.feast.events import event_row
from airflow_lineage_provider.consumer.ingest.service import StoreUnavailable, prune_now, reset_now
from airflow_lineage_provider.consumer.limits.answer_limits import answer_bound
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.marquez.paths import segment
from airflow_lineage_provider.consumer.models import Problem
from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import Admin, Reader, requires
from airflow_lineage_provider.consumer.store.graph import nodes
from airflow_lineage_provider.consumer.store.operations.reset import SharedNamespace
from airflow_lineage_provider.consumer.store.operations.retention import statistics
from airflow_lineage_provider.consumer.store.read import flat_history, flat_rows, queries
from airflow_lineage_provider.consumer.store_view import StoreView, View

PREFIX = "/api/v1/lineage/openlineage"
router = APIRouter(tags=["feast"])
reads = [Depends(requires(Access.READ)), KnownQuery]

Name = Annotated[str | None, Query(max_length=5000, pattern=NO_NUL)]
PathName = Annotated[str, Path(max_length=5000, pattern=NO_NUL)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": Problem}}


@router.get(f"{PREFIX}/namespaces", dependencies=reads, response_model=models.FeastNamespaces)
async def namespaces(request: Request, view: View) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            return {"namespaces": flat_rows.namespaces(conn, visible)}

    return await answer_bound(request).answer(run)


@router.get(f"{PREFIX}/jobs", dependencies=reads, response_model=models.FeastJobs)
async def jobs(request: Request, view: View) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            return {"jobs": flat_rows.job_rows(conn, visible)}

    return await answer_bound(request).answer(run)


@router.get(f"{PREFIX}/datasets", dependencies=reads, response_model=models.FeastDatasets)
async def datasets(request: Request, view: View) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            return {"datasets": flat_rows.dataset_rows(conn, visible)}

    return await answer_bound(request).answer(run)


@router.get(f"{PREFIX}/runs", dependencies=reads, response_model=models.FeastRuns)
async def runs(
    request: Request,
    view: View,
    job_namespace: Name = None,
    job_name: Name = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            found = flat_rows.run_rows(conn, visible, job_namespace or None, job_name or None, limit, offset)
        return {"runs": found, "total": len(found)}

    return await answer_bound(request).answer(run)


@router.get(f"{PREFIX}/runs/{{run_id}}", dependencies=reads, responses=NOT_FOUND)
async def run_detail(request: Request, view: View, run_id: PathName) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            found = flat_rows.run_rows(conn, visible, run_id=run_id, limit=1)
            detail = queries.get_run(conn, run_id, visible) if found else None
        if not found or detail is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"Run {run_id} not found")
        row = dict(found[0])
        facets = row.pop("facets_json")
        row["inputs"] = [{**io, "facets": None} for io in detail["inputs"]]
        row["outputs"] = [{**io, "facets": None} for io in detail["outputs"]]
        row["facets"] = graph.parsed(facets)
        return row

    return await answer_bound(request).answer(run)


@router.get(f"{PREFIX}/runs/{{run_id}}/tree", dependencies=reads, response_model=models.FeastRuns)
async def run_tree(request: Request, view: View, run_id: PathName) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            tree = flat_history.run_tree(conn, run_id, visible)
        return {"runs": tree, "total": len(tree)}

    return await answer_bound(request).answer(run)


Direction = Annotated[Literal["both", "upstream", "downstream"], Query()]


@router.get(
    f"{PREFIX}/datasets/{{namespace}}/{{dataset}}/versions",
    dependencies=reads,
    response_model=models.FeastDatasetVersions,
)
async def dataset_versions(
    request: Request,
    view: View,
    namespace: PathName,
    dataset: PathName,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    namespace, dataset = segment(namespace), segment(dataset)  # %2F kept by GraphNodePaths (paths.py)

    def run() -> dict:
        with view.read() as (conn, visible):
            versions, total = flat_history.dataset_versions(conn, namespace, dataset, visible, limit, offset)
        return {"versions": versions, "total": total}

    return await answer_bound(request).answer(run)


@router.get(
    f"{PREFIX}/datasets/{{namespace}}/{{dataset}}/columns",
    dependencies=reads,
    response_model=models.FeastColumnLineage,
)
async def column_lineage(
    request: Request, view: View, namespace: PathName, dataset: PathName, direction: Direction = "both"
) -> Response:
    namespace, dataset = segment(namespace), segment(dataset)

    def run() -> dict:
        with view.read() as (conn, visible):
            return {"column_lineage": flat_history.column_rows(conn, namespace, dataset, direction, visible)}

    return await answer_bound(request).answer(run)


@router.get(f"{PREFIX}/events", dependencies=reads, response_model=models.FeastEvents)
async def events(
    request: Request,
    view: View,
    namespace: Name = None,
    job_name: Name = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    bound = answer_bound(request)

    def run() -> dict:
        with view.read() as (conn, visible):
            payloads, _total = queries.list_events(
                conn,
                limit,
                offset,
                visible=visible,
                job_namespace=namespace or None,
                job_name=job_name or None,
                admit=bound.admit,
            )
            shown = [event_row(payload, {}) for payload in payloads]
            received = flat_rows.received_at(conn, [row["event_id"] for row in shown])
        for row in shown:
            row["created_at"] = received.get(row["event_id"])
        return {"events": shown, "total": len(shown)}

    return await bound.answer(run)


@router.get(f"{PREFIX}/graph", dependencies=reads, response_model=models.FeastGraph)
async def whole_graph(
    request: Request,
    view: View,
    namespace: Name = None,
    limit: Annotated[int, Query(ge=0, le=10_000, description="Nodes per page; 0: every node.")] = 0,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            return graph.graph_page(conn, visible, namespace or None, limit, offset)

    return await answer_bound(request).answer(run)


@router.get(
    f"{PREFIX}/graph/{{node_type}}/{{namespace}}/{{node_name}}",
    dependencies=reads,
    response_model=models.FeastSubgraph,
    responses={400: {"model": Problem}, **NOT_FOUND},
)
async def node_graph(
    request: Request,
    view: View,
    node_type: PathName,
    namespace: PathName,
    node_name: PathName,
    depth: Annotated[int, Query(ge=1, le=50)] = 10,
    direction: Direction = "both",
) -> Response:
    if node_type not in ("job", "dataset"):
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail="node_type must be one of: ['job', 'dataset']")

    namespace, node_name = segment(namespace), segment(node_name)  # %2F kept by GraphNodePaths (paths.py)

    def run() -> dict:
        with view.read() as (conn, visible):
            # A limited key is answered only about nodes it sees (Feast answers any root, even unknown ones).
            if visible is not None:
                found = nodes.find_node(conn, node_type, f"{namespace}:{node_name}", visible)
                if found is None or found[1:] != (namespace, node_name):
                    raise HTTPException(
                        status.HTTP_404_NOT_FOUND, detail=f"no {node_type} {namespace!r} / {node_name!r}"
                    )
            return graph.subgraph(conn, visible, (node_type, namespace, node_name), depth, direction)

    return await answer_bound(request).answer(run)


def _number(value: float) -> float | int:
    """A whole number as an integer (Feast's settings are integers), any other as it is."""
    return int(value) if float(value).is_integer() else value


def _retention(view: StoreView, request: Request, who: str) -> dict:
    schedule = request.app.state.retention
    with view.read() as (conn, _visible):
        if not view.sees_every_namespace(conn):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                detail=f"{who} sees only some namespaces; the retention statistics count the whole store",
            )
        held = statistics(conn)
        oldest = flat_rows.oldest_updates(conn)
    storage: dict[str, dict[str, int]] = {}
    for name, count, first in (
        ("events", held.events, held.oldest_received_at),
        ("runs", held.runs, oldest["runs"]),
        ("jobs", held.jobs, oldest["jobs"]),
        ("datasets", held.datasets, oldest["datasets"]),
    ):
        storage[name] = {"count": count}
        if first is not None:
            storage[name]["oldest_ms"] = flat_rows.epoch_ms(first) or 0
    days = schedule.days or 0
    return {
        "retention_days": _number(days),
        "retention_enabled": days > 0,
        "check_interval_hours": _number(schedule.interval / 3600),
        "storage": storage,
    }


@router.get(
    f"{PREFIX}/retention",
    dependencies=reads,
    response_model=models.FeastRetention,
    responses={403: {"model": Problem}},
)
async def retention(request: Request, view: View, principal: Reader) -> Response:
    return await stored_answer(lambda: _retention(view, request, principal.who))


@router.post(
    f"{PREFIX}/retention/prune",
    dependencies=[Depends(requires(Access.ADMIN))],
    response_model=models.FeastPruned,
    response_model_exclude_none=True,
)
def prune(request: Request, store: Store, principal: Admin) -> dict:
    days = request.app.state.retention.days
    if not days:
        return {"message": "Retention pruning is disabled (retention_days=0)"}
    try:
        result = prune_now(store, days, "api", principal.namespaces)
    except StoreUnavailable:
        audit.prune(principal, days=days, events=None, runs=None, status=503)
        raise
    audit.prune(principal, days=days, events=result.events, runs=result.runs, status=200)
    return {"message": "Pruning completed", "deleted": {"events": result.events, "runs": result.runs}}


@router.delete(
    f"{PREFIX}/reset",
    dependencies=[Depends(requires(Access.ADMIN)), KnownQuery],
    response_model=models.FeastReset,
    responses={403: {"model": Problem}, 404: {"model": Problem}, 409: {"model": Problem}},
)
def reset(store: Store, principal: Admin, namespace: Name = None) -> dict:
    namespace = namespace or None
    if namespace is None and principal.namespaces is not None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, detail=f"{principal.who} is limited to some namespaces: reset one of them"
        )
    if namespace is not None and principal.namespaces is not None:
        with StoreView(store, principal.namespaces).read() as (conn, visible):
            if not queries.namespace_exists(conn, namespace, visible):
                raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job or dataset in namespace {namespace!r}")
    try:
        counts = reset_now(store, namespace, False, principal.namespaces)
    except StoreUnavailable:
        audit.reset(principal, namespace=namespace, dry_run=False, removed=None, status=503)
        raise
    except SharedNamespace as shared:
        audit.reset(principal, namespace=namespace, dry_run=False, removed=None, status=409)
        raise HTTPException(status.HTTP_409_CONFLICT, detail=str(shared)) from None
    audit.reset(principal, namespace=namespace, dry_run=False, removed=counts.as_dict(), status=200)
    if namespace:
        return {"status": "success", "message": f"Purged namespace: {namespace}"}
    return {"status": "success", "message": "Purged all OpenLineage data"}
