"""Marquez's error answers: ``{"code": 404, "message": "Dataset 'orders' not found."}``.

Marquez (Dropwizard) answers an error with an ``ErrorMessage``: the HTTP status again as ``code`` and a
``message``. The Marquez-compatible routes answer their own errors (unknown namespace, dataset, field,
source, version; a bad tag name) in that shape, so Marquez's clients read them as they read Marquez's.
The consumer's other errors (authentication, parameter validation, store unavailable) keep the consumer's
``{"detail": ...}`` shape, as on every other route.

A store read raises :class:`MarquezError` wherever it finds the problem (also inside the thread pool);
the route answers through :func:`marquez_answer`, which turns it into the response::

    def read() -> dict:
        with store.read() as conn:
            found = find(conn, ...)
            if found is None:
                raise MarquezError(404, f"Dataset '{name}' not found.")
            return found

    return await marquez_answer(read)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from airflow_lineage_provider.consumer.deps import stored_answer
from airflow_lineage_provider.consumer.limits.answer_limits import AnswerBound


class MarquezError(Exception):
    """An error to answer in Marquez's shape: HTTP status ``code`` and ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def marquez_error(code: int, message: str) -> JSONResponse:
    """The response Marquez gives for an error: ``{"code": code, "message": message}`` with status ``code``."""
    return JSONResponse({"code": code, "message": message}, status_code=code)


async def marquez_answer(work: Callable[[], Any]) -> Response:
    """Run ``work`` off the event loop (as :func:`..deps.stored_answer`) and answer its JSON, or the
    :class:`MarquezError` it raised in Marquez's shape."""
    try:
        return await stored_answer(work)
    except MarquezError as error:
        return marquez_error(error.code, error.message)


class ErrorMessage(BaseModel):
    """Marquez's error answer (Dropwizard's ``ErrorMessage``): documents the Marquez routes' 404s."""

    code: int
    message: str


#: ``responses=`` of a route answering 404 in Marquez's shape.
NOT_FOUND: dict[int | str, dict] = {404: {"model": ErrorMessage, "description": "Not found (Marquez's error shape)"}}


def namespace_not_found(namespace: str) -> MarquezError:
    """Marquez's 404 for an unknown (or, for a namespace-limited key, hidden) namespace."""
    return MarquezError(404, f"Namespace '{namespace}' not found.")


def job_not_found(job: str) -> MarquezError:
    """Marquez's 404 for an unknown job."""
    return MarquezError(404, f"Job '{job}' not found.")


def run_not_found(run_id: str) -> MarquezError:
    """Marquez's 404 for an unknown run (or a run of a hidden job)."""
    return MarquezError(404, f"Run '{run_id}' not found.")


def job_version_not_found(version: str) -> MarquezError:
    """Marquez's 404 for an unknown job version."""
    return MarquezError(404, f"Job version '{version}' not found.")


def dataset_not_found(dataset: str) -> MarquezError:
    """Marquez's 404 for an unknown dataset."""
    return MarquezError(404, f"Dataset '{dataset}' not found.")


async def bounded_answer(bound: AnswerBound, work: Callable[[], Any]) -> Response:
    """:func:`marquez_answer` for a listing: its answer within ``bound`` (:mod:`..answer_limits`)."""
    try:
        return await bound.answer(work)
    except MarquezError as error:
        return marquez_error(error.code, error.message)
