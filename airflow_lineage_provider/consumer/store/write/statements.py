"""The ingest's write statements, built once per dialect (building them costs more than running them).

Each is an ``INSERT ... ON CONFLICT`` of the dialect's insert construct (SQLite and PostgreSQL share the
API). Conflicts keep the newest value by event time (see :mod:`.lifecycle` for runs; of a job's latest
runs at the same time, the greater run UUID), and a conflicting row whose stored values are already as new
is not rewritten.

How a batch travels differs:

* SQLite: ``RETURNING`` its key, so that SQLAlchemy sends the rows as multi-row ``VALUES``;
* PostgreSQL: ``INSERT ... SELECT FROM unnest(:column_1, :column_2, ...)``, one array per column, so a
  whole batch is one statement with a parameter per column. Per-row parameter handling was a third of
  the ingest time; times travel as ISO 8601 text and are cast to ``timestamptz[]`` by the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    LargeBinary,
    SmallInteger,
    Table,
    Text,
    and_,
    any_,
    bindparam,
    case,
    cast,
    func,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.types import TypeEngine

from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.tables import as_utc
from airflow_lineage_provider.consumer.store.write import lifecycle


@dataclass(frozen=True)
class Statement:
    """A prebuilt statement and the row keys its rows are sorted by (lock order under concurrency).

    ``columns`` is set on PostgreSQL: the statement then takes one array per column (``c_<column>``),
    with the columns named in ``times`` as ISO 8601 text.
    """

    sql: Any
    order: tuple[str, ...]
    columns: tuple[str, ...] = ()
    times: frozenset[str] = frozenset()


def column_arrays(statement: Statement, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The parameters of a PostgreSQL ``statement`` (one with ``columns``) for ``rows``: ``c_<column>`` → the
    column's values, one per row, times as ISO 8601 UTC text (what its arrays take)."""
    times = statement.times
    return {
        f"c_{name}": utc_texts(row.get(name) for row in rows) if name in times else [row.get(name) for row in rows]
        for name in statement.columns
    }


def utc_texts(values: Any) -> list[str | None]:
    """``values`` (times or ``None``) as ISO 8601 UTC text, each distinct time converted once (a batch repeats few
    times many times over: an event's time goes to its nodes, edges and groups)."""
    texts: dict[datetime, str] = {}
    out: list[str | None] = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        text = texts.get(value)
        if text is None:
            text = texts[value] = as_utc(value).isoformat()
        out.append(text)
    return out


def _array_type(column: Any) -> TypeEngine[Any]:
    if isinstance(column.type, tables.UtcDateTime):
        return postgresql.ARRAY(Text)
    if isinstance(column.type, SmallInteger):
        return postgresql.ARRAY(SmallInteger)
    if isinstance(column.type, LargeBinary):
        return postgresql.ARRAY(postgresql.BYTEA)
    if isinstance(column.type, Integer):
        return postgresql.ARRAY(BigInteger)
    return postgresql.ARRAY(Text)


def _unnested(table: Table) -> Any:
    """``INSERT INTO table (...) SELECT ... FROM unnest(:c_a, :c_b, ...) WITH ORDINALITY ORDER BY ordinality``."""
    columns = [c for c in table.columns if not (c.primary_key and c.autoincrement is True)]
    arrays = []
    for column in columns:
        array: ColumnElement[Any] = bindparam(f"c_{column.name}", type_=_array_type(column))
        if isinstance(column.type, tables.UtcDateTime):
            array = cast(array, postgresql.ARRAY(postgresql.TIMESTAMP(timezone=True)))
        arrays.append(array)
    names = [c.name for c in columns]
    rows = func.unnest(*arrays).table_valued(*names, with_ordinality="ordinality").render_derived()
    picked = select(*(rows.c[name] for name in names)).order_by(rows.c.ordinality)
    return postgresql.insert(table).from_select(names, picked)


def insert_for(dialect: str, table: Table) -> Any:
    if dialect == "postgresql":
        return _unnested(table)
    return sqlite.insert(table)


def _newest(table: Table, statement: Any, value: str, time: str) -> dict[str, Any]:
    current, incoming = table.c, statement.excluded
    wins = lifecycle.newer_sql(incoming[time], current[time])
    return {
        value: case((wins, incoming[value]), else_=current[value]),
        time: case((wins, incoming[time]), else_=current[time]),
    }


