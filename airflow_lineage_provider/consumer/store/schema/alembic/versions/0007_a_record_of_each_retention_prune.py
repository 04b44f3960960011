"""Version 7: a record of each retention prune."""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _prunes(op.get_bind())


_PRUNES_TABLE = """
CREATE TABLE lineage_prunes (
    id {serial} NOT NULL,
    pruned_at {timestamp} NOT NULL,
    cutoff {timestamp} NOT NULL,
    triggered_by VARCHAR(8) NOT NULL,
    events BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    duration_us BIGINT NOT NULL,
    PRIMARY KEY (id)
)
"""


def _prunes(conn: Connection) -> None:
    """Version 7: ``lineage_prunes``, a row per retention prune (what ``GET /api/v1/retention`` reports), empty."""
    postgres = conn.dialect.name == "postgresql"
    serial, timestamp = ("BIGSERIAL", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    conn.exec_driver_sql(_PRUNES_TABLE.format(serial=serial, timestamp=timestamp))
