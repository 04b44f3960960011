"""Operators read a read-only store (``CollectLineageOperator``'s :class:`LineageWalker`), on SQLite and PostgreSQL.

It never migrates the store, never applies its ingest log and never creates one: a store at another schema version,
or none at all, is refused with an error naming both versions (or saying there is no store) and what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.consumer_helpers import dataset, run_event

from airflow_lineage_provider.consumer.reads import LineageWalker
from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.schema.migrations import LATEST, StoreVersionError, current_version
from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
from airflow_lineage_provider.consumer.validation import parse_event

pytest_plugins = ("support.consumer_fixtures",)


@pytest.fixture
def store(store_url: str) -> Iterator[str]:
    """A store a consumer created, holding load: src → dst."""
    server = LineageStore(store_url)
    with server.write() as conn:
        event = run_event("COMPLETE", "load", inputs=[dataset("src")], outputs=[dataset("dst")])
        ingest_events(conn, [parse_event(event)])
    server.dispose()
    yield store_url


def _stamp(url: str, revision: str) -> None:
    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE lineage_alembic_version SET version_num = '{revision}'")
    finally:
        engine.dispose()


def _version(url: str) -> int | None:
    engine = create_store_engine(url)
    try:
        with engine.connect() as conn:
            return current_version(conn)
    finally:
        engine.dispose()


def test_a_store_at_the_version_this_release_reads_is_walked(store: str) -> None:
    walker = LineageWalker(store)
    try:
        dst = walker.dataset_id("warehouse", "dst")
        assert dst is not None
        assert [row["target_table"] for row in walker.table_edges(dst, "upstream", 1, 10, None)] == ["warehouse/src"]
    finally:
        walker.close()


@pytest.mark.parametrize(("revision", "hint"), [("0011", "upgrade the consumer"), ("0099", "upgrade the package")])
def test_a_store_at_another_version_is_refused_naming_both_and_left_as_it_is(
    store: str, revision: str, hint: str
) -> None:
    _stamp(store, revision)
    walker = LineageWalker(store)
    try:
        with pytest.raises(StoreVersionError) as refused:
            walker.dataset_id("warehouse", "dst")
    finally:
        walker.close()
    message = str(refused.value)
    assert f"schema version {int(revision)}" in message and f"version {LATEST} this release" in message
    assert hint in message
    assert _version(store) == int(revision)  # never migrated


@pytest.mark.postgres
def test_a_password_in_the_url_is_not_in_the_error(pg_store_url: str) -> None:
    url = sa.make_url(pg_store_url).set(password="s3cret-pw")  # trust auth: accepted, and never shown
    walker = LineageWalker(url.render_as_string(hide_password=False))
    try:
        with pytest.raises(StoreVersionError, match="has no lineage tables yet") as refused:
            walker.dataset_id("warehouse", "dst")
    finally:
        walker.close()
    assert "s3cret-pw" not in str(refused.value) and "***" in str(refused.value)


def test_no_store_is_refused_and_none_is_created(tmp_path: Path) -> None:
    missing = tmp_path / "lineage.db"
    walker = LineageWalker(f"sqlite:///{missing}")
    try:
        with pytest.raises(StoreVersionError, match="has no lineage tables yet: start its consumer"):
            walker.dataset_id("warehouse", "dst")
    finally:
        walker.close()
    assert not missing.exists()
