"""Version 17: an index of node names in code point order (with namespace, kind and the node's id) for search.

Search answered a page in name order by reading every match and sorting them, with the exact count of all of
them: its time followed the matches (tens of thousands for a common word in a large store). With names indexed in
the order a page is in, a page of a common word is read from the index until it is full; the total is counted up
to a bound (:data:`..read.queries.SEARCH_TOTAL_BOUND`).
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_COLUMNS = {
    "postgresql": '(name COLLATE "C", namespace COLLATE "C", kind) INCLUDE (id)',
    "sqlite": "(name, namespace, kind)",
}


def upgrade() -> None:
    conn = op.get_bind()
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS ix_lineage_nodes_name_order ON lineage_nodes {_COLUMNS[conn.dialect.name]}"
    )