def later(incoming: Any, current: Any) -> ColumnElement[bool]:
    """SQL: the incoming nullable time is set and later than the stored one (or the stored one is NULL)."""
    return and_(incoming.is_not(None), or_(current.is_(None), incoming > current))


def _later_run(incoming: Any, current: Any, dialect: str) -> ColumnElement[bool]:
    """SQL: the incoming latest run of a job replaces the stored one (the rule of ``ingest._latest_run``).

    A later event time wins; on the same time the greater run UUID, so that which of two runs is the latest
    does not depend on which arrived last.
    """
    incoming_run, current_run = incoming.latest_run_uuid, current.latest_run_uuid
    if dialect == "postgresql":
        # Python compares the UUIDs by code point; so does "C" whatever the database's collation.
        incoming_run, current_run = incoming_run.collate("C"), current_run.collate("C")
    incoming_time, current_time = incoming.latest_run_time, current.latest_run_time
    return and_(
        incoming_time.is_not(None),
        or_(
            current_time.is_(None),
            incoming_time > current_time,
            and_(incoming_time == current_time, or_(current_run.is_(None), incoming_run > current_run)),
        ),
    )


def done(statement: Any, *order: str, returning: tuple[str, ...] = ()) -> Statement:
    """The statement ready to run, keyed (and locked) in ``order``, answering the ``returning`` columns.

    SQLite always gets ``RETURNING`` (of the first key unless ``returning`` names columns): it makes
    SQLAlchemy send the rows as multi-row ``VALUES``.
    """
    answers = [statement.table.c[name] for name in returning or order[:1]]
    if statement.select is None:
        return Statement(statement.returning(*answers), order)
    columns = tuple(statement.select.selected_columns.keys())
    times = frozenset(name for name in columns if isinstance(statement.table.c[name].type, tables.UtcDateTime))
    return Statement(statement.returning(*answers) if returning else statement, order, columns, times)


@dataclass(frozen=True)
class Statements:
    """Every write of :func:`..ingest.ingest_events`, for one dialect, but the nodes' (:mod:`.node_versions`)."""

    events: Statement
    #: The ingest log's rows (:func:`..ingest.log_events`).
    pending_events: Statement
    node_ids: Any
    datasets: Statement
    symlinks: Statement
    node_producers: Statement
    jobs: Statement
    runs: Statement
    run_io: Statement
    edges: Statement
    io_groups: Statement
    io_members: Statement
    fields: Statement
    field_ids: Any
    column_edges: Statement


def _among(column: Any, keys: BindParameter[Any], dialect: str) -> ColumnElement[bool]:
    return column == any_(keys) if dialect == "postgresql" else column.in_(keys)


