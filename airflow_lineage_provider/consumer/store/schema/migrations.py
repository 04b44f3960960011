"""Schema versions of the lineage store, from the first release on, as Alembic revisions.

The revisions are in ``alembic/versions`` next to this module, one per schema version (revision ``0007`` is
version 7), each written as explicit DDL against the version before it, so it stays correct after
``tables.py`` moves on. The store's revision is recorded in ``lineage_alembic_version``.

A new store is created from :mod:`.tables` (which always describes :data:`LATEST`) and stamped head. A store
written before the schema moved to Alembic is adopted from the version its hand-written runner recorded in
``lineage_schema_version``, then upgraded. That table keeps a row per version the store reached (with when),
so a release from before Alembic refuses a store migrated past what it knows. See
:mod:`airflow_lineage_provider.schema_migrations` and ``docs/consumer.md`` ("Schema changes").
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Connection, Engine, func, inspect, select

from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.store_settings import new_store_id
from airflow_lineage_provider.schema_migrations import StoreSchema, migration_transaction
from airflow_lineage_provider.sqlite_writers import SqliteWriters

#: The schema version this code reads and writes: the newest revision in ``alembic/versions``.
LATEST = 18
#: Where the store's Alembic revision is recorded.
VERSION_TABLE = "lineage_alembic_version"
_ADVISORY_LOCK_ID = 6580006  # any constant shared by every process migrating a lineage store


class StoreVersionError(RuntimeError):
    """The store was written by a newer release of this package than the one running."""


def _create(conn: Connection) -> None:
    tables.metadata.create_all(conn)
    new_store_id(conn)
    conn.execute(tables.schema_version.insert().values(version=LATEST, applied_at=datetime.now(timezone.utc)))


def _recorded_version(conn: Connection) -> int | None:
    """The version recorded in ``lineage_schema_version`` (by the hand-written runner, or alongside Alembic)."""
    if not inspect(conn).has_table(tables.schema_version.name):
        return None
    return conn.execute(select(func.max(tables.schema_version.c.version))).scalar()


def _record_version(conn: Connection, before: int, after: int) -> None:
    tables.schema_version.create(conn, checkfirst=True)
    first = max(before, _recorded_version(conn) or 0) + 1  # a version already recorded keeps its row
    now = datetime.now(timezone.utc)
    rows = [{"version": version, "applied_at": now} for version in range(first, after + 1)]
    if rows:
        conn.execute(tables.schema_version.insert(), rows)


def _too_new(conn: Connection, found: str) -> StoreVersionError:
    return StoreVersionError(
        f"the lineage store at {conn.engine.url.render_as_string(hide_password=True)} is at {found}, newer than "
        f"this release knows ({LATEST}): upgrade airflow-lineage-provider"
    )


#: The lineage store's schema history (Alembic scripts in ``alembic/`` next to this module).
SCHEMA = StoreSchema(
    script_location="airflow_lineage_provider.consumer.store.schema:alembic",
    version_table=VERSION_TABLE,
    latest=LATEST,
    create=_create,
    recorded_version=_recorded_version,
    record_version=_record_version,
    too_new=_too_new,
)


def current_version(conn: Connection) -> int | None:
    """The store's schema version, or None when it has no lineage tables yet."""
    return SCHEMA.current_version(conn)


def migrate(engine: Engine, writers: SqliteWriters | None = None, timeout: float = 0.0) -> int:
    """Create, adopt or upgrade the lineage tables in ``engine``'s database; return the resulting version.

    Safe to call from several processes at once: the work runs under the store's write lock (SQLite) or an
    advisory lock (PostgreSQL), and commits with its version stamp. Raises :class:`StoreVersionError` for a
    store written by a newer release.
    """
    with migration_transaction(engine, _ADVISORY_LOCK_ID, writers, timeout) as conn:
        SCHEMA.migrate(conn)
    return LATEST
