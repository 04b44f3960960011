"""The lineage store itself: lazy opening, schema versions and migrations, SQLite WAL, and which run is a
job's latest, on both databases."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_lineage_provider.consumer.store import LineageStore, create_store_engine
from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.store.schema.migrations import (
    LATEST,
    VERSION_TABLE,
    StoreVersionError,
    current_version,
    migrate,
)
from airflow_lineage_provider.schema_migrations import revision_of

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
            conn.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '{revision_of(LATEST + 1)}'")
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


#: Table lineage up to version 3: one row per source → target pair through a job (version 4: io groups).
_V3_DATASET_EDGES = sa.Table(
    "lineage_dataset_edges",
    sa.MetaData(),
    sa.Column("source_id", tables.Id, primary_key=True),
    sa.Column("target_id", tables.Id, primary_key=True),
    sa.Column("job_id", tables.Id, primary_key=True),
    sa.Column("last_seen", tables.UtcDateTime, nullable=False),
    sa.Index("ix_lineage_dataset_edges_target", "target_id", "source_id"),
)


def _to_version_17(conn: sa.Connection) -> None:
    """Take off what version 18 added: packed, sized and namespaced raw events, and the payload dictionaries."""
    for column in ("packed", "dictionary_id", "size", "namespaces"):
        conn.exec_driver_sql(f"ALTER TABLE lineage_events DROP COLUMN {column}")
    tables.payload_dictionaries.drop(conn)
    conn.execute(tables.store_settings.delete().where(tables.store_settings.c.name == payloads.DICTIONARY_SETTING))


def _to_version_16(conn: sa.Connection) -> None:
    """Take off what version 17 added: the index of names in order for search."""
    _to_version_17(conn)
    conn.exec_driver_sql(f"DROP INDEX {tables.NAME_ORDER_INDEX}")


def _to_version_15(conn: sa.Connection) -> None:
    """Take off what version 16 added: the node counts kept by triggers."""
    _to_version_16(conn)
    for trigger in ("lineage_nodes_counted_in", "lineage_nodes_counted_out"):
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"DROP TRIGGER {trigger} ON lineage_nodes")
            conn.exec_driver_sql(f"DROP FUNCTION {trigger}()")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER {trigger}")
    tables.node_counts.drop(conn)


def _to_version_14(conn: sa.Connection) -> None:
    """Take off what version 15 added: who logged each event of the ingest log."""
    _to_version_15(conn)
    conn.exec_driver_sql("DROP INDEX ix_lineage_pending_events_logged_by")
    conn.exec_driver_sql("ALTER TABLE lineage_pending_events DROP COLUMN logged_by")


def _to_version_13(conn: sa.Connection) -> None:
    """Take off what version 14 added: the namespaces table the writer keeps."""
    _to_version_14(conn)
    tables.namespaces.drop(conn)


def _to_version_12(conn: sa.Connection) -> None:
    """Take off what version 13 added: the trigram index of node names for search (PostgreSQL only)."""
    _to_version_13(conn)
    conn.exec_driver_sql(f"DROP INDEX IF EXISTS {tables.NAME_SEARCH_INDEX}")


def _to_version_11(conn: sa.Connection) -> None:
    """Take off what version 12 added: each job's declaration, declared column links, and declared/observed times
    on io groups and column edges."""
    _to_version_12(conn)
    tables.declared_column_links.drop(conn)
    tables.job_declarations.drop(conn)
    conn.exec_driver_sql("DROP INDEX ix_lineage_io_groups_job")
    for table in ("lineage_io_groups", "lineage_column_edges"):
        for column in ("declared_at", "observed_at"):
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")


def _to_version_10(conn: sa.Connection) -> None:
    """Take off what version 11 added: the ingest log of deferred apply. Like every ``_to_version_N``, leave the
    store as the release before Alembic did: its version only in ``lineage_schema_version``, set by the caller (the
    store is then adopted at that version)."""
    _to_version_11(conn)
    sa.Table(VERSION_TABLE, sa.MetaData()).drop(conn, checkfirst=True)
    tables.unapplied_events.drop(conn)
    tables.pending_events.drop(conn)


def _to_version_9(conn: sa.Connection) -> None:
    """Take off what version 10 added: templated declared names and their renderings."""
    _to_version_10(conn)
    tables.pattern_renderings.drop(conn)
    tables.name_patterns.drop(conn)
    conn.execute(tables.store_settings.delete().where(tables.store_settings.c.name == tables.TEMPLATED_NAMES))


def _to_version_8(conn: sa.Connection) -> None:
    """Take off what version 9 added: when each node and edge was last declared and observed."""
    _to_version_9(conn)
    conn.exec_driver_sql("DROP INDEX ix_lineage_edges_declared")
    conn.execute(tables.store_settings.delete().where(tables.store_settings.c.name == tables.DECLARED_LINEAGE))
    for table in ("lineage_nodes", "lineage_edges"):
        for column in ("declared_at", "observed_at"):
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")


def _to_version_7(conn: sa.Connection) -> None:
    """Take off what version 8 added: claim keys, producers, dataset groups and the store's settings."""
    _to_version_8(conn)
    for table in (tables.node_producers, tables.dataset_members, tables.store_settings):
        table.drop(conn)
    conn.exec_driver_sql("DROP INDEX ix_lineage_symlinks_alias")
    for column in ("alias_key", "via", "producer"):
        conn.exec_driver_sql(f"ALTER TABLE lineage_symlinks DROP COLUMN {column}")


