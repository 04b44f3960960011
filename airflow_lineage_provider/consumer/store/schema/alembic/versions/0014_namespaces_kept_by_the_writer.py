"""Version 14: ``lineage_namespaces``, one row per namespace of the jobs and datasets, kept by the writer.

Listing namespaces grouped every node of the store (twice: the page and its count); a row per namespace, with
the earliest ``created_at`` and the latest ``updated_at`` of its nodes, makes the listing read as many rows as it
shows. Backfilled from ``lineage_nodes``.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_TABLE = """
CREATE TABLE lineage_namespaces (
    namespace TEXT NOT NULL PRIMARY KEY, created_at {timestamp} NOT NULL, updated_at {timestamp} NOT NULL
)
"""

_BACKFILL = """
INSERT INTO lineage_namespaces (namespace, created_at, updated_at)
SELECT namespace, min(created_at), max(updated_at) FROM lineage_nodes
WHERE kind IN ('job', 'dataset') GROUP BY namespace
"""


def upgrade() -> None:
    conn = op.get_bind()
    postgresql = conn.dialect.name == "postgresql"
    conn.exec_driver_sql(_TABLE.format(timestamp="TIMESTAMP WITH TIME ZONE" if postgresql else "DATETIME"))
    conn.exec_driver_sql(_BACKFILL)
