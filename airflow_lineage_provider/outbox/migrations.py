"""Creating the outbox tables on first use, and migrating older outboxes to the current schema, with Alembic.

The revisions are in ``alembic/versions`` next to this module, one per schema version (revision ``0001`` is
version 1); the outbox's revision is recorded in ``lineage_outbox_alembic_version``, never in
``alembic_version``, which is Airflow's when the outbox lives in Airflow's metadata database.

A new database gets the tables as declared in :mod:`~airflow_lineage_provider.outbox.tables` and is stamped
head. An outbox written before the schema moved to Alembic is adopted from the version its hand-written
runner recorded in ``lineage_outbox_schema``, then upgraded; that table keeps the current version, so a
release from before Alembic refuses an outbox migrated past what it knows. A schema change therefore goes in
two places: the table declaration (for new outboxes) and a new revision (for existing ones). Concurrent first
uses are serialised (SQLite: the write lock of ``BEGIN IMMEDIATE``; PostgreSQL: an advisory lock), and a
migration commits with its stamp. See :mod:`airflow_lineage_provider.schema_migrations` and
``docs/outbox.md`` ("Schema changes").
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, insert, inspect, select, update

from airflow_lineage_provider.outbox import tables
from airflow_lineage_provider.schema_migrations import StoreSchema, migration_transaction
from airflow_lineage_provider.sqlite_writers import SqliteWriters

#: Version of the schema this code reads and writes: the newest revision in ``alembic/versions``.
SCHEMA_VERSION = 1
#: Where the outbox's Alembic revision is recorded.
VERSION_TABLE = "lineage_outbox_alembic_version"
_ADVISORY_LOCK_ID = 0x0A1F_0B0C  # any constant shared by every process migrating an outbox


class OutboxSchemaError(RuntimeError):
    """The outbox was written by a newer version of this package."""


def _create(conn: Connection) -> None:
    tables.metadata.create_all(conn)
    conn.execute(insert(tables.schema_version).values(version=SCHEMA_VERSION))
    conn.execute(insert(tables.sequencer).values(id=1, last_seq=0))


def _recorded_version(conn: Connection) -> int | None:
    """The version recorded in ``lineage_outbox_schema`` (by the hand-written runner, or alongside Alembic)."""
    if not inspect(conn).has_table(tables.schema_version.name):
        return None
    return conn.execute(select(tables.schema_version.c.version)).scalar()


def _record_version(conn: Connection, _before: int, after: int) -> None:
    tables.schema_version.create(conn, checkfirst=True)
    if not conn.execute(update(tables.schema_version).values(version=after)).rowcount:
        conn.execute(insert(tables.schema_version).values(version=after))


def _too_new(_conn: Connection, found: str) -> OutboxSchemaError:
    return OutboxSchemaError(
        f"the outbox has {found}, newer than this airflow-lineage-provider understands ({SCHEMA_VERSION}); "
        "upgrade airflow-lineage-provider on this machine"
    )


#: The outbox's schema history (Alembic scripts in ``alembic/`` next to this module).
SCHEMA = StoreSchema(
    script_location="airflow_lineage_provider.outbox:alembic",
    version_table=VERSION_TABLE,
    latest=SCHEMA_VERSION,
    create=_create,
    recorded_version=_recorded_version,
    record_version=_record_version,
    too_new=_too_new,
)


def current_version(conn: Connection) -> int | None:
    """The outbox's schema version, ``None`` for a database without the outbox."""
    return SCHEMA.current_version(conn)


def migrate(engine: Engine, writers: SqliteWriters | None = None, timeout: float = 0.0) -> int:
    """Bring the outbox at ``engine`` to :data:`SCHEMA_VERSION`; return the version it had (0 when new).

    Raises :class:`OutboxSchemaError` for an outbox written by a newer version of this package.
    """
    with migration_transaction(engine, _ADVISORY_LOCK_ID, writers, timeout) as conn:
        return SCHEMA.migrate(conn)