def _to_version_6(conn: sa.Connection) -> None:
    """Take off what version 7 added: the record of retention prunes."""
    _to_version_7(conn)
    tables.prunes.drop(conn)


def _to_version_5(conn: sa.Connection) -> None:
    """Take off what version 6 added: each run's job facets and their time, the name in the nodes' index."""
    _to_version_6(conn)
    conn.exec_driver_sql("ALTER TABLE lineage_runs DROP COLUMN job_facets")
    conn.exec_driver_sql("ALTER TABLE lineage_runs DROP COLUMN job_facets_time")
    conn.exec_driver_sql("DROP INDEX ix_lineage_nodes_kind_namespace_name")
    conn.exec_driver_sql("CREATE INDEX ix_lineage_nodes_kind_namespace ON lineage_nodes (kind, namespace)")


def back_to_version(conn: sa.Connection, version: int) -> None:
    """Take a store at the latest schema back to ``version`` (11 or later, an Alembic revision): what later versions
    added taken off, its revision stamped and the version rows of later versions deleted, so that ``migrate``
    upgrades it as a store that version left."""
    takers = {
        11: _to_version_11,
        12: _to_version_12,
        13: _to_version_13,
        14: _to_version_14,
        15: _to_version_15,
        16: _to_version_16,
        17: _to_version_17,
    }
    takers[version](conn)
    conn.exec_driver_sql(f"UPDATE lineage_alembic_version SET version_num = '{version:04d}'")
    conn.execute(tables.schema_version.delete().where(tables.schema_version.c.version > version))


def _old_store(engine: sa.Engine, version: int) -> None:
    """A store as ``version`` (1 to 5) left it: its tables, version 1's foreign keys and its version stamp."""
    with engine.begin() as conn:
        tables.metadata.create_all(conn)
        _to_version_5(conn)
        if version == 5:
            conn.execute(tables.schema_version.insert().values(version=5, applied_at=datetime.now(timezone.utc)))
            return
        tables.node_tags.drop(conn)  # added by version 5
        tables.tags.drop(conn)
        if version == 4:
            conn.execute(tables.schema_version.insert().values(version=4, applied_at=datetime.now(timezone.utc)))
            return
        tables.io_members.drop(conn)  # added by version 4, replacing lineage_dataset_edges
        tables.io_groups.drop(conn)
        _V3_DATASET_EDGES.create(conn)
        if version < 3:
            conn.exec_driver_sql("ALTER TABLE lineage_nodes DROP COLUMN version")
        if version == 1 and conn.dialect.name == "postgresql":
            for table, column, target in _V1_FOREIGN_KEYS:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD FOREIGN KEY ({column}) REFERENCES {target}")
        conn.execute(tables.schema_version.insert().values(version=version, applied_at=datetime.now(timezone.utc)))


def test_a_version_1_store_is_migrated_forward_keeping_its_lineage(store_url: str) -> None:
    from support.consumer_helpers import run_event

    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    engine = create_store_engine(store_url)
    try:
        _old_store(engine, 1)
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
        assert migrate(engine) == LATEST
        with engine.begin() as conn:
            kept = set(sa.inspect(conn).get_table_names())
            assert all(not sa.inspect(conn).get_foreign_keys(name) for name, _, _ in _V1_FOREIGN_KEYS if name in kept)
            stamps = conn.execute(sa.select(tables.schema_version.c.version)).scalars().all()
            assert stamps == list(range(1, LATEST + 1))
            assert conn.execute(sa.select(tables.nodes.c.version)).scalars().all() == [1]
            assert ingest_events(conn, [event]).stored == 1
            assert ingest_events(conn, [event]).duplicates == 1
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.edges)).scalar() == 2
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.io_members)).scalar() == 2
    finally:
        engine.dispose()


