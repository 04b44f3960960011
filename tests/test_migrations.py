"""Schema migrations of the lineage store and the outbox under Alembic, on SQLite and PostgreSQL: stores
written by the hand-written runners before Alembic are adopted and upgraded in place with their data, each
store keeps its revision in its own version table (never Airflow's ``alembic_version``), newer stores are
refused, concurrent first uses create a store once, and a migration commits with its stamp or not at all.

The lineage store's revision-by-revision upgrades from versions 1 to 9 are in ``test_consumer_store.py``."""

from __future__ import annotations

import multiprocessing
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.schema import migrations as store_migrations
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.store_settings import STORE_ID, new_store_id, read_settings
from airflow_lineage_provider.outbox import migrations as outbox_migrations
from airflow_lineage_provider.outbox import tables as outbox_tables
from airflow_lineage_provider.outbox.database import create_outbox_engine, dispose_engines, outbox_engine
from airflow_lineage_provider.schema_migrations import StoreSchema, migration_transaction, revision_of

pytest_plugins = ("support.consumer_fixtures",)

OUTBOX_SCRIPTS = Path(outbox_migrations.__file__).parent / "alembic"


@pytest.fixture
def url(store_url: str) -> Iterator[str]:
    """A database on SQLite or PostgreSQL (a private schema) for either store; outbox engines closed after."""
    yield store_url
    dispose_engines()


def _column(engine: sa.Engine, query: str) -> list[object]:
    with engine.connect() as conn:
        return list(conn.exec_driver_sql(query).scalars())


def _store_as_the_hand_written_runner_created_it(
    engine: sa.Engine, fill: Callable[[sa.Connection], None] | None = None
) -> None:
    """What ``migrate`` created for a new store before Alembic (schema version 10, the last it knew): the
    tables of ``tables.py`` but what came after version 10, a store id and one version stamp. ``fill`` writes
    lineage with today's ingest first, before what came after version 10 is taken off."""
    assert store_migrations.LATEST == 18, "take off what came after version 10, as test_consumer_store does"
    from test_consumer_store import _to_version_11

    with engine.begin() as conn:
        tables.metadata.create_all(conn)
        if fill is not None:
            fill(conn)
        _to_version_11(conn)
        tables.unapplied_events.drop(conn)  # version 11's
        tables.pending_events.drop(conn)
        new_store_id(conn)
        conn.execute(tables.schema_version.insert().values(version=10, applied_at=datetime.now(timezone.utc)))


def _outbox_as_the_hand_written_runner_created_it(engine: sa.Engine) -> None:
    """What ``migrate`` created for a new outbox before Alembic (schema version 1)."""
    assert outbox_migrations.SCHEMA_VERSION == 1, "take off what came after version 1"
    with engine.begin() as conn:
        outbox_tables.metadata.create_all(conn)
        conn.execute(sa.insert(outbox_tables.schema_version).values(version=1))
        conn.execute(sa.insert(outbox_tables.sequencer).values(id=1, last_seq=0))


def test_a_lineage_store_from_before_alembic_is_adopted_with_its_lineage_and_identity(url: str) -> None:
    from support.consumer_helpers import dataset, run_event

    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    engine = create_store_engine(url)
    try:
        event = run_event("COMPLETE", "load", inputs=[dataset("src")], outputs=[dataset("dst")])

        def fill(conn: sa.Connection) -> None:
            assert ingest_events(conn, [parse_event(event)]).stored == 1

        _store_as_the_hand_written_runner_created_it(engine, fill)
        with engine.begin() as conn:
            store_id = read_settings(conn)[STORE_ID]
    finally:
        engine.dispose()
    store = LineageStore(url)
    try:
        with store.read() as conn:
            assert store_migrations.current_version(conn) == store_migrations.LATEST
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.events)).scalar() == 1
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.edges)).scalar() == 2
            assert read_settings(conn)[STORE_ID] == store_id  # the same store, not a new one
        assert _column(store.engine, "SELECT version_num FROM lineage_alembic_version") == ["0018"]
        versions = _column(store.engine, "SELECT version FROM lineage_schema_version")
        assert versions == list(range(10, store_migrations.LATEST + 1))
    finally:
        store.dispose()


