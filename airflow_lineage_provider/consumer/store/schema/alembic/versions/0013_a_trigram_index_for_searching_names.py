"""Version 13: on PostgreSQL, a trigram index of node names for search.

Search matches ``lower(name) LIKE lower('%text%')``; without an index that reads every node. A GIN index of
``lower(name)`` with pg_trgm's ``gin_trgm_ops`` answers it from the trigrams of the text instead.

The operator class comes from the ``pg_trgm`` extension: used wherever it is installed, else created in the
``public`` schema, or in the store's own in a database without ``public`` (it is a trusted extension: a role with
``CREATE`` on the database may create it).
When it cannot be created the store is left without the index, with a warning: search then reads every name, as
before. SQLite gets nothing (its ``LIKE`` has no such index).
"""

from __future__ import annotations

import logging

from alembic import op
from sqlalchemy import Connection

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

_INDEX = "ix_lineage_nodes_name_trgm"
_CREATE = ("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public", "CREATE EXTENSION IF NOT EXISTS pg_trgm")


def _trigram_schema(conn: Connection) -> str | None:
    """The schema holding pg_trgm's operators, creating the extension when it is missing and can be created."""
    installed = (
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
    )
    found = conn.exec_driver_sql(installed).scalar()
    refusal: Exception | None = None
    # public, where extensions usually live, else (no public schema) the store's own, the first of its search path
    for statement in _CREATE if found is None else ():
        try:
            with conn.begin_nested():  # a refusal leaves the migration's transaction usable
                conn.exec_driver_sql(statement)
        except Exception as error:  # no privilege, extension not shipped, no such schema: search still works
            refusal = error
        if (found := conn.exec_driver_sql(installed).scalar()) is not None:  # or another process created it
            break
    if found is None:
        log.warning("lineage store: no trigram index for search (pg_trgm could not be created: %s)", refusal)
        return None
    return str(found)


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    schema = _trigram_schema(conn)
    if schema is None:
        return
    quoted = '"' + schema.replace('"', '""') + '"'
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {_INDEX} ON lineage_nodes USING gin (lower(name) {quoted}.gin_trgm_ops)"
    )
