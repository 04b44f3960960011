"""The lineage store itself: lazy opening, schema versions and migrations, SQLite WAL, on both databases."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine, tables
from airflow_lineage_provider.consumer.store.migrations import LATEST, StoreVersionError, current_version, migrate

pytest_plugins = ("support.consumer_fixtures",)


def test_building_a_store_touches_nothing(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "lineage.db"
    store = LineageStore(f"sqlite:///{path}")
    assert not path.exists()
    with store.read() as conn:
        assert current_version(conn) == LATEST
    assert path.exists()


def test_a_new_store_is_stamped_with_the_latest_version_and_migrating_again_changes_nothing(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        assert migrate(engine) == LATEST
        with engine.begin() as conn:
            conn.execute(
                tables.nodes.insert().values(
                    node_key="k", kind="job", namespace="n", name="j", created_at=datetime.now(timezone.utc),
                    updated_at=datetime.now(timezone.utc),
                )
            )  # fmt: skip
        assert migrate(engine) == LATEST
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.nodes)).scalar() == 1
            assert conn.execute(sa.select(tables.schema_version.c.version)).scalars().all() == [LATEST]
            assert set(sa.inspect(conn).get_table_names()) >= {t.name for t in tables.metadata.sorted_tables}
    finally:
        engine.dispose()


def test_a_store_from_a_newer_release_is_refused_with_a_clear_message(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            conn.execute(
                tables.schema_version.insert().values(version=LATEST + 1, applied_at=datetime.now(timezone.utc))
            )
        with pytest.raises(StoreVersionError, match=f"schema version {LATEST + 1}.*upgrade airflow-lineage-provider"):
            migrate(engine)
    finally:
        engine.dispose()


def test_sqlite_stores_run_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    engine = create_store_engine(f"sqlite:///{tmp_path / 'lineage.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    engine.dispose()


#: The foreign keys version 1 declared (PostgreSQL enforced them; version 2 drops them).
_V1_FOREIGN_KEYS = [
    ("lineage_datasets", "node_id", "lineage_nodes(id)"),
    ("lineage_jobs", "node_id", "lineage_nodes(id)"),
    ("lineage_runs", "job_id", "lineage_nodes(id)"),
    ("lineage_run_io", "run_uuid", "lineage_runs(run_uuid) ON DELETE CASCADE"),
    ("lineage_run_io", "dataset_id", "lineage_nodes(id)"),
    ("lineage_edges", "origin_id", "lineage_nodes(id)"),
    ("lineage_edges", "destination_id", "lineage_nodes(id)"),
    ("lineage_dataset_edges", "source_id", "lineage_nodes(id)"),
    ("lineage_dataset_edges", "target_id", "lineage_nodes(id)"),
    ("lineage_dataset_edges", "job_id", "lineage_nodes(id)"),
    ("lineage_fields", "dataset_id", "lineage_nodes(id)"),
    ("lineage_column_edges", "source_field_id", "lineage_fields(id)"),
    ("lineage_column_edges", "target_field_id", "lineage_fields(id)"),
    ("lineage_symlinks", "dataset_id", "lineage_nodes(id)"),
]


def _version_1_store(engine: sa.Engine) -> None:
    """A store as version 1 left it: its tables (no node versions), its foreign keys and its version stamp."""
    with engine.begin() as conn:
        tables.metadata.create_all(conn)
        conn.exec_driver_sql("ALTER TABLE lineage_nodes DROP COLUMN version")  # added by version 3
        if conn.dialect.name == "postgresql":
            for table, column, target in _V1_FOREIGN_KEYS:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD FOREIGN KEY ({column}) REFERENCES {target}")
        conn.execute(tables.schema_version.insert().values(version=1, applied_at=datetime.now(timezone.utc)))


def test_a_version_1_store_is_migrated_forward_keeping_its_lineage(store_url: str) -> None:
    from support.consumer_helpers import run_event

    from airflow_lineage_provider.consumer.store.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    engine = create_store_engine(store_url)
    try:
        _version_1_store(engine)
        event = parse_event(
            run_event(
                "COMPLETE",
                "load",
                inputs=[{"namespace": "db", "name": "src"}],
                outputs=[{"namespace": "db", "name": "dst"}],
            )
        )
        with engine.begin() as conn:
            conn.execute(tables.nodes.insert().values(
                node_key="old", kind="job", namespace="pipelines", name="old", created_at=datetime.now(timezone.utc),
                updated_at=datetime.now(timezone.utc),
            ))  # fmt: skip
        assert migrate(engine) == LATEST == 3
        with engine.begin() as conn:
            assert all(not sa.inspect(conn).get_foreign_keys(name) for name, _, _ in _V1_FOREIGN_KEYS)
            assert conn.execute(sa.select(tables.schema_version.c.version)).scalars().all() == [1, 2, 3]
            assert conn.execute(sa.select(tables.nodes.c.version)).scalars().all() == [1]
            assert ingest_events(conn, [event]).stored == 1
            assert ingest_events(conn, [event]).duplicates == 1
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.edges)).scalar() == 2
    finally:
        engine.dispose()