def test_an_outbox_from_before_alembic_is_adopted_with_its_events(url: str) -> None:
    from support.outbox_helpers import fill, run_pairs

    engine = create_outbox_engine(url)
    try:
        _outbox_as_the_hand_written_runner_created_it(engine)
        with engine.begin() as conn:
            conn.execute(
                sa.insert(outbox_tables.events).values(
                    event_key="0" * 64, payload="{}", stored_at=datetime.now(timezone.utc).replace(tzinfo=None)
                )
            )
    finally:
        engine.dispose()
    fill(url, run_pairs(1))
    adopted = outbox_engine(url)
    assert _column(adopted, "SELECT version_num FROM lineage_outbox_alembic_version") == ["0001"]
    assert _column(adopted, "SELECT version FROM lineage_outbox_schema") == [1]
    assert len(_column(adopted, "SELECT event_key FROM lineage_outbox_events")) == 3
    assert _column(adopted, "SELECT id FROM lineage_outbox_sequencer") == [1]


def test_new_stores_are_stamped_head_in_their_own_version_tables_leaving_airflows_alone(url: str) -> None:
    """The outbox may live in Airflow's metadata database, whose ``alembic_version`` is Airflow's."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
            conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('29ce7909c52b')")
        assert outbox_migrations.migrate(create_outbox_engine(url)) == 0
        assert store_migrations.migrate(create_store_engine(url)) == store_migrations.LATEST
        assert _column(engine, "SELECT version_num FROM alembic_version") == ["29ce7909c52b"]
        assert _column(engine, "SELECT version_num FROM lineage_outbox_alembic_version") == ["0001"]
        assert _column(engine, "SELECT version_num FROM lineage_alembic_version") == ["0018"]
        assert outbox_migrations.migrate(create_outbox_engine(url)) == 1  # at head: nothing to do
    finally:
        engine.dispose()


def test_a_store_alembic_left_at_an_older_revision_is_upgraded_to_head(url: str) -> None:
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from test_consumer_store import _to_version_9

    config = Config()
    config.set_main_option("script_location", store_migrations.SCHEMA.script_location)
    engine = create_store_engine(url)
    try:
        store_migrations.migrate(engine)
        with engine.begin() as conn:
            _to_version_9(conn)
            context = MigrationContext.configure(conn, opts={"version_table": store_migrations.VERSION_TABLE})
            context.stamp(ScriptDirectory.from_config(config), "0009")
            conn.execute(tables.schema_version.update().values(version=9))
        assert store_migrations.migrate(engine) == store_migrations.LATEST
        assert _column(engine, "SELECT version_num FROM lineage_alembic_version") == ["0018"]
        versions = _column(engine, "SELECT version FROM lineage_schema_version ORDER BY version")
        assert versions == list(range(9, store_migrations.LATEST + 1))
        assert _column(engine, "SELECT count(*) FROM lineage_name_patterns") == [0]  # version 10's table is back
    finally:
        engine.dispose()


@pytest.mark.parametrize("schema", [store_migrations.SCHEMA, outbox_migrations.SCHEMA], ids=["store", "outbox"])
def test_the_revisions_are_the_schema_versions_in_order_up_to_the_version_the_code_reads(schema: StoreSchema) -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", schema.script_location)
    scripts = ScriptDirectory.from_config(config)
    assert scripts.get_heads() == [schema.head]
    chain = [script.revision for script in reversed(list(scripts.walk_revisions()))]
    assert chain == [revision_of(version) for version in range(1, schema.latest + 1)]


def test_a_store_at_a_revision_this_release_does_not_know_is_refused(url: str) -> None:
    engine = create_store_engine(url)
    try:
        store_migrations.migrate(engine)
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE lineage_alembic_version SET version_num = 'feedc0de1234'")
        with pytest.raises(store_migrations.StoreVersionError, match="schema revision 'feedc0de1234', newer than"):
            store_migrations.migrate(engine)
    finally:
        engine.dispose()


@pytest.mark.parametrize("recorded", ["by alembic", "by the hand-written runner"])
def test_an_outbox_from_a_newer_release_is_refused(url: str, recorded: str) -> None:
    engine = create_outbox_engine(url)
    try:
        outbox_migrations.migrate(engine)
        with engine.begin() as conn:
            if recorded == "by alembic":
                conn.exec_driver_sql("UPDATE lineage_outbox_alembic_version SET version_num = '0002'")
            else:
                conn.exec_driver_sql("DROP TABLE lineage_outbox_alembic_version")
                conn.execute(sa.update(outbox_tables.schema_version).values(version=2))
        with pytest.raises(outbox_migrations.OutboxSchemaError, match=r"schema version 2, newer .* \(1\); upgrade"):
            outbox_migrations.migrate(engine)
    finally:
        engine.dispose()


def _open_both(url: str) -> None:
    store_migrations.migrate(create_store_engine(url))
    outbox_migrations.migrate(create_outbox_engine(url))


def test_concurrent_first_uses_create_each_store_once(url: str) -> None:
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_open_both, args=(url,)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    engine = sa.create_engine(url)
    try:
        assert _column(engine, "SELECT version_num FROM lineage_alembic_version") == ["0018"]
        assert _column(engine, "SELECT version FROM lineage_schema_version") == [store_migrations.LATEST]
        assert _column(engine, "SELECT version_num FROM lineage_outbox_alembic_version") == ["0001"]
        assert _column(engine, "SELECT id FROM lineage_outbox_sequencer") == [1]
    finally:
        engine.dispose()


_REVISION_2 = """
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.get_bind().exec_driver_sql("CREATE TABLE lineage_probe (id INTEGER PRIMARY KEY)")
    {then}
