"""Version 18: raw events packed with a dictionary of text the store's events share, sized and namespaced.

``lineage_events`` gains ``packed`` (the event's canonical JSON deflated with dictionary ``dictionary_id``
preset; ``payload`` is then empty), ``size`` (the text's length) and ``namespaces`` (a JSON array of every
namespace the event names), and ``lineage_payload_dictionaries`` holds the dictionaries. Events stored before
keep their text in ``payload`` and have none of these: readers fall back to the text for them, and
``airflow-lineage pack-events`` packs them when asked (see ``store/schema/payloads.py``).
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_TYPES = {
    "postgresql": {"binary": "BYTEA", "time": "TIMESTAMP WITH TIME ZONE"},
    "sqlite": {"binary": "BLOB", "time": "DATETIME"},
}


def upgrade() -> None:
    conn = op.get_bind()
    types = _TYPES[conn.dialect.name]
    for column, kind in (("packed", types["binary"]), ("dictionary_id", "BIGINT"), ("size", "INTEGER")):
        conn.exec_driver_sql(f"ALTER TABLE lineage_events ADD COLUMN {column} {kind}")
    conn.exec_driver_sql("ALTER TABLE lineage_events ADD COLUMN namespaces TEXT")
    conn.exec_driver_sql(
        "CREATE TABLE lineage_payload_dictionaries ("
        f"id BIGINT NOT NULL, created_at {types['time']} NOT NULL, body {types['binary']} NOT NULL, "
        "PRIMARY KEY (id))"
    )
