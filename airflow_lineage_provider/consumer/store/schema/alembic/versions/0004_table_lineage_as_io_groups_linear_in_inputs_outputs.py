"""Version 4: table lineage as io groups, linear in inputs + outputs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from alembic import op
from sqlalchemy import Connection, text

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _io_groups(op.get_bind())


_IO_TABLES = """
CREATE TABLE lineage_io_groups (
    id {serial} NOT NULL,
    group_key VARCHAR(40) NOT NULL,
    job_id {bigint} NOT NULL,
    last_seen {timestamp} NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (group_key)
);
CREATE TABLE lineage_io_members (
    group_id {bigint} NOT NULL,
    direction VARCHAR(6) NOT NULL,
    dataset_id {bigint} NOT NULL,
    PRIMARY KEY (group_id, direction, dataset_id)
);
CREATE INDEX ix_lineage_io_members_dataset ON lineage_io_members (dataset_id, direction, group_id)
"""

#: Version 3's table lineage with the node keys of each pair, a page at a time in key order after the last
#: key of the page before.
_V3_PAIRS = """
SELECT e.source_id, e.target_id, e.job_id, e.last_seen, s.node_key, t.node_key, j.node_key
FROM lineage_dataset_edges e
JOIN lineage_nodes s ON s.id = e.source_id
JOIN lineage_nodes t ON t.id = e.target_id
JOIN lineage_nodes j ON j.id = e.job_id
WHERE (e.source_id, e.target_id, e.job_id) > (:source, :target, :job)
ORDER BY e.source_id, e.target_id, e.job_id
LIMIT 5000
"""


def _io_group_key(job: str, inputs: Iterable[str], outputs: Iterable[str]) -> str:
    """The key the ingest gave an io group at version 4: SHA-1 of the job's node key and the sorted node keys of its
    inputs and outputs."""
    text_ = f"{job}>{','.join(sorted(set(inputs)))}>{','.join(sorted(set(outputs)))}"
    return hashlib.sha1(text_.encode()).hexdigest()


def _io_groups(conn: Connection) -> None:
    """Version 4: table lineage as io groups instead of every source → target pair.

    Each ``lineage_dataset_edges`` row becomes a group of its job with its source as the one input and its
    target as the one output, with its ``last_seen`` and the key the ingest gives that group (so a later
    event of the job reading and writing just those datasets updates it); then the table is dropped. Every
    pair, its time and so every walk stay as they were (a row pointing at no node, which the writer never
    leaves, is dropped). Rows are read a page at a time: memory stays flat whatever the store's size.
    """
    postgres = conn.dialect.name == "postgresql"
    types = ("BIGSERIAL", "BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "INTEGER", "DATETIME")
    for ddl in _IO_TABLES.format(serial=types[0], bigint=types[1], timestamp=types[2]).split(";"):
        conn.exec_driver_sql(ddl)
    add_group = text("INSERT INTO lineage_io_groups (id, group_key, job_id, last_seen) VALUES (:id, :key, :job, :seen)")
    add_member = text("INSERT INTO lineage_io_members (group_id, direction, dataset_id) VALUES (:id, :way, :dataset)")
    group_id, after = 0, {"source": 0, "target": 0, "job": 0}  # node ids start at 1
    while pairs := conn.execute(text(_V3_PAIRS), after).all():
        groups, members = [], []
        for source, target, job, seen, source_key, target_key, job_key in pairs:
            group_id += 1
            groups.append(
                {"id": group_id, "key": _io_group_key(job_key, [source_key], [target_key]), "job": job, "seen": seen}
            )
            members += [
                {"id": group_id, "way": "input", "dataset": source},
                {"id": group_id, "way": "output", "dataset": target},
            ]
        conn.execute(add_group, groups)
        conn.execute(add_member, members)
        after = {"source": pairs[-1][0], "target": pairs[-1][1], "job": pairs[-1][2]}
    if postgres:  # the ids above were given explicitly: the sequence continues after them
        conn.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('lineage_io_groups', 'id'), {group_id + 1}, false)")
    conn.exec_driver_sql("DROP TABLE lineage_dataset_edges")
