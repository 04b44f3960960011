"""Creating the outbox tables on first use, and migrating older outboxes to the current schema.

A new database gets the tables as declared in :mod:`~airflow_lineage_provider.outbox.tables` and is
stamped with :data:`SCHEMA_VERSION`. An existing one at version *v* gets ``MIGRATIONS[v + 1]`` ... in
order, each in the same transaction as the new stamp. Schema changes therefore go in two places: the
table declaration (for new outboxes) and a new numbered migration (for existing ones). Concurrent first
uses are serialised (SQLite: the write lock of ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine, insert, inspect, select, text, update

from airflow_lineage_provider.outbox import tables

#: Version of the schema this code reads and writes.
SCHEMA_VERSION = 1
#: ``version -> step`` upgrading an outbox from ``version - 1``; version 1 is the initial schema.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {}
_ADVISORY_LOCK_ID = 0x0A1F_0B0C  # any constant shared by every process migrating an outbox


class OutboxSchemaError(RuntimeError):
    """The outbox was written by a newer version of this package."""


def current_version(conn: Connection) -> int | None:
    """The outbox's schema version, ``None`` for a database without the outbox."""
    if not inspect(conn).has_table(tables.schema_version.name):
        return None
    return conn.execute(select(tables.schema_version.c.version)).scalar()


def migrate(engine: Engine) -> int:
    """Bring the outbox at ``engine`` to :data:`SCHEMA_VERSION`; return the version it had (0 when new)."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _ADVISORY_LOCK_ID})
        found = current_version(conn)
        if found is None:
            tables.metadata.create_all(conn)
            conn.execute(insert(tables.schema_version).values(version=SCHEMA_VERSION))
            conn.execute(insert(tables.sequencer).values(id=1, last_seq=0))
            return 0
        if found > SCHEMA_VERSION:
            raise OutboxSchemaError(
                f"the outbox has schema version {found}, newer than this airflow-lineage-provider understands "
                f"({SCHEMA_VERSION}); upgrade airflow-lineage-provider on this machine"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[version](conn)
            conn.execute(update(tables.schema_version).values(version=version))
        return found
