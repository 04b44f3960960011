"""Telling a failure of the store itself from a value it refuses, and the one line that says why."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout


def is_store_failure(error: SQLAlchemyError) -> bool:
    """The store itself failed (unreachable, locked, every pooled connection busy), not the event: retry, never
    report the event as refused."""
    if isinstance(error, (OperationalError, PoolTimeout)):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


def failure_reason(error: SQLAlchemyError) -> str:
    """The first line of what the driver said (at most 300 characters)."""
    original = getattr(error, "orig", None)
    return str(original or error).strip().splitlines()[0][:300]
