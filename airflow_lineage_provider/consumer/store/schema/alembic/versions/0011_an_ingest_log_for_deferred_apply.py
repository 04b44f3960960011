"""Version 11: an ingest log — raw events stored but not applied yet, and those the graph could not take."""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


_INGEST_LOG_TABLES = """
CREATE TABLE lineage_pending_events (
    seq {serial} NOT NULL PRIMARY KEY, event_key VARCHAR(64) NOT NULL UNIQUE
);
CREATE TABLE lineage_unapplied_events (
    event_key VARCHAR(64) NOT NULL PRIMARY KEY, failed_at {timestamp} NOT NULL, reason TEXT NOT NULL
)
"""


def upgrade() -> None:
    conn = op.get_bind()
    postgresql = conn.dialect.name == "postgresql"
    ddl = _INGEST_LOG_TABLES.format(
        serial="BIGSERIAL" if postgresql else "INTEGER",
        timestamp="TIMESTAMP WITH TIME ZONE" if postgresql else "DATETIME",
    )
    for statement in ddl.split(";"):
        conn.exec_driver_sql(statement)
