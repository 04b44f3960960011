"""Schema versions of the lineage store, from the first release on.

A new store is created from :mod:`.tables` (which always describes the latest version) and stamped
with :data:`LATEST`. An existing store is brought forward by running, in order, every migration newer
than its recorded version. A migration is explicit DDL written against the previous version, so it
stays correct after ``tables.py`` moves on.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from sqlalchemy import Connection, Engine, func, inspect, select

from airflow_lineage_provider.consumer.store import tables

Migration = Callable[[Connection], None]


def _initial(conn: Connection) -> None:
    """Version 1: the first release's tables (nothing to change on a store already at version 1)."""


#: The version 1 tables that declared foreign keys (to ``lineage_nodes``, ``lineage_fields``, ``lineage_runs``).
_V1_REFERRING_TABLES = (
    "lineage_datasets",
    "lineage_jobs",
    "lineage_runs",
    "lineage_run_io",
    "lineage_edges",
    "lineage_dataset_edges",
    "lineage_fields",
    "lineage_column_edges",
    "lineage_symlinks",
)


def _drop_foreign_keys(conn: Connection) -> None:
    """Version 2: references are kept by the writer, not by foreign keys (see :mod:`.tables`).

    PostgreSQL drops the constraints. SQLite never enforced them (the store does not turn on
    ``PRAGMA foreign_keys``), so its tables stay as they are rather than being rebuilt.
    """
    if conn.dialect.name != "postgresql":
        return
    quote = conn.dialect.identifier_preparer.quote
    inspector = inspect(conn)
    for table in _V1_REFERRING_TABLES:
        for key in inspector.get_foreign_keys(table):
            conn.exec_driver_sql(f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(key['name'])}")


def _node_versions(conn: Connection) -> None:
    """Version 3: ``lineage_nodes.version``, bumped by every ingest naming the node (graph-card cache key)."""
    conn.exec_driver_sql("ALTER TABLE lineage_nodes ADD COLUMN version BIGINT NOT NULL DEFAULT 1")


#: ``(version, description, migration)`` in order. Append only; never edit a released entry.
MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial lineage store", _initial),
    (2, "references kept by the writer instead of foreign keys", _drop_foreign_keys),
    (3, "node versions for the graph-card cache", _node_versions),
]
LATEST = MIGRATIONS[-1][0]


class StoreVersionError(RuntimeError):
    """The store was written by a newer release of this package than the one running."""


def current_version(conn: Connection) -> int | None:
    """The store's schema version, or None when it has no lineage tables yet."""
    if not inspect(conn).has_table(tables.schema_version.name):
        return None
    return conn.execute(select(func.max(tables.schema_version.c.version))).scalar()


def migrate(engine: Engine) -> int:
    """Create or upgrade the lineage tables in ``engine``'s database; return the resulting version.

    Safe to call from several processes at once: on PostgreSQL the work runs under an advisory lock.
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(6580006)")
        version = current_version(conn)
        now = datetime.now(timezone.utc)
        if version is None:
            tables.metadata.create_all(conn)
            conn.execute(tables.schema_version.insert().values(version=LATEST, applied_at=now))
            return LATEST
        if version > LATEST:
            raise StoreVersionError(
                f"the lineage store at {engine.url.render_as_string(hide_password=True)} is at schema version "
                f"{version}, newer than this release knows ({LATEST}): upgrade airflow-lineage-provider"
            )
        for number, _description, step in MIGRATIONS:
            if number > version:
                step(conn)
                conn.execute(tables.schema_version.insert().values(version=number, applied_at=now))
        return max(version, LATEST)
