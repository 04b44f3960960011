"""Version 5: tags on jobs, datasets and fields."""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _tags(op.get_bind())


_TAG_TABLES = """
CREATE TABLE lineage_tags (
    name VARCHAR(255) NOT NULL,
    description TEXT,
    created_at {timestamp} NOT NULL,
    PRIMARY KEY (name)
);
CREATE TABLE lineage_node_tags (
    node_id {bigint} NOT NULL,
    field_key VARCHAR(40) NOT NULL,
    tag VARCHAR(255) NOT NULL,
    field TEXT,
    tagged_at {timestamp} NOT NULL,
    PRIMARY KEY (node_id, field_key, tag)
);
CREATE INDEX ix_lineage_node_tags_tag ON lineage_node_tags (tag)
"""


def _tags(conn: Connection) -> None:
    """Version 5: tags on jobs, datasets and dataset fields (Marquez's tag API), empty at first."""
    postgres = conn.dialect.name == "postgresql"
    bigint, timestamp = ("BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    for ddl in _TAG_TABLES.format(bigint=bigint, timestamp=timestamp).split(";"):
        conn.exec_driver_sql(ddl)
