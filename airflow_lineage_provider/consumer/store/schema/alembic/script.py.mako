"""Version ${int(up_revision)}: ${message}.

Written against version ${int(up_revision) - 1}'s schema as explicit DDL (not against ``tables.py``, which moves on),
for SQLite and PostgreSQL; it runs in the transaction that records it. Never edit a released revision.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection

revision = "${up_revision}"
down_revision = "${down_revision}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _upgrade(op.get_bind())


def _upgrade(conn: Connection) -> None:
    raise NotImplementedError("write version ${int(up_revision)}'s DDL and data changes here")
