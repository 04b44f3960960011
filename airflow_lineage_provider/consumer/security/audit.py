"""The audit trail: one INFO line per write, prune and reset, and per refused attempt at one.

Lines go to the ``airflow_lineage_provider.consumer.security.audit`` logger and name who acted (a key's name, an
Airflow user's name, or ``anonymous`` — never a secret), what (events, namespaces, days) and the outcome::

    lineage audit: ingest by key 'producers': 3 received, 2 stored, 1 duplicate, 0 refused; namespaces airflow -> 200
    lineage audit: ingest by key 'producers' refused (the ingest log is full); nothing stored -> 503
    lineage audit: prune by user 'admin': older than 30 days; removed 1200 events, 80 runs -> 200
    lineage audit: limited prune by key 'fin-ops' (namespaces fin*): older than 30 days; removed 9 events, 2 runs -> 200
    lineage audit: reset by key 'ops': namespace staging; removed 40 events, 12 runs, 3 jobs, 9 datasets -> 200
    lineage audit: refused write (ingest events or change tags) anonymous at POST /api/v1/lineage -> 401
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from fastapi import Request

from airflow_lineage_provider.consumer.security.access import Access, Principal
from airflow_lineage_provider.consumer.security.guards import ACTIONS, header_credential
from airflow_lineage_provider.consumer.validation import LineageEvent

log = logging.getLogger(__name__)

#: Namespaces named in one line at most; the rest are counted.
_MAX_NAMESPACES = 10


def namespaces_of(events: Iterable[LineageEvent]) -> list[str]:
    """The namespaces of the jobs and datasets the events name, sorted."""
    found: set[str] = set()
    for event in events:
        for ref in (event.job, event.dataset, *event.inputs, *event.outputs):
            if ref is not None:
                found.add(ref.namespace)
    return sorted(found)


def _listed(namespaces: list[str]) -> str:
    if not namespaces:
        return "none"
    shown = ", ".join(repr(ns)[1:-1] for ns in namespaces[:_MAX_NAMESPACES])
    extra = len(namespaces) - _MAX_NAMESPACES
    return f"{shown} (+{extra} more)" if extra > 0 else shown


def ingest(
    principal: Principal,
    *,
    received: int,
    stored: int,
    duplicates: int,
    refused: int,
    namespaces: list[str],
    status: int,
) -> None:
    """Log one ingest request."""
    log.info(
        "lineage audit: ingest by %s: %d received, %d stored, %d duplicate, %d refused; namespaces %s -> %d",
        principal.who,
        received,
        stored,
        duplicates,
        refused,
        _listed(namespaces),
        status,
    )


def ingest_refused(principal: Principal, *, reason: str, status: int) -> None:
    """Log one ingest request refused before anything of it was stored, for a reason that is not its events'
    (the ingest log full: 503)."""
    log.info("lineage audit: ingest by %s refused (%s); nothing stored -> %d", principal.who, reason, status)


def prune(principal: Principal, *, days: float, events: int | None, runs: int | None, status: int) -> None:
    """Log one prune request (``events``/``runs`` None when it failed); a namespace-limited principal's prune
    is said to be limited, with its patterns."""
    removed = f"removed {events} events, {runs} runs" if events is not None else "nothing removed"
    scope = principal.namespaces
    if scope is None:
        log.info("lineage audit: prune by %s: older than %g days; %s -> %d", principal.who, days, removed, status)
        return
    log.info(
        "lineage audit: limited prune by %s (namespaces %s): older than %g days; %s -> %d",
        principal.who,
        _listed(list(scope.patterns)),
        days,
        removed,
        status,
    )


def reset(
    principal: Principal, *, namespace: str | None, dry_run: bool, removed: dict[str, int] | None, status: int
) -> None:
    """Log one reset request (of the whole store when ``namespace`` is None; ``removed`` None when it failed)."""
    what = "the whole store" if namespace is None else f"namespace {repr(namespace)[1:-1]}"
    if removed is None:
        outcome = "nothing removed"
    else:
        listed = ", ".join(f"{count} {kind}" for kind, count in removed.items() if count)
        outcome = f"{'would remove' if dry_run else 'removed'} {listed or 'nothing'}"
    log.info(
        "lineage audit: %sreset by %s: %s; %s -> %d",
        "dry-run " if dry_run else "",
        principal.who,
        what,
        outcome,
        status,
    )


def requeue(principal: Principal, *, requeued: int | None, unapplied: int | None, status: int) -> None:
    """Log one requeue of set-aside events (``requeued`` None when it failed)."""
    outcome = "nothing requeued" if requeued is None else f"{requeued} requeued, {unapplied} set aside after"
    log.info("lineage audit: set-aside events requeued by %s: %s -> %d", principal.who, outcome, status)


def refused(request: Request, access: Access, status: int) -> None:
    """Log a write or destructive call refused for want of a credential (401) or of permission (403)."""
    credential = header_credential(request)
    how = "with a header credential" if credential else "with a session cookie only" if request.cookies else "anonymous"
    log.info(
        "lineage audit: refused %s (%s) %s at %s %s -> %d",
        access.label,
        ACTIONS[access],
        how,
        request.method,
        request.url.path,
        status,
    )
