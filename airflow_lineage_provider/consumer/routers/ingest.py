"""``POST /api/v1/lineage`` and ``POST /api/v1/lineage/batch``: the OpenLineage HTTP ingest API."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.responses import JSONResponse, Response

from airflow_lineage_provider.consumer.ingest.request_body import read_body
from airflow_lineage_provider.consumer.models import IngestSummary, Problem, StoredEvent
from airflow_lineage_provider.consumer.security import audit
from airflow_lineage_provider.consumer.security.access import Access, Principal
from airflow_lineage_provider.consumer.security.auth import Writer, requires
from airflow_lineage_provider.consumer.settings import ConsumerSettings
from airflow_lineage_provider.consumer.store.graph.identity import data_source_alias
from airflow_lineage_provider.consumer.store.write.deferred_apply import IngestBacklog
from airflow_lineage_provider.consumer.store.write.ingest import IngestResult
from airflow_lineage_provider.consumer.validation import EventError, LineageEvent, parse_body, parse_event, shown

# The one auth dependency (FastAPI resolves it once per request, for the router's declaration and the endpoints'
# ``principal`` parameter alike).
router = APIRouter(tags=["ingest"], dependencies=[Depends(requires(Access.WRITE))])

#: The answer to one event, encoded once: ``{"status": "duplicate"}`` or ``{"status": "stored"}``.
_ANSWERS = {
    flag: json.dumps({"status": "stored" if flag else "duplicate"}, separators=(",", ":")).encode()
    for flag in (False, True)
}
#: Most per-event error messages a batch answer lists (the statuses in ``results`` cover every event).
MAX_LISTED_ERRORS = 100

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
    413: {"model": Problem, "description": "The body or the batch is larger than the configured limits."},
    503: {"model": Problem, "description": "The lineage store is unavailable; retry later."},
}
_BATCH: dict[int | str, dict[str, Any]] = {
    200: {"model": IngestSummary, "description": "Every event was stored (or already stored)."},
    204: {"description": "With batch_answers=feast, on /batch: every event was stored (Feast's answer)."},
    207: {"model": IngestSummary, "description": "Some events were stored; errors lists the others."},
}


def _named_namespaces(value: Any) -> set[str]:
    """Every ``"namespace": "<string>"`` member anywhere in an event (job, datasets, column-lineage input
    fields, symlinks, parent facet). With the namespace a ``dataSource`` facet's URI names (checked apart, in
    :func:`_check`), all that an event could put into the store. Iterative, for any depth."""
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


@dataclass
class Checked:
    """A request body decoded and checked off the event loop: the events to store and the refused ones."""

    is_array: bool
    valid: list[tuple[int, LineageEvent]] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)

    @property
    def received(self) -> int:
        """Events in the body: each is either valid or refused."""
        return len(self.valid) + len(self.errors)


def _check(value: Any, principal: Principal, validator: Any, not_after: datetime) -> LineageEvent:
    event = parse_event(value, not_after=not_after)
    if principal.namespaces is not None:
        allowed = principal.namespaces
        outside = sorted(ns for ns in _named_namespaces(value) if not allowed.allows(ns))
        if outside:
            raise EventError(
                f"{principal.who} may write only namespaces matching {list(allowed.patterns)}; "
                f"this event names {shown(outside)}"
            )
        # A dataSource URI that spells another namespace claims the dataset's name there (store.identity):
        # a limited key must not merge its dataset with one outside its namespaces through it.
        named = [("dataset", event.dataset)]
        named += [(f"inputs[{index}]", ref) for index, ref in enumerate(event.inputs)]
        named += [(f"outputs[{index}]", ref) for index, ref in enumerate(event.outputs)]
        for where, ref in named:
            claimed = None if ref is None else data_source_alias(ref.namespace, ref.facets)
            if claimed is not None and not allowed.allows(claimed):
                raise EventError(
                    f"{where}.facets.dataSource.uri names namespace {shown(claimed)} outside this key's "
                    f"namespaces {list(allowed.patterns)}: {principal.who} may not claim a name there"
                )
    if validator is not None:
        errors = validator.errors(value)
        if errors:
            found = "; ".join(message[:300] for message in errors[:5])
            raise EventError(f"the event does not match the OpenLineage schema (strict mode): {found}")
    return event


def check_body(body: bytes, settings: ConsumerSettings, principal: Principal, validator: Any) -> Checked:
    """Decode ``body`` and check each event (CPU work: run in a worker thread, never on the event loop)."""
    values, is_array = parse_body(body, settings.max_batch_events)
    not_after = datetime.now(timezone.utc) + timedelta(hours=settings.max_clock_skew_hours)
    checked = Checked(is_array=is_array)
    for index, value in enumerate(values):
        try:
            checked.valid.append((index, _check(value, principal, validator, not_after)))
        except EventError as error:
            checked.errors[index] = str(error)
    return checked


@dataclass
class Ingested:
    """A request body checked and its valid events stored: what the answer is made of."""

    checked: Checked
    result: IngestResult = field(default_factory=IngestResult)
    #: ``index among checked.valid → error`` for the valid events the store refused.
    refused: dict[int, str] = field(default_factory=dict)


async def ingest_body(body: bytes, state: Any, principal: Principal, batch: bool = False) -> Ingested:
    """Check ``body`` and store its valid events, grouped with concurrent requests (``state.ingest``): both in
    the grouped ingest's writer thread, so a request costs the event loop one hand-off and one wake-up. A single
    event with an error stores nothing; a ``batch`` body that is not an array is refused before anything is."""
    ingested = Ingested(Checked(is_array=batch))

    def prepare() -> list[LineageEvent]:
        checked = ingested.checked = check_body(body, state.settings, principal, state.spec_validator)
        if batch and not checked.is_array:
            raise EventError("the batch endpoint takes a JSON array of events; post a single event to /api/v1/lineage")
        if checked.valid and (checked.is_array or not checked.errors):
            return [event for _, event in checked.valid]
        return []

    ingested.result, ingested.refused = await state.ingest.submit(prepare, len(body), principal.log_name)
    return ingested


async def _ingested(request: Request, principal: Principal, batch: bool = False) -> Ingested:
    """Read and ingest the body; with deferred apply, refused (503) before the body is read while this process
    counts the ingest log full, and again, exactly, when its group is written (:class:`IngestBacklog`)."""
    try:
        deferred = request.app.state.store.deferred
        if deferred is not None:
            deferred.check_room()  # the process's count only: no look at the store, nothing read
        body = await read_body(request)
        return await ingest_body(body, request.app.state, principal, batch)
    except IngestBacklog:
        audit.ingest_refused(principal, reason="the ingest log is full", status=status.HTTP_503_SERVICE_UNAVAILABLE)
        raise


@router.post(
    "/api/v1/lineage",
    status_code=status.HTTP_201_CREATED,
    response_model=StoredEvent,
    responses={**_BATCH, **_ERRORS},
    openapi_extra=_ONE_OR_MANY,
    summary="Ingest one event (201), or an array of events (as /batch)",
)
async def post_lineage(request: Request, principal: Writer) -> Any:
    ingested = await _ingested(request, principal)
    checked = ingested.checked
    if checked.is_array:
        return _store_batch(request, ingested, principal)
    if checked.errors:
        _audit(principal, 1, 0, 0, 1, [], status.HTTP_400_BAD_REQUEST)
        raise EventError(checked.errors[0])
    event, result, errors = checked.valid[0][1], ingested.result, ingested.refused
    if errors:
        _audit(principal, 1, 0, 0, 1, audit.namespaces_of([event]), status.HTTP_400_BAD_REQUEST)
        raise HTTPException(status.HTTP_400_BAD_REQUEST, detail=errors[0])
    _audit(principal, 1, result.stored, result.duplicates, 0, audit.namespaces_of([event]), status.HTTP_201_CREATED)
    request.app.state.retention.maybe_run(request.app.state.store)
    return Response(_ANSWERS[bool(result.stored)], status_code=status.HTTP_201_CREATED, media_type="application/json")


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
    ingested = await _ingested(request, principal, batch=True)
    return _store_batch(request, ingested, principal)


def _store_batch(request: Request, ingested: Ingested, principal: Principal) -> Response:
    checked = ingested.checked
    errors, valid, received = checked.errors, checked.valid, checked.received
    duplicates, stored = ingested.result.duplicates, ingested.result.stored
    if valid:
        errors.update((valid[i][0], message) for i, message in ingested.refused.items())
        request.app.state.retention.maybe_run(request.app.state.store)
    summary = batch_summary(received, errors, duplicates)
    code = status.HTTP_200_OK if not errors else status.HTTP_207_MULTI_STATUS if len(errors) < received else 400
    feast = request.app.state.settings.batch_answers == "feast"
    if feast and request.url.path.endswith("/batch"):  # Feast's batch codes: 204 when all went in, else 200
        code = status.HTTP_200_OK if errors else status.HTTP_204_NO_CONTENT
    elif feast and errors:  # and Feast's array ingest: 207 whenever an event failed
        code = status.HTTP_207_MULTI_STATUS
    namespaces = audit.namespaces_of(event for index, event in valid if index not in errors)
    _audit(principal, received, stored, duplicates, len(errors), namespaces, code)
    if code == status.HTTP_204_NO_CONTENT:
        return Response(status_code=code)
    return JSONResponse(summary, status_code=code)


def batch_summary(received: int, errors: dict[int, str], duplicates: int) -> dict[str, Any]:
    """The answer to a batch, bounded whatever the batch: each error's text once, for at most
    :data:`MAX_LISTED_ERRORS` events (``errorsOmitted`` counts the rest), and a status per event."""
    listed = sorted(errors)[:MAX_LISTED_ERRORS]
    summary: dict[str, Any] = {
        # Feast's consumer's answer: its status and counts (the same counts as below).
        "status": "partial_success" if errors else "success",
        "summary": {"received": received, "successful": received - len(errors), "failed": len(errors)},
        "received": received,
        "successful": received - len(errors),
        "failed": len(errors),
        "duplicates": duplicates,
        "errors": [{"index": i, "error": errors[i]} for i in listed],
    }
    if len(errors) > len(listed):
        summary["errorsOmitted"] = len(errors) - len(listed)
    if errors:  # per-event statuses let a sender (e.g. the export DAG) settle each event of a partial batch
        summary["results"] = [{"index": i, "status": 400 if i in errors else 201} for i in range(received)]
    return summary
