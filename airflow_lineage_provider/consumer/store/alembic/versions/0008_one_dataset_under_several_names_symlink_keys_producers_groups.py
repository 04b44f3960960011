"""Version 8: one dataset under several names: symlink keys, producers, groups."""

from __future__ import annotations

from alembic import op
from sqlalchemy import Connection, bindparam, text

from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.identity import regroup_everything
from airflow_lineage_provider.consumer.store.ingest import node_key
from airflow_lineage_provider.consumer.store.store_settings import new_store_id

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _dataset_identity(op.get_bind())


_IDENTITY_TABLES = """
CREATE INDEX ix_lineage_symlinks_alias ON lineage_symlinks (alias_key, dataset_id);
CREATE TABLE lineage_node_producers (
    node_id {bigint} NOT NULL,
    producer_key VARCHAR(40) NOT NULL,
    producer TEXT NOT NULL,
    first_seen {timestamp} NOT NULL,
    PRIMARY KEY (node_id, producer_key)
);
CREATE TABLE lineage_dataset_members (
    node_id {bigint} NOT NULL,
    member_id {bigint} NOT NULL,
    canonical_id {bigint} NOT NULL,
    PRIMARY KEY (node_id, member_id)
);
CREATE INDEX ix_lineage_dataset_members_canonical ON lineage_dataset_members (canonical_id);
CREATE TABLE lineage_store_settings (
    name VARCHAR(64) NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (name)
)
"""

#: Version 7's symlinks a page at a time, in key order after the last one of the page before.
_V7_SYMLINKS = (
    "SELECT dataset_id, symlink_key, namespace, name FROM lineage_symlinks"
    " WHERE dataset_id > :after_id OR (dataset_id = :after_id AND symlink_key > :after_key)"
    " ORDER BY dataset_id, symlink_key LIMIT 1000"
)


def _dataset_identity(conn: Connection) -> None:
    """Version 8: one dataset under several names. Symlinks gain the key of the dataset they name, how the
    name was claimed and by which producer; the producers of each node, the groups of datasets known under
    several names, and the store's settings (its id, the namespace aliases) get tables. Existing symlinks are keyed and
    grouped (without namespace aliases, which the consumer applies when it opens the store)."""
    postgres = conn.dialect.name == "postgresql"
    bigint, timestamp = ("BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN alias_key VARCHAR(40)")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN via VARCHAR(10) DEFAULT 'symlink' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN producer TEXT")
    for ddl in _IDENTITY_TABLES.format(bigint=bigint, timestamp=timestamp).split(";"):
        conn.exec_driver_sql(ddl)
    s = tables.symlinks.c
    keyed = (
        tables.symlinks.update()
        .where(s.dataset_id == bindparam("b_id"), s.symlink_key == bindparam("b_key"))
        .values(alias_key=bindparam("b_alias"))
    )
    after_id, after_key = -1, ""
    while rows := conn.execute(text(_V7_SYMLINKS), {"after_id": after_id, "after_key": after_key}).all():
        after_id, after_key = rows[-1][0], rows[-1][1]
        updates = [{"b_id": d, "b_key": k, "b_alias": node_key("dataset", ns, n)} for d, k, ns, n in rows]
        conn.execute(keyed, updates)
    new_store_id(conn)
    regroup_everything(conn)
