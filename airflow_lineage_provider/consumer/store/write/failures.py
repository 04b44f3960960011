"""Telling a failure of the store itself from a value it refuses, and the one line that says why."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

#: PostgreSQL SQLSTATE classes that blame the store, not the event, whatever exception class the driver picks:
#: 42, a table or grant missing or wrong (a schema dropped or changed under a running server); 08, a connection
#: failure; 53, out of resources (disk full, too many clients); 57, an operator stopped it; 58, an I/O failure.
_STORE_CLASSES = frozenset({"08", "42", "53", "57", "58"})
#: PostgreSQL SQLSTATE classes that blame the event although the driver raises ``OperationalError``: 54, a value
#: past one of PostgreSQL's limits (a name too long for an index, a document too deep).
_EVENT_CLASSES = frozenset({"54"})
_HINTS = {
    "54": " (a value past a PostgreSQL limit: a namespace plus name longer than about 2,700 bytes does not fit the"
    " store's name index; shorten it)",
}


def sqlstate(error: BaseException) -> str | None:
    """The PostgreSQL SQLSTATE of a driver error wrapped by SQLAlchemy (``error.orig``): psycopg2 names it
    ``pgcode``, psycopg (3) ``sqlstate``; None for another database or an error without one."""
    original = getattr(error, "orig", None)
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    return code if isinstance(code, str) else None


def _sqlstate_class(error: SQLAlchemyError) -> str:
    return (sqlstate(error) or "")[:2]


def is_store_failure(error: SQLAlchemyError) -> bool:
    """The store itself failed (unreachable, locked, every pooled connection busy, its tables gone), not the
    event: retry, never report the event as refused."""
    sqlstate = _sqlstate_class(error)
    if sqlstate in _EVENT_CLASSES:
        return False
    if sqlstate in _STORE_CLASSES or isinstance(error, (OperationalError, PoolTimeout)):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


def failure_reason(error: SQLAlchemyError) -> str:
    """The first line of what the driver said (at most 300 characters), and what to do when that is known."""
    original = getattr(error, "orig", None)
    reason = str(original or error).strip().splitlines()[0][:300]
    return reason + _HINTS.get(_sqlstate_class(error), "")
