"""How many jobs and datasets each namespace holds (``lineage_node_counts``), kept by the database itself.

A listing answers ``totalCount``; counting every dataset for every page grew with the store (a sequential scan of
``lineage_nodes``; figures in ``docs/benchmarks.md``). Triggers on ``lineage_nodes`` keep a count per
(namespace, kind) instead, in the transaction that inserts or deletes a node, whichever code does it (an ingest, a
reset, a declaration retracting a dataset), so a count read in a listing's snapshot is exact for that snapshot: the
sum of a few rows. No node changes namespace (its key is made of kind, namespace and name), so updates need none.

* **PostgreSQL**: statement-level triggers with transition tables, one upsert per statement of what it inserted
  (``INSERT ... ON CONFLICT DO UPDATE`` puts only the rows it inserted there) or deleted. Each writes the row of its
  connection's *shard* (``pg_backend_pid()`` modulo :data:`SHARDS`): the appliers of several processes, each on its
  own connection, rarely update the same row, so they do not queue on one row per namespace for the rest of their
  batch. A read sums the shards.
* **SQLite**: row triggers (one writer at a time): shard 0.

Rows are never deleted by the triggers (a namespace whose nodes all went keeps rows of 0); a whole-store reset
empties the table after the nodes. Reads sum them with
:func:`airflow_lineage_provider.consumer.store.read.node_totals.total`.
"""

from __future__ import annotations

from sqlalchemy import Connection

#: Rows per (namespace, kind) on PostgreSQL: writers on different connections mostly update different ones.
SHARDS = 64

_POSTGRESQL_FUNCTION = """
CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lineage_node_counts AS c (namespace, kind, shard, nodes)
    SELECT namespace, kind, mod(pg_backend_pid(), {shards}), sum(delta)
    FROM ({changes}) AS changed (namespace, kind, delta)
    GROUP BY namespace, kind HAVING sum(delta) <> 0 ORDER BY namespace, kind
    ON CONFLICT (namespace, kind, shard) DO UPDATE SET nodes = c.nodes + excluded.nodes;
    RETURN NULL;
END $$
"""
#: (function and trigger name, event, transition tables, the changed nodes as ``namespace, kind, delta``).
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


def _existing(conn: Connection) -> set[str]:
    """The names of the triggers on ``lineage_nodes``."""
    if conn.dialect.name == "postgresql":
        query = "SELECT tgname FROM pg_trigger WHERE tgrelid = CAST('lineage_nodes' AS regclass) AND NOT tgisinternal"
    else:
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'lineage_nodes'"
    return set(conn.exec_driver_sql(query).scalars())


def create_triggers(conn: Connection) -> None:
    """Create the triggers that keep ``lineage_node_counts`` (its table and ``lineage_nodes`` exist), unless they
    are there already (``metadata.create_all`` on a store that has its tables)."""
    if _existing(conn) >= {name for name, *_ in _POSTGRESQL_TRIGGERS}:
        return
    if conn.dialect.name == "postgresql":
        for name, event, transitions, changes in _POSTGRESQL_TRIGGERS:
            conn.exec_driver_sql(_POSTGRESQL_FUNCTION.format(name=name, shards=SHARDS, changes=changes))
            conn.exec_driver_sql(
                f"CREATE TRIGGER {name} AFTER {event} ON lineage_nodes REFERENCING {transitions}"
                f" FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
            )
    else:
        for name, when, body in _SQLITE_TRIGGERS:
            conn.exec_driver_sql(f"CREATE TRIGGER {name} {when} BEGIN {body} END")
