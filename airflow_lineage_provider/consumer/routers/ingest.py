"""``POST /api/v1/lineage`` and ``POST /api/v1/lineage/batch``: the OpenLineage HTTP ingest API."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from airflow_lineage_provider.consumer import audit
from airflow_lineage_provider.consumer.access import Access, Principal
from airflow_lineage_provider.consumer.auth import Writer, requires
from airflow_lineage_provider.consumer.deps import read_body
from airflow_lineage_provider.consumer.models import IngestSummary, Problem, StoredEvent
from airflow_lineage_provider.consumer.service import store_events
from airflow_lineage_provider.consumer.validation import EventError, LineageEvent, parse_body, parse_event

router = APIRouter(tags=["ingest"], dependencies=[Depends(requires(Access.WRITE))])

_EVENT = {"type": "object", "description": "An OpenLineage RunEvent, DatasetEvent or JobEvent."}
_ONE_OR_MANY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"oneOf": [_EVENT, {"type": "array", "items": _EVENT}]}}},
    }
}
_MANY = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "array", "items": _EVENT}}}}
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem, "description": "Not JSON, a wrong body shape, or an event that cannot be lineage."},
    401: {"model": Problem, "description": "No credential, or one this consumer does not know."},
    403: {"model": Problem, "description": "The credential may not write (a read key, a viewer, a cookie alone)."},
    413: {"model": Problem, "description": "The body is larger than the configured limit."},
    503: {"model": Problem, "description": "The lineage store is unavailable; retry later."},
}
_BATCH = {
    200: {"model": IngestSummary, "description": "Every event was stored (or already stored)."},
    207: {"model": IngestSummary, "description": "Some events were stored; errors lists the others."},
}


def _named_namespaces(value: Any) -> set[str]:
    """Every ``"namespace": "<string>"`` member anywhere in an event (job, datasets, column-lineage input
    fields, symlinks, parent facet): all that an event could put into the store. Iterative, for any depth."""
    found: set[str] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            if isinstance(item.get("namespace"), str):
                found.add(item["namespace"])
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return found


def _validate(request: Request, value: Any, principal: Principal) -> LineageEvent:
    event = parse_event(value)
    if principal.namespaces is not None:
        outside = sorted(ns for ns in _named_namespaces(value) if not principal.namespaces.allows(ns))
        if outside:
            raise EventError(
                f"{principal.who} may write only namespaces matching {list(principal.namespaces.patterns)}; "
                f"this event names {outside}"
            )
    validator = request.app.state.spec_validator
    if validator is not None:
        errors = validator.errors(value)
        if errors:
            raise EventError(f"the event does not match the OpenLineage schema (strict mode): {'; '.join(errors[:5])}")
    return event


@router.post(
    "/api/v1/lineage",
    status_code=status.HTTP_201_CREATED,
    response_model=StoredEvent,
    responses={**_BATCH, **_ERRORS},
    openapi_extra=_ONE_OR_MANY,
    summary="Ingest one event (201), or an array of events (as /batch)",
)
async def post_lineage(request: Request, principal: Writer) -> Any:
    values, is_array = parse_body(await read_body(request))
    if is_array:
        return await _store_batch(request, values, principal)
    try:
        event = _validate(request, values[0], principal)
    except EventError:
        _audit(principal, 1, 0, 0, 1, [], status.HTTP_400_BAD_REQUEST)
        raise
    result, errors = await run_in_threadpool(store_events, request.app.state.store, [event])
    if errors:
        _audit(principal, 1, 0, 0, 1, audit.namespaces_of([event]), status.HTTP_400_BAD_REQUEST)
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=errors[0])
    _audit(principal, 1, result.stored, result.duplicates, 0, audit.namespaces_of([event]), status.HTTP_201_CREATED)
    request.app.state.retention.maybe_run(request.app.state.store)
    return JSONResponse({"status": "stored" if result.stored else "duplicate"}, status_code=status.HTTP_201_CREATED)


def _audit(
    principal: Principal, received: int, stored: int, duplicates: int, refused: int, namespaces: list[str], code: int
) -> None:
    audit.ingest(
        principal,
        received=received,
        stored=stored,
        duplicates=duplicates,
        refused=refused,
        namespaces=namespaces,
        status=code,
    )


@router.post(
    "/api/v1/lineage/batch",
    response_model=IngestSummary,
    responses={**_BATCH, **_ERRORS},
    openapi_extra=_MANY,
    summary="Ingest an array of events: 200 if all stored, 207 with per-event errors if some were not",
)
async def post_batch(request: Request, principal: Writer) -> Any:
    values, is_array = parse_body(await read_body(request))
    if not is_array:
        raise EventError("the batch endpoint takes a JSON array of events; post a single event to /api/v1/lineage")
    return await _store_batch(request, values, principal)


async def _store_batch(request: Request, values: list[Any], principal: Principal) -> JSONResponse:
    errors: dict[int, str] = {}
    valid: list[tuple[int, LineageEvent]] = []
    for index, value in enumerate(values):
        try:
            valid.append((index, _validate(request, value, principal)))
        except EventError as error:
            errors[index] = str(error)
    duplicates = stored = 0
    if valid:
        result, refused = await run_in_threadpool(store_events, request.app.state.store, [e for _, e in valid])
        duplicates, stored = result.duplicates, result.stored
        errors.update((valid[i][0], message) for i, message in refused.items())
        request.app.state.retention.maybe_run(request.app.state.store)
    summary = {
        "received": len(values),
        "successful": len(values) - len(errors),
        "failed": len(errors),
        "duplicates": duplicates,
        "errors": [{"index": i, "error": errors[i]} for i in sorted(errors)],
    }
    if errors:  # per-event results let a sender (e.g. the export DAG) settle each event of a partial batch
        summary["results"] = [
            {"index": i, "status": 400, "error": errors[i]} if i in errors else {"index": i, "status": 201}
            for i in range(len(values))
        ]
    code = status.HTTP_200_OK if not errors else status.HTTP_207_MULTI_STATUS if len(errors) < len(values) else 400
    namespaces = audit.namespaces_of(event for index, event in valid if index not in errors)
    _audit(principal, len(values), stored, duplicates, len(errors), namespaces, code)
    return JSONResponse(summary, status_code=code)