def _node(conn: sa.Connection, kind: str, name: str) -> int:
    from airflow_lineage_provider.consumer.store.write.ingest import node_key

    namespace = "warehouse" if kind == "dataset" else "pipelines"
    now = datetime.now(timezone.utc)
    row = {"node_key": node_key(kind, namespace, name), "kind": kind, "namespace": namespace, "name": name}
    return conn.execute(tables.nodes.insert().values(**row, created_at=now, updated_at=now)).inserted_primary_key[0]


def _table_lineage(conn: sa.Connection, root: int, direction: str, since: datetime | None = None) -> list[tuple]:
    from airflow_lineage_provider.consumer.store.graph import walks

    bounds = walks.WalkBounds(hops=3, max_nodes=100, since=since)
    return walks.walk_edges(conn, walks.DATASET_EDGES[direction], [root], bounds)  # type: ignore[index]


def test_a_version_3_store_keeps_every_table_lineage_pair_and_its_time_as_io_groups(store_url: str) -> None:
    from support.consumer_helpers import T0, dataset, run_event

    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    engine = create_store_engine(store_url)
    old, recent = T0 - timedelta(days=30), T0
    try:
        _old_store(engine, 3)
        with engine.begin() as conn:
            a, b, c, x, y = (_node(conn, "dataset", name) for name in ("a", "b", "c", "x", "y"))
            load, report = _node(conn, "job", "load"), _node(conn, "job", "report")
            pairs = [(a, x, load, recent), (b, y, load, recent), (c, y, report, old), (x, y, report, recent)]
            conn.execute(
                _V3_DATASET_EDGES.insert(),
                [{"source_id": s, "target_id": t, "job_id": j, "last_seen": seen} for s, t, j, seen in pairs],
            )
        assert migrate(engine) == LATEST
        with engine.begin() as conn:
            assert "lineage_dataset_edges" not in sa.inspect(conn).get_table_names()
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.io_groups)).scalar() == 4
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.io_members)).scalar() == 8
            assert _table_lineage(conn, y, "upstream") == [(y, b, 1), (y, c, 1), (y, x, 1), (x, a, 2)]
            assert _table_lineage(conn, y, "upstream", since=recent) == [(y, b, 1), (y, x, 1), (x, a, 2)]
            assert _table_lineage(conn, a, "downstream") == [(a, x, 1), (x, y, 2)]
            assert _table_lineage(conn, b, "downstream") == [(b, y, 1)]

            # The ingest finds a migrated pair's group by its key, and numbers new groups after the migrated ones.
            same = run_event("COMPLETE", "load", time=60, inputs=[dataset("a")], outputs=[dataset("x")])
            new = run_event("COMPLETE", "load", time=60, inputs=[dataset("c")], outputs=[dataset("x")])
            assert ingest_events(conn, [parse_event(same), parse_event(new)]).stored == 2
            groups = conn.execute(sa.select(tables.io_groups.c.id, tables.io_groups.c.last_seen)).all()
            assert sorted(group_id for group_id, _ in groups)[:4] == [1, 2, 3, 4] and len(groups) == 5
            seen = sorted(last for _, last in groups)
            assert seen == [old, recent, recent, T0 + timedelta(seconds=60), T0 + timedelta(seconds=60)]
            assert _table_lineage(conn, x, "upstream") == [(x, a, 1), (x, c, 1)]
    finally:
        engine.dispose()


def _io_schema(conn: sa.Connection) -> dict[str, object]:
    inspector = sa.inspect(conn)
    found: dict[str, object] = {}
    for table in (tables.io_groups.name, tables.io_members.name):
        columns = [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)]
        indexes = sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table))
        unique = sorted(tuple(u["column_names"]) for u in inspector.get_unique_constraints(table))
        found[table] = (columns, inspector.get_pk_constraint(table)["constrained_columns"], indexes, unique)
    return found


