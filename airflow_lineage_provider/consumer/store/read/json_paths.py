"""One member of a stored JSON text column, read by the database: ``payload -> 'job' -> 'facets'``.

Reading a member in SQL sends only that member to Python (a job's ``jobType`` facet rather than all its
facets, an event's job facets rather than the whole event). The member comes back as JSON text, or None
when absent; :func:`member_value` decodes it. PostgreSQL reads the text as ``json`` and ``json -> key``
keeps the member's JSON text as is; SQLite's ``->`` does the same (3.38+). PostgreSQL refuses to read a
``\\u0000`` escape (which a stored facet may hold), so there it is read as U+FFFD, as
:func:`.visibility.names_hidden_namespace` does.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Text, cast, func, literal
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement


def json_member(column: Any, path: tuple[str, ...], dialect: str) -> ColumnElement[Any]:
    """SQL for the member at ``path`` of the JSON text ``column``, as JSON text (NULL when absent)."""
    if dialect == "postgresql":
        value: Any = cast(func.replace(column, "\\u0000", "\\ufffd"), postgresql.JSON)
        for key in path:
            value = value.op("->")(literal(key, Text))
        return cast(value, Text)
    quoted = ".".join(json.dumps(key) for key in path)
    return column.op("->")(literal(f"$.{quoted}", Text))


def member_value(text: Any) -> Any:
    """A member read by :func:`json_member`, decoded (None when absent or unreadable)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def decoded(text: str, dialect: str) -> Any:
    """A stored JSON text decoded in Python as :func:`json_member` reads it in the database: a ``\\u0000`` escape
    as U+FFFD on PostgreSQL. Raises ``ValueError`` when it is not JSON."""
    return json.loads(text.replace("\\u0000", "\\ufffd") if dialect == "postgresql" else text)


def member_in(text: str, path: tuple[str, ...], dialect: str) -> Any:
    """The member at ``path`` of the JSON ``text``, decoded, as :func:`json_member` and :func:`member_value` read it
    (None when absent or unreadable): for a text the database cannot read, such as a packed event unpacked."""
    try:
        value = decoded(text, dialect)
    except ValueError:
        return None
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value
