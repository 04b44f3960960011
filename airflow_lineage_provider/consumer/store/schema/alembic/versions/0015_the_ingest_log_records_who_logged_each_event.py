"""Version 15: the ingest log records who logged each event (``lineage_pending_events.logged_by``).

A read of the API waited for every event logged before it; during a bulk load that was most of a second behind
another sender's batches. With the principal recorded (indexed with ``seq``), a read waits for its own
principal's events, and for others' only while few are pending (see ``store/write/deferred_apply.py``). Rows
logged before the upgrade have none: they count as another principal's.
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    conn.exec_driver_sql("ALTER TABLE lineage_pending_events ADD COLUMN logged_by VARCHAR(64)")
    conn.exec_driver_sql("CREATE INDEX ix_lineage_pending_events_logged_by ON lineage_pending_events (logged_by, seq)")