def test_the_io_group_tables_of_a_migrated_store_are_those_of_a_new_one(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        _old_store(engine, 3)
        migrate(engine)
        with engine.connect() as conn:
            migrated = _io_schema(conn)
        with engine.begin() as conn:
            tables.io_members.drop(conn)
            tables.io_groups.drop(conn)
            tables.metadata.create_all(conn)
        with engine.connect() as conn:
            assert _io_schema(conn) == migrated
    finally:
        engine.dispose()


LOW_RUN, HIGH_RUN = "00000000-0000-4000-8000-000000000001", "ffffffff-0000-4000-8000-000000000001"


def _latest_run(conn: sa.Connection, job: str) -> tuple[str, datetime]:
    j, n = tables.jobs.c, tables.nodes.c
    query = sa.select(j.latest_run_uuid, j.latest_run_time).join_from(tables.jobs, tables.nodes, n.id == j.node_id)
    return tuple(conn.execute(query.where(n.name == job)).one())  # type: ignore[return-value]


@pytest.mark.parametrize("batches", ["one batch", "one batch per run"])
def test_of_two_runs_at_the_same_time_the_greater_run_id_is_the_latest_in_either_order(
    store_url: str, batches: str
) -> None:
    from support.consumer_helpers import T0, run_event

    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    store = LineageStore(store_url)
    try:
        for job, order in (("low_first", (LOW_RUN, HIGH_RUN)), ("high_first", (HIGH_RUN, LOW_RUN))):
            events = [parse_event(run_event("COMPLETE", job, run_id=run, time=5)) for run in order]
            for batch in [events] if batches == "one batch" else [[event] for event in events]:
                with store.write() as conn:
                    ingest_events(conn, batch)
        with store.read() as conn:
            assert (
                _latest_run(conn, "low_first")
                == _latest_run(conn, "high_first")
                == (HIGH_RUN, T0 + timedelta(seconds=5))
            )
    finally:
        store.dispose()


@pytest.mark.parametrize("batches", ["one batch", "one batch per run"])
def test_a_later_run_is_the_latest_whatever_its_run_id(store_url: str, batches: str) -> None:
    from support.consumer_helpers import T0, run_event

    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    store = LineageStore(store_url)
    try:
        events = [
            parse_event(run_event("COMPLETE", "daily", run_id=LOW_RUN, time=6)),
            parse_event(run_event("COMPLETE", "daily", run_id=HIGH_RUN, time=5)),
        ]
        for batch in [events] if batches == "one batch" else [[event] for event in events]:
            with store.write() as conn:
                ingest_events(conn, batch)
        with store.read() as conn:
            assert _latest_run(conn, "daily") == (LOW_RUN, T0 + timedelta(seconds=6))
    finally:
        store.dispose()


def test_a_version_4_store_gains_empty_tag_tables_that_take_tags(store_url: str) -> None:
    from airflow_lineage_provider.consumer.store.read import tags

    engine = create_store_engine(store_url)
    try:
        _old_store(engine, 4)
        assert migrate(engine) == LATEST
        with engine.begin() as conn:
            assert tags.list_tags(conn, 10, 0) == ([], 0)
            node = _node(conn, "dataset", "orders")
            tags.add_tag(conn, node, "PII", field="email")
            tags.add_tag(conn, node, "GOLD")
            tags.add_tag(conn, node, "GOLD")  # idempotent
            tags.put_tag(conn, "PII", "personal data")
            tags.add_tag(conn, node, "PII", field="email")  # keeps the description
            assert tags.node_tags(conn, [node]) == {node: ["GOLD"]}
            assert tags.field_tags(conn, node) == {"email": ["PII"]}
            assert tags.list_tags(conn, 10, 0) == (
                [{"name": "GOLD", "description": None}, {"name": "PII", "description": "personal data"}],
                2,
            )
            assert tags.remove_tag(conn, node, "PII", field="email") and not tags.remove_tag(conn, node, "PII")
            assert tags.field_tags(conn, node) == {}
    finally:
        engine.dispose()


def test_tag_names_are_checked() -> None:
    from airflow_lineage_provider.consumer.store.read.tags import check_tag_name

    for bad, message in (("", "must not be empty"), ("x" * 256, "at most 255"), ("a\nb", "control characters")):
        with pytest.raises(ValueError, match=message):
            check_tag_name(bad)


def _with_job_facets(event: dict, **facets: Any) -> dict:
    event["job"]["facets"] = {
        name: {"_producer": "tests", "_schemaURL": "https://example.com/facet.json", **members}
        for name, members in facets.items()
    }
    return event


def test_a_version_5_store_gains_each_runs_latest_job_facets_and_keeps_its_job_versions(store_url: str) -> None:
    """Version 6 reads each run's latest job facets from its stored events; every job version stays the same."""
    from support.consumer_helpers import dataset, run_event

    from airflow_lineage_provider.consumer.marquez import jobs as marquez_jobs
    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    changed, documented, bare, tied = (str(uuid.uuid4()) for _ in range(4))
    io = {"inputs": [dataset("src")], "outputs": [dataset("dst")]}
    batches = [
        [
            _with_job_facets(run_event("START", "job", changed, time=0, **io), location={"url": "v1"}),
            _with_job_facets(run_event("COMPLETE", "job", changed, time=60, **io), location={"url": "v2\u0000"}),
            _with_job_facets(run_event("START", "job", documented, time=100, **io), documentation={"x": "doc"}),
            run_event("COMPLETE", "job", documented, time=130, **io),
            run_event("START", "job", bare, time=200, inputs=[dataset("src")]),
            _with_job_facets(run_event("START", "job", tied, time=300, **io), location={"url": "first"}),
        ],
        [_with_job_facets(run_event("RUNNING", "job", tied, time=300, **io), location={"url": "stored last"})],
    ]
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            for batch in batches:
                ingest_events(conn, [parse_event(event) for event in batch])
        runs = tables.runs.c
        stored = sa.select(runs.run_uuid, runs.job_facets, runs.job_facets_time).order_by(runs.run_uuid)

        def answers(conn: sa.Connection) -> tuple[Any, ...]:
            job = marquez_jobs.find_job(conn, "pipelines", "job")
            assert job is not None
            return (
                marquez_jobs.job_objects(conn, [job]),
                marquez_jobs.list_job_runs(conn, job, 10, 0),
                marquez_jobs.job_versions(conn, job),
            )

        with engine.begin() as conn:
            expected, before = conn.execute(stored).all(), answers(conn)
            _to_version_5(conn)
            conn.execute(tables.schema_version.update().values(version=5))  # a new store has one stamp: LATEST
        assert migrate(engine) == LATEST
        with engine.begin() as conn:
            assert conn.execute(stored).all() == expected
            assert answers(conn) == before
            inspector = sa.inspect(conn)
            assert [c["name"] for c in inspector.get_columns("lineage_runs")] == list(tables.runs.c.keys())
            indexes = {
                i["name"]: i["column_names"] for i in inspector.get_indexes("lineage_nodes") if i["name"][:3] == "ix_"
            }
            expected_indexes = {i.name: [c.name for c in i.columns] for i in tables.nodes.indexes}
            if conn.dialect.name == "postgresql":  # an expression index, created with the table (version 13)
                expected_indexes[tables.NAME_SEARCH_INDEX] = [None]
            expected_indexes[tables.NAME_ORDER_INDEX] = ["name", "namespace", "kind"]  # created with the table (17)
            assert indexes == expected_indexes
        facets = {run: json.loads(text) if text else None for run, text, _ in expected}
        assert facets[changed]["location"]["url"] == "v2\u0000"  # NUL: read as U+FFFD only on PostgreSQL
        assert facets[documented]["documentation"]["x"] == "doc"
        assert facets[bare] is None
        assert facets[tied]["location"]["url"] == "stored last"
        versions = {run.id: run.job_version.version for run in before[1][0] if run.job_version is not None}
        assert len(set(versions.values())) == 4  # four contents, four versions
    finally:
        engine.dispose()


def _prunes_schema(conn: sa.Connection) -> tuple[object, ...]:
    inspector = sa.inspect(conn)
    columns = [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(tables.prunes.name)]
    return columns, inspector.get_pk_constraint(tables.prunes.name)["constrained_columns"]


def test_a_version_6_store_gains_the_prune_record_as_a_new_store_has_it(store_url: str) -> None:
    """Version 7 adds an empty ``lineage_prunes``, the same table a new store gets, and keeps the lineage."""
    from support.consumer_helpers import dataset, run_event

    from airflow_lineage_provider.consumer.store.operations.retention import PruneRecord, recent_prunes, record_prune
    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            new = _prunes_schema(conn)
            ingest_events(conn, [parse_event(run_event("COMPLETE", "load", outputs=[dataset("dst")]))])
            _to_version_6(conn)
            conn.execute(tables.schema_version.update().values(version=6))
        assert migrate(engine) == LATEST
        with engine.begin() as conn:
            assert _prunes_schema(conn) == new
            assert conn.execute(sa.select(sa.func.count()).select_from(tables.events)).scalar() == 1
            assert recent_prunes(conn, 5) == []
            now = datetime.now(timezone.utc)
            record = PruneRecord(now, now - timedelta(days=3), "api", events=2, runs=1, duration_seconds=0.5)
            record_prune(conn, record)
            assert recent_prunes(conn, 5) == [record]
    finally:
        engine.dispose()


def test_a_version_8_store_gets_declared_and_observed_lineage_from_its_stored_events(store_url: str) -> None:
    """Version 9 derives, from the stored events, which edges and nodes were declared (JobEvents) and which
    observed (runs): an edge only a JobEvent named is declared-only, one a run also wrote is both, the rest
    observed; nodes no run named are declared-only. The ingest then keeps both as a new store does."""
    from support.consumer_helpers import at, dataset, job_event, run_event

    from airflow_lineage_provider.consumer.store.write.ingest import ingest_events
    from airflow_lineage_provider.consumer.validation import parse_event

    events = [
        run_event("COMPLETE", "load", inputs=[dataset("src")], outputs=[dataset("dst")], time=10),
        job_event("load", [dataset("src")], [dataset("dst"), dataset("planned")], time=20),
        job_event("design_only", [dataset("dst")], [], time=30),
    ]
    engine = create_store_engine(store_url)
    try:
        migrate(engine)
        with engine.begin() as conn:
            ingest_events(conn, [parse_event(event) for event in events])
            _to_version_8(conn)
            conn.execute(tables.schema_version.update().values(version=8))
        assert migrate(engine) == LATEST
        n, e = tables.nodes, tables.edges
        origin, destination = n.alias("origin"), n.alias("destination")
        with engine.begin() as conn:
            query = (
                sa.select(origin.c.name, destination.c.name, e.c.declared_at, e.c.observed_at)
                .join_from(e, origin, origin.c.id == e.c.origin_id)
                .join(destination, destination.c.id == e.c.destination_id)
            )
            edges = {(a, b): (declared, observed) for a, b, declared, observed in conn.execute(query)}
            nodes = dict(conn.execute(sa.select(n.c.name, n.c.observed_at)).all())
            ingest_events(conn, [parse_event(run_event("COMPLETE", "load", outputs=[dataset("planned")], time=40))])
            planned = conn.execute(
                sa.select(e.c.declared_at, e.c.observed_at)
                .join_from(e, destination, destination.c.id == e.c.destination_id)
                .where(destination.c.name == "planned")
            ).one()
    finally:
        engine.dispose()
    t = {seconds: datetime.fromisoformat(at(seconds).replace("Z", "+00:00")) for seconds in (10, 20, 30, 40)}
    assert edges == {
        ("src", "load"): (t[20], t[10]),
        ("load", "dst"): (t[20], t[10]),
        ("load", "planned"): (t[20], None),
        ("dst", "design_only"): (t[30], None),
    }
    assert nodes["planned"] is None and nodes["design_only"] is None
    assert nodes["src"] is not None and nodes["load"] is not None and nodes["dst"] is not None
    assert planned == (t[20], t[40])


def test_a_time_is_sqlite_text_as_sqlalchemys_datetime_makes_it() -> None:
    """UtcDateTime's memoized SQLite bind processor stores what SQLAlchemy's own DATETIME processor would."""
    from datetime import datetime, timedelta, timezone

    from sqlalchemy import DateTime
    from sqlalchemy.dialects import sqlite

    from airflow_lineage_provider.consumer.store.schema.tables import UtcDateTime, sqlite_text

    dialect = sqlite.dialect()
    own = UtcDateTime().bind_processor(dialect)
    stock = DateTime().dialect_impl(dialect).bind_processor(dialect)
    zones = (timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8)), None)
    values = [datetime(2026, 1, 1, 0, 2, 0, 0, tzinfo=zone) for zone in zones]
    values += [datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc), datetime(9999, 12, 31, 23, 59, 59, 999999)]
    for value in values:
        expected = stock(UtcDateTime().process_bind_param(value, dialect))
        assert own(value) == sqlite_text(value) == expected, value
    assert own(None) is None
