"""Version 16: ``lineage_node_counts``, how many jobs and datasets each namespace holds, kept by triggers.

Listings counted every dataset (or job) for each page's ``totalCount``; triggers on ``lineage_nodes`` now keep a
count per namespace and kind (on PostgreSQL a row per writer connection's shard, summed by the reads), in the
transaction that inserts or deletes a node. Backfilled from ``lineage_nodes`` into shard 0.
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_TABLE = """
CREATE TABLE lineage_node_counts (
    namespace TEXT NOT NULL, kind VARCHAR(8) NOT NULL, shard SMALLINT NOT NULL, nodes BIGINT NOT NULL,
    PRIMARY KEY (namespace, kind, shard)
)
"""
_BACKFILL = """
INSERT INTO lineage_node_counts (namespace, kind, shard, nodes)
SELECT namespace, kind, 0, count(*) FROM lineage_nodes GROUP BY namespace, kind
"""
_POSTGRESQL_FUNCTION = """
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lineage_node_counts AS c (namespace, kind, shard, nodes)
    SELECT namespace, kind, mod(pg_backend_pid(), 64), sum(delta)
    FROM ({changes}) AS changed (namespace, kind, delta)
    GROUP BY namespace, kind HAVING sum(delta) <> 0 ORDER BY namespace, kind
    ON CONFLICT (namespace, kind, shard) DO UPDATE SET nodes = c.nodes + excluded.nodes;
    RETURN NULL;
END $$
"""
_POSTGRESQL_TRIGGERS = (
    (
        "lineage_nodes_counted_in",
        "INSERT",
        "NEW TABLE AS new_nodes",
        "SELECT namespace, kind, 1 FROM new_nodes",
    ),
    ("lineage_nodes_counted_out", "DELETE", "OLD TABLE AS old_nodes", "SELECT namespace, kind, -1 FROM old_nodes"),
)
_SQLITE_ADD = (
    "INSERT INTO lineage_node_counts (namespace, kind, shard, nodes) VALUES ({row}.namespace, {row}.kind, 0, {delta})"
    " ON CONFLICT (namespace, kind, shard) DO UPDATE SET nodes = nodes + excluded.nodes;"
)
_SQLITE_TRIGGERS = (
    ("lineage_nodes_counted_in", "AFTER INSERT ON lineage_nodes", _SQLITE_ADD.format(row="NEW", delta=1)),
    ("lineage_nodes_counted_out", "AFTER DELETE ON lineage_nodes", _SQLITE_ADD.format(row="OLD", delta=-1)),
)


def upgrade() -> None:
    conn = op.get_bind()
    conn.exec_driver_sql(_TABLE)
    conn.exec_driver_sql(_BACKFILL)
    if conn.dialect.name == "postgresql":
        for name, event, transitions, changes in _POSTGRESQL_TRIGGERS:
            conn.exec_driver_sql(_POSTGRESQL_FUNCTION.format(name=name, changes=changes))
            conn.exec_driver_sql(
                f"CREATE TRIGGER {name} AFTER {event} ON lineage_nodes REFERENCING {transitions}"
                f" FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
            )
    else:
        for name, when, body in _SQLITE_TRIGGERS:
            conn.exec_driver_sql(f"CREATE TRIGGER {name} {when} BEGIN {body} END")
