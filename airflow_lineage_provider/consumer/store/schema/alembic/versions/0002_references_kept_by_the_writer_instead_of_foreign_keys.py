"""Version 2: references kept by the writer instead of foreign keys."""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection, inspect

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _drop_foreign_keys(op.get_bind())


#: The version 1 tables that declared foreign keys (to ``lineage_nodes``, ``lineage_fields``, ``lineage_runs``).
_V1_REFERRING_TABLES = (
    "lineage_datasets",
    "lineage_jobs",
    "lineage_runs",
    "lineage_run_io",
    "lineage_edges",
    "lineage_dataset_edges",
    "lineage_fields",
    "lineage_column_edges",
    "lineage_symlinks",
)


def _drop_foreign_keys(conn: Connection) -> None:
    """Version 2: references are kept by the writer, not by foreign keys (see :mod:`.tables`).

    PostgreSQL drops the constraints. SQLite never enforced them (the store does not turn on
    ``PRAGMA foreign_keys``), so its tables stay as they are rather than being rebuilt.
    """
    if conn.dialect.name != "postgresql":
        return
    quote = conn.dialect.identifier_preparer.quote
    inspector = inspect(conn)
    for table in _V1_REFERRING_TABLES:
        for key in inspector.get_foreign_keys(table):
            if key["name"]:  # PostgreSQL names every constraint
                conn.exec_driver_sql(f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(key['name'])}")