@cache
def statements(dialect: str) -> Statements:
    """The statements for ``dialect`` (``sqlite`` or ``postgresql``), built on first use."""
    t = tables
    events = insert_for(dialect, t.events).on_conflict_do_nothing(index_elements=["event_key"])

    datasets = insert_for(dialect, t.datasets)
    datasets = datasets.on_conflict_do_update(
        index_elements=["node_id"],
        set_={
            **_newest(t.datasets, datasets, "fields", "schema_time"),
            **_newest(t.datasets, datasets, "facets", "facets_time"),
        },
        where=or_(
            lifecycle.newer_sql(datasets.excluded.schema_time, t.datasets.c.schema_time),
            lifecycle.newer_sql(datasets.excluded.facets_time, t.datasets.c.facets_time),
        ),
    )
    jobs = insert_for(dialect, t.jobs)
    run_wins = _later_run(jobs.excluded, t.jobs.c, dialect)
    jobs = jobs.on_conflict_do_update(
        index_elements=["node_id"],
        set_={
            **_newest(t.jobs, jobs, "facets", "facets_time"),
            "latest_run_uuid": case((run_wins, jobs.excluded.latest_run_uuid), else_=t.jobs.c.latest_run_uuid),
            "latest_run_time": case((run_wins, jobs.excluded.latest_run_time), else_=t.jobs.c.latest_run_time),
        },
        where=or_(lifecycle.newer_sql(jobs.excluded.facets_time, t.jobs.c.facets_time), run_wins),
    )
    runs = insert_for(dialect, t.runs)
    runs = runs.on_conflict_do_update(index_elements=["run_uuid"], set_=lifecycle.upsert_values(runs.excluded))
    edges = insert_for(dialect, t.edges)
    edges = edges.on_conflict_do_update(
        index_elements=["origin_id", "destination_id"],
        set_={
            "first_seen": lifecycle.earliest_sql(t.edges.c.first_seen, edges.excluded.first_seen),
            "last_seen": lifecycle.latest_sql(t.edges.c.last_seen, edges.excluded.last_seen),
            "declared_at": lifecycle.latest_sql(t.edges.c.declared_at, edges.excluded.declared_at),
            "observed_at": lifecycle.latest_sql(t.edges.c.observed_at, edges.excluded.observed_at),
        },
        where=or_(
            edges.excluded.first_seen < t.edges.c.first_seen,
            edges.excluded.last_seen > t.edges.c.last_seen,
            later(edges.excluded.declared_at, t.edges.c.declared_at),
            later(edges.excluded.observed_at, t.edges.c.observed_at),
        ),
    )
    io_groups = insert_for(dialect, t.io_groups)
    io_groups = io_groups.on_conflict_do_update(
        index_elements=["group_key"],
        set_={
            "last_seen": lifecycle.latest_sql(t.io_groups.c.last_seen, io_groups.excluded.last_seen),
            "declared_at": lifecycle.latest_sql(t.io_groups.c.declared_at, io_groups.excluded.declared_at),
            "observed_at": lifecycle.latest_sql(t.io_groups.c.observed_at, io_groups.excluded.observed_at),
        },
        where=or_(
            io_groups.excluded.last_seen > t.io_groups.c.last_seen,
            later(io_groups.excluded.declared_at, t.io_groups.c.declared_at),
            later(io_groups.excluded.observed_at, t.io_groups.c.observed_at),
        ),
    )
    column_edges = insert_for(dialect, t.column_edges)
    newer = lifecycle.newer_sql(column_edges.excluded.last_seen, t.column_edges.c.last_seen)
    column_edges = column_edges.on_conflict_do_update(
        index_elements=["source_field_id", "target_field_id"],
        set_={
            "transformation": case(
                (newer, column_edges.excluded.transformation), else_=t.column_edges.c.transformation
            ),
            "last_seen": lifecycle.latest_sql(t.column_edges.c.last_seen, column_edges.excluded.last_seen),
            "declared_at": lifecycle.latest_sql(t.column_edges.c.declared_at, column_edges.excluded.declared_at),
            "observed_at": lifecycle.latest_sql(t.column_edges.c.observed_at, column_edges.excluded.observed_at),
        },
    )
    # The keys as one array on PostgreSQL (``= ANY(:keys)``: one statement text whatever their number, which the
    # server prepares once), an expanded IN list on SQLite.
    keys: BindParameter[Any] = bindparam("keys", expanding=True)
    if dialect == "postgresql":
        keys = bindparam("keys", type_=postgresql.ARRAY(Text))
    return Statements(
        events=done(events, "event_key", returning=("event_key",)),
        pending_events=done(insert_for(dialect, t.pending_events), "event_key"),
        node_ids=select(t.nodes.c.node_key, t.nodes.c.id).where(_among(t.nodes.c.node_key, keys, dialect)),
        datasets=done(datasets, "node_id"),
        # Answers the claims it inserted: their datasets' groups may change (see ..identity).
        symlinks=done(
            insert_for(dialect, t.symlinks).on_conflict_do_nothing(),
            "dataset_id",
            "symlink_key",
            returning=("dataset_id",),
        ),
        node_producers=done(insert_for(dialect, t.node_producers).on_conflict_do_nothing(), "node_id", "producer_key"),
        jobs=done(jobs, "node_id"),
        runs=done(runs, "run_uuid"),
        run_io=done(insert_for(dialect, t.run_io).on_conflict_do_nothing(), "run_uuid", "dataset_id", "direction"),
        edges=done(edges, "origin_id", "destination_id"),
        # Answers the groups it inserted or moved on, with their ids; one it skipped (stored before, as
        # recent) has its members already, as they follow from its key.
        io_groups=done(io_groups, "group_key", returning=("group_key", "id")),
        io_members=done(
            insert_for(dialect, t.io_members).on_conflict_do_nothing(), "group_id", "direction", "dataset_id"
        ),
        fields=done(insert_for(dialect, t.fields).on_conflict_do_nothing(index_elements=["field_key"]), "field_key"),
        field_ids=select(t.fields.c.field_key, t.fields.c.id).where(_among(t.fields.c.field_key, keys, dialect)),
        column_edges=done(column_edges, "source_field_id", "target_field_id"),
    )
