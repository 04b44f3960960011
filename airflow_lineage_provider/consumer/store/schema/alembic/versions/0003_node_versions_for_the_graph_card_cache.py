"""Version 3: node versions for the graph-card cache."""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _node_versions(op.get_bind())


def _node_versions(conn: Connection) -> None:
    """Version 3: ``lineage_nodes.version``, bumped by every ingest naming the node (graph-card cache key)."""
    conn.exec_driver_sql("ALTER TABLE lineage_nodes ADD COLUMN version BIGINT NOT NULL DEFAULT 1")