"""


@pytest.mark.parametrize("revision", ["works", "fails"])
def test_a_migration_commits_with_its_stamp_or_not_at_all(url: str, tmp_path: Path, revision: str) -> None:
    """A store of a pre-Alembic version 1 upgraded to a version 2 that creates a table: adopted, upgraded and
    stamped in one transaction; when the revision fails halfway, no table, stamp or adoption is left."""
    scripts = tmp_path / "alembic"
    shutil.copytree(OUTBOX_SCRIPTS, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    then = "pass" if revision == "works" else 'raise RuntimeError("revision 2 broke")'
    (scripts / "versions" / "0002_probe.py").write_text(_REVISION_2.format(then=then))
    recorded: list[tuple[int, int]] = []
    schema = StoreSchema(
        script_location=str(scripts),
        version_table="lineage_probe_alembic_version",
        latest=2,
        create=lambda conn: None,
        recorded_version=lambda conn: 1,
        record_version=lambda conn, before, after: recorded.append((before, after)),
        too_new=lambda conn, found: RuntimeError(found),
    )
    engine = create_store_engine(url)
    try:
        if revision == "works":
            with migration_transaction(engine, 1) as conn:
                assert schema.migrate(conn) == 1
            assert recorded == [(1, 2)]
            assert _column(engine, "SELECT version_num FROM lineage_probe_alembic_version") == ["0002"]
            assert _column(engine, "SELECT count(*) FROM lineage_probe") == [0]
        else:
            with pytest.raises(RuntimeError, match="revision 2 broke"):
                with migration_transaction(engine, 1) as conn:
                    schema.migrate(conn)
            with engine.connect() as conn:
                assert not {"lineage_probe", "lineage_probe_alembic_version"} & set(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()
