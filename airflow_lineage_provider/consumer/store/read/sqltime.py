"""``iso_utc(column)``: a stored time as ISO 8601 UTC text, formatted by the database.

Graph responses carry thousands of times; formatting them in SQL skips parsing each into a ``datetime``
and formatting it again in Python. The text matches :func:`.text.iso`:
``2026-01-01T00:02:00.000000Z``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class iso_utc(FunctionElement[str]):
    """ISO 8601 UTC text of a ``UtcDateTime`` column (NULL stays NULL)."""

    type = String()
    name = "iso_utc"
    inherit_cache = True


@compiles(iso_utc, "sqlite")
def _sqlite(element: iso_utc, compiler: Any, **kw: Any) -> str:
    # SQLAlchemy stores SQLite times as 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC here).
    return f"(replace({compiler.process(element.clauses, **kw)}, ' ', 'T') || 'Z')"


@compiles(iso_utc, "postgresql")
def _postgresql(element: iso_utc, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.clauses, **kw)
    return f"to_char(({column}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
