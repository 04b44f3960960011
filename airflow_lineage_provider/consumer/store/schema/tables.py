"""The lineage store's tables, declared once for SQLite and PostgreSQL (SQLAlchemy Core).

Graph vertices (jobs and datasets) share one id space in ``lineage_nodes`` so that a walk is one
recursive query over one edge table, ``lineage_edges`` (input dataset → job → output dataset). Names and
namespaces are unbounded text; uniqueness goes through a SHA-1 ``*_key`` column, because PostgreSQL
cannot index arbitrarily long text. Times are stored in UTC.

References between tables (``node_id``, ``job_id``, ``dataset_id``, ``group_id``, ``*_field_id``,
``run_uuid``) are kept by the one writer, :func:`..ingest.ingest_events`, which writes a node, field or io
group before anything that points at it, in the same transaction, and deletes one only when nothing points at
it any more (what a replaced declaration alone named, see :mod:`.declarations`); retention deletes a run's
inputs/outputs with the run. They are not declared as foreign keys: on PostgreSQL each declared key runs a
check and takes a row lock on the node for every edge row written, and SQLite does not enforce them unless
asked (``tests/test_consumer_integrity.py`` checks the references instead).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    event,
)
from sqlalchemy.types import TypeDecorator

log = logging.getLogger(__name__)

#: Primary keys: BIGINT on PostgreSQL, INTEGER (the rowid alias) on SQLite.
Id = BigInteger().with_variant(Integer(), "sqlite")
#: Characters of ``lineage_pending_events.logged_by`` kept (:func:`logged_by`).
LOGGED_BY_CHARS = 64


def logged_by(principal: str) -> str:
    """What the ingest log keeps of the principal that logged an event: its name cut to :data:`LOGGED_BY_CHARS`
    (two names alike that far only make a read wait for the other's events as well)."""
    return principal[:LOGGED_BY_CHARS]


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC ``datetime`` (a naive one is read as UTC)."""
    return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)


@lru_cache(maxsize=4096)
def sqlite_text(value: datetime) -> str:
    """``value`` as :class:`UtcDateTime` stores it on SQLite: naive UTC text, ``2026-01-01 00:02:00.000000`` (what
    SQLAlchemy's SQLite ``DATETIME`` makes of :meth:`UtcDateTime.process_bind_param`'s value;
    ``tests/test_consumer_store.py`` holds the two equal)."""
    return as_utc(value).replace(tzinfo=None).isoformat(" ", "microseconds")


def _sqlite_text_or_none(value: datetime | None) -> str | None:
    return None if value is None else sqlite_text(value)


class UtcDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and read back as an aware ``datetime`` on every database."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        value = as_utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def bind_processor(self, dialect: Any) -> Any:
        """On SQLite, the text SQLAlchemy's ``DATETIME`` stores for :meth:`process_bind_param`'s value, memoized
        (:func:`sqlite_text`: an ingest binds a few times many times over); elsewhere SQLAlchemy's own."""
        if dialect.name == "sqlite":
            return _sqlite_text_or_none
        return super().bind_processor(dialect)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


metadata = MetaData()

#: A row per schema version the store reached, with when. The revision itself is Alembic's, in
#: ``lineage_alembic_version`` (see :mod:`.migrations`); releases from before Alembic read this table.
schema_version = Table(
    "lineage_schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", UtcDateTime, nullable=False),
)

#: Every distinct event received, keyed by a content hash: its canonical JSON text in ``payload``, or, once the
#: store has a payload dictionary, that text packed (``packed``: deflate with the dictionary ``dictionary_id`` of
#: :data:`payload_dictionaries` preset, ``payload`` then ``''``). ``size`` is the text's length and ``namespaces``
#: the namespaces it names anywhere (a JSON array, see :func:`..validation.named_namespaces`): what reads filter
#: and size by without reading the text. Events stored before version 18 have neither (:mod:`.payloads`).
events = Table(
    "lineage_events",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("event_key", String(64), nullable=False, unique=True),
    Column("kind", String(8), nullable=False),
    Column("event_type", String(16)),
    Column("event_time", UtcDateTime, nullable=False),
    Column("run_uuid", String(36)),
    Column("job_namespace", Text),
    Column("job_name", Text),
    Column("producer", Text),
    Column("received_at", UtcDateTime, nullable=False),
    Column("payload", Text, nullable=False),
    Column("packed", LargeBinary),
    Column("dictionary_id", BigInteger),
    Column("size", Integer),
    Column("namespaces", Text),
    Index("ix_lineage_events_event_time", "event_time"),
    Index("ix_lineage_events_run_uuid", "run_uuid"),
)

#: Raw events stored but not applied to the graph yet, in the order they were logged (``seq``): the ingest log of
#: a store that applies events after answering (``ingest_apply = deferred``, see ..deferred_apply). A row goes in
#: the transaction that stores its event and out in the one that applies it, so what is committed here is what
#: the graph still owes. ``logged_by`` names who posted it (:attr:`..access.Principal.log_name`; None: logged by
#: no request, e.g. requeued): a read of the API waits for what its own principal logged before it began, and
#: for others' events only while few are pending (read-your-writes per principal, see ..deferred_apply).
pending_events = Table(
    "lineage_pending_events",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),
    Column("event_key", String(64), nullable=False, unique=True),
    Column("logged_by", String(LOGGED_BY_CHARS)),
    Index("ix_lineage_pending_events_logged_by", "logged_by", "seq"),
)

#: Logged events the graph could not take (the database refused a value of theirs when applied alone, or the apply
#: failed on them): kept with the reason, counted by ``GET /api/v1/retention``, listed and requeued by
#: ``/api/v1/ingest-log/unapplied`` (:mod:`..unapplied`). Their raw event stays in ``lineage_events``.
unapplied_events = Table(
    "lineage_unapplied_events",
    metadata,
    Column("event_key", String(64), primary_key=True),
    Column("failed_at", UtcDateTime, nullable=False),
    Column("reason", Text, nullable=False),
)

#: Jobs and datasets: the vertices of the lineage graph.
nodes = Table(
    "lineage_nodes",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("node_key", String(40), nullable=False, unique=True),
    Column("kind", String(8), nullable=False),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # Counts the ingests that named the node: anything a graph answer shows about a node changes only
    # with an event naming it, so (id, version) keys a cached graph card (see ..graph_cards).
    Column("version", BigInteger, nullable=False, server_default="1"),
    # The latest event time of a static event (a JobEvent or DatasetEvent: lineage *declared*, no run) and of a
    # RunEvent (lineage *observed*) naming the node; a node no RunEvent named (``observed_at`` NULL) exists only by
    # declaration. Both change only with an event naming the node, which bumps ``version``.
    Column("declared_at", UtcDateTime),
    Column("observed_at", UtcDateTime),
    # Namespaces (a loose scan of its first two columns) and pages of jobs or datasets in name order.
    Index("ix_lineage_nodes_kind_namespace_name", "kind", "namespace", "name"),
)

#: One row per namespace of the jobs and datasets, kept by the writer (:mod:`..write.namespaces`): what a listing
#: of namespaces reads instead of grouping every node. ``created_at`` is the earliest of its nodes'; ``updated_at``
#: the latest of its nodes', raised only when it moves on by more than :data:`.write.namespaces.UPDATED_PRECISION`.
namespaces = Table(
    "lineage_namespaces",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

#: How many nodes of each kind each namespace holds, kept by triggers on ``lineage_nodes`` (:mod:`.node_counts`):
#: the total of a listing without reading every node. PostgreSQL: a row per writer connection's ``shard``, summed.
node_counts = Table(
    "lineage_node_counts",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("kind", String(8), primary_key=True),
    Column("shard", SmallInteger, primary_key=True, autoincrement=False),
    Column("nodes", BigInteger, nullable=False),
)


@event.listens_for(metadata, "after_create")
def _node_count_triggers(target: MetaData, conn: Connection, **_: Any) -> None:
    from airflow_lineage_provider.consumer.store.schema.node_counts import create_triggers  # it builds on this

    create_triggers(conn)


#: Search by name on PostgreSQL: a GIN index of ``lower(name)`` with pg_trgm's trigram operators serves
#: ``lower(name) LIKE lower('%text%')`` (Marquez's ILIKE) without reading every node.
NAME_SEARCH_INDEX = "ix_lineage_nodes_name_trgm"
_TRIGRAM_SCHEMA = (
    "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm'"
)


#: Where pg_trgm is created when missing: ``public``, where extensions usually live, else (a database without a
#: ``public`` schema) the store's own, the first of its search path.
_CREATE_TRIGRAM = ("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public", "CREATE EXTENSION IF NOT EXISTS pg_trgm")


def trigram_schema(conn: Connection) -> str | None:
    """The schema holding pg_trgm's operators, creating the extension when it is missing and can be; None, with a
    warning, when it cannot (search then reads every name)."""
    found = conn.exec_driver_sql(_TRIGRAM_SCHEMA).scalar()
    refusal: Exception | None = None
    for statement in _CREATE_TRIGRAM if found is None else ():
        try:
            with conn.begin_nested():  # a refusal leaves the caller's transaction usable
                conn.exec_driver_sql(statement)
        except Exception as error:  # no privilege, extension not shipped, no such schema
            refusal = error
        # created, or by another process meanwhile
        if (found := conn.exec_driver_sql(_TRIGRAM_SCHEMA).scalar()) is not None:
            break
    if found is None:
        log.warning("lineage store: no trigram index for search (pg_trgm could not be created: %s)", refusal)
        return None
    return str(found)


@event.listens_for(nodes, "after_create")
def _name_search_index(target: Table, conn: Connection, **_: Any) -> None:
    if conn.dialect.name != "postgresql" or (schema := trigram_schema(conn)) is None:
        return
    quoted = '"' + schema.replace('"', '""') + '"'
    conn.exec_driver_sql(
        f"CREATE INDEX {NAME_SEARCH_INDEX} ON {target.name} USING gin (lower(name) {quoted}.gin_trgm_ops)"
    )


#: Search's pages in name order: names (then namespace and kind) in code point order, with each node's id, so that a
#: page of a term matching many names is read in order and stops after the page, from the index alone (the node
#: rows are read for the page only). Code point order is PostgreSQL's "C" collation and SQLite's default.
NAME_ORDER_INDEX = "ix_lineage_nodes_name_order"
NAME_ORDER_COLUMNS = {
    "postgresql": '(name COLLATE "C", namespace COLLATE "C", kind) INCLUDE (id)',
    "sqlite": "(name, namespace, kind)",  # an index of SQLite holds the rowid, which is the id
}


@event.listens_for(nodes, "after_create")
def _name_order_index(target: Table, conn: Connection, **_: Any) -> None:
    conn.exec_driver_sql(f"CREATE INDEX {NAME_ORDER_INDEX} ON {target.name} {NAME_ORDER_COLUMNS[conn.dialect.name]}")


#: Per-dataset state: the latest schema (by event time) and the latest facets.
datasets = Table(
    "lineage_datasets",
    metadata,
    Column("node_id", Id, primary_key=True, autoincrement=False),
    Column("fields", Text),
    Column("schema_time", UtcDateTime),
    Column("facets", Text),
    Column("facets_time", UtcDateTime),
)

#: Per-job state: the latest facets and the latest run (by event time).
jobs = Table(
    "lineage_jobs",
    metadata,
    Column("node_id", Id, primary_key=True, autoincrement=False),
    Column("facets", Text),
    Column("facets_time", UtcDateTime),
    Column("latest_run_uuid", String(36)),
    Column("latest_run_time", UtcDateTime),
)

#: One row per run; state follows the lifecycle and event times, never arrival order.
runs = Table(
    "lineage_runs",
    metadata,
    Column("run_uuid", String(36), primary_key=True),
    Column("job_id", Id, nullable=False),
    Column("state", String(16), nullable=False),
    Column("state_rank", SmallInteger, nullable=False),
    Column("state_time", UtcDateTime, nullable=False),
    Column("started_at", UtcDateTime),
    Column("ended_at", UtcDateTime),
    Column("nominal_start_time", UtcDateTime),
    Column("nominal_end_time", UtcDateTime),
    Column("parent_run_uuid", String(36)),
    Column("facets", Text),
    Column("facets_time", UtcDateTime),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # The job facets of the run's latest event that carried some (JSON text, sorted keys), with that event's
    # time: half of the run's job version (see ..marquez_runs), kept so that no read parses raw events.
    Column("job_facets", Text),
    Column("job_facets_time", UtcDateTime),
    Index("ix_lineage_runs_job", "job_id", "created_at"),
    Index("ix_lineage_runs_updated_at", "updated_at"),
)

#: Datasets each run read (``input``) and wrote (``output``).
run_io = Table(
    "lineage_run_io",
    metadata,
    Column("run_uuid", String(36), primary_key=True),
    Column("dataset_id", Id, primary_key=True),
    Column("direction", String(6), primary_key=True),
)

#: The job↔dataset graph: input dataset → job and job → output dataset, with when each was last seen, the event
#: time of the job's declaration naming it (:data:`job_declarations`; NULL: the declaration does not) and the
#: latest event time of a RunEvent that *observed* it (NULL: never). An edge with neither is deleted.
edges = Table(
    "lineage_edges",
    metadata,
    Column("origin_id", Id, primary_key=True),
    Column("destination_id", Id, primary_key=True),
    Column("first_seen", UtcDateTime, nullable=False),
    Column("last_seen", UtcDateTime, nullable=False),
    Column("declared_at", UtcDateTime),
    Column("observed_at", UtcDateTime),
    Index("ix_lineage_edges_destination", "destination_id", "origin_id"),
)

#: The declared edges (a JobEvent named them), with whether a run observed them too: what a graph answer reads to
#: flag its edges without reading every edge row (see ..subgraph), and what drift starts from. Empty in a store
#: that never received a JobEvent.
Index(
    "ix_lineage_edges_declared",
    edges.c.origin_id,
    edges.c.destination_id,
    edges.c.observed_at,
    sqlite_where=edges.c.declared_at.is_not(None),
    postgresql_where=edges.c.declared_at.is_not(None),
)

#: Table lineage (source dataset → target dataset through a job), one row per io group: a distinct
#: (job, input set, output set) of the events seen. A source→target pair through a job exists iff one
#: group of the job lists the source as input and the target as output; storing the groups rather than
#: every pair keeps an event's rows linear in its inputs + outputs (an event reading and writing 2,000
#: datasets each would be 4,000,000 pairs). ``group_key``: SHA-1 of the job's and the sorted datasets' node
#: keys (see :func:`..ingest.io_group_key`); ``last_seen``: the latest event time of the group's events.
io_groups = Table(
    "lineage_io_groups",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("group_key", String(40), nullable=False, unique=True),
    Column("job_id", Id, nullable=False),
    Column("last_seen", UtcDateTime, nullable=False),
    # As on edges: the event time of the job's declaration (see :data:`job_declarations`) holding the group, and
    # the latest event time of a RunEvent with it (NULL: never). A group with neither is deleted.
    Column("declared_at", UtcDateTime),
    Column("observed_at", UtcDateTime),
    Index("ix_lineage_io_groups_job", "job_id"),
)

#: Each job's declaration: its latest JobEvent by event time (the greater event key on a tie), whatever order
#: JobEvents arrive in. The edges, io groups and column-lineage links that JobEvent named are the job's declared
#: lineage; what an earlier JobEvent named and the latest does not is no longer declared (see
#: :mod:`..declarations`). ``empty``: the JobEvent named no datasets (a retired job): the job has no declaration.
job_declarations = Table(
    "lineage_job_declarations",
    metadata,
    Column("job_id", Id, primary_key=True, autoincrement=False),
    Column("declared_at", UtcDateTime, nullable=False),
    Column("event_key", String(64), nullable=False),
    Column("empty", SmallInteger, nullable=False),
)

#: The column-lineage links each job's declaration names (a column edge is declared while one holds it).
declared_column_links = Table(
    "lineage_declared_column_links",
    metadata,
    Column("job_id", Id, primary_key=True),
    Column("source_field_id", Id, primary_key=True),
    Column("target_field_id", Id, primary_key=True),
    Index("ix_lineage_declared_column_links_edge", "source_field_id", "target_field_id"),
)

#: The datasets of each io group, as ``input`` or ``output``. A walk steps dataset → its memberships in
#: one direction (the index) → their groups → the groups' members in the other direction (the key).
io_members = Table(
    "lineage_io_members",
    metadata,
    Column("group_id", Id, primary_key=True),
    Column("direction", String(6), primary_key=True),
    Column("dataset_id", Id, primary_key=True),
    Index("ix_lineage_io_members_dataset", "dataset_id", "direction", "group_id"),
)

#: Dataset fields (columns) that take part in column lineage.
fields = Table(
    "lineage_fields",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("field_key", String(40), nullable=False, unique=True),
    Column("dataset_id", Id, nullable=False),
    Column("name", Text, nullable=False),
    Index("ix_lineage_fields_dataset", "dataset_id"),
)

#: Column lineage from ``columnLineage`` facets: source field → target field.
column_edges = Table(
    "lineage_column_edges",
    metadata,
    Column("source_field_id", Id, primary_key=True),
    Column("target_field_id", Id, primary_key=True),
    Column("transformation", Text),
    Column("last_seen", UtcDateTime, nullable=False),
    # The latest event time of a static event declaring the link (while a declaration holds it, see
    # :data:`declared_column_links`) and of a RunEvent observing it (NULL: never).
    Column("declared_at", UtcDateTime),
    Column("observed_at", UtcDateTime),
    Index("ix_lineage_column_edges_target", "target_field_id", "source_field_id"),
)

#: Other names a dataset claims: each identifier of its ``symlinks`` facets (``via`` ``symlink``) and the name
#: under its ``dataSource`` facet's URI (``via`` ``dataSource``), with the producer that said it first.
#: ``alias_key`` is the node key the name would have as a dataset (:func:`..ingest.node_key`), so a claim finds
#: the dataset of that name whenever it is stored, before or after the claim (see ..identity).
symlinks = Table(
    "lineage_symlinks",
    metadata,
    Column("dataset_id", Id, primary_key=True),
    Column("symlink_key", String(40), primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("type", Text),
    Column("alias_key", String(40)),
    Column("via", String(10), nullable=False, server_default="symlink"),
    Column("producer", Text),
    Index("ix_lineage_symlinks_alias", "alias_key", "dataset_id"),
)

#: The producers whose events named each node by its own name (``producer_key``: SHA-1 of the producer URI).
node_producers = Table(
    "lineage_node_producers",
    metadata,
    Column("node_id", Id, primary_key=True),
    Column("producer_key", String(40), primary_key=True),
    Column("producer", Text, nullable=False),
    Column("first_seen", UtcDateTime, nullable=False),
)

#: Datasets known under several names, one group per dataset (see ..identity): a row ``(node, member)`` for
#: every two nodes of a group (itself included), and the group's ``canonical_id``. A dataset known under one
#: name has no row. Derived from ``lineage_symlinks`` and the configured namespace aliases, rewritten whenever
#: a group changes; never an event.
dataset_members = Table(
    "lineage_dataset_members",
    metadata,
    Column("node_id", Id, primary_key=True),
    Column("member_id", Id, primary_key=True),
    Column("canonical_id", Id, nullable=False),
    Index("ix_lineage_dataset_members_canonical", "canonical_id"),
)

#: Declared datasets whose name is a template (a JobEvent's ``airflowLineageProvider_templatedName`` facet, as
#: ``totals_{{ ds_nodash }}``): the regular expressions its renderings match (``namespace_regex`` NULL: the
#: namespace is the pattern node's own). Written by the ingest from the facet's ``nameTemplate``, never from the
#: event's own regex (see ..templated_names).
name_patterns = Table(
    "lineage_name_patterns",
    metadata,
    Column("node_id", Id, primary_key=True, autoincrement=False),
    Column("name_regex", Text, nullable=False),
    Column("namespace_regex", Text),
)

#: Which datasets render which pattern: a job that declared an edge to the pattern was observed with an edge to
#: the dataset, in the same direction, and the dataset's name matches the pattern (see ..templated_names).
pattern_renderings = Table(
    "lineage_pattern_renderings",
    metadata,
    Column("pattern_id", Id, primary_key=True),
    Column("dataset_id", Id, primary_key=True),
    Index("ix_lineage_pattern_renderings_dataset", "dataset_id", "pattern_id"),
)

#: The setting the ingest writes once the store holds a templated declared name (:data:`name_patterns`): until
#: then an ingest does not look for renderings.
TEMPLATED_NAMES = "templated_names"

#: The setting the ingest writes once the store holds declared lineage (a JobEvent or DatasetEvent was stored):
#: until then graph answers read every edge as observed without looking (see ..subgraph).
DECLARED_LINEAGE = "declared_lineage"

#: Settings the store's derived tables were computed with (``namespace_aliases``: the mapping, as JSON).
#: The dictionaries raw events are packed with (:mod:`.payloads`): text common to a store's events, preset in
#: deflate so that each event's packed form holds little more than what is its own. ``id`` is derived from the body
#: (the same dictionary has the same id in every store); a dictionary is never changed or removed while events use it.
payload_dictionaries = Table(
    "lineage_payload_dictionaries",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("body", LargeBinary, nullable=False),
)

store_settings = Table(
    "lineage_store_settings",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)


#: Tags (Marquez's ``Tag``): a name and an optional description. Created by ``PUT /api/v1/tags/{tag}`` or on
#: first use by a tag write on a dataset, field or job.
tags = Table(
    "lineage_tags",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("description", Text),
    Column("created_at", UtcDateTime, nullable=False),
)

#: Tags put on a node (a job or dataset; ``field_key`` empty) or on a field of a dataset (``field_key``: the
#: SHA-1 of the dataset id and field name, as ``lineage_fields``; ``field`` the name). Written only by the
#: tag endpoints, never by the ingest.
node_tags = Table(
    "lineage_node_tags",
    metadata,
    Column("node_id", Id, primary_key=True),
    Column("field_key", String(40), primary_key=True),
    Column("tag", String(255), primary_key=True),
    Column("field", Text),
    Column("tagged_at", UtcDateTime, nullable=False),
    Index("ix_lineage_node_tags_tag", "tag"),
)

#: One row per retention prune, whoever ran it (``triggered_by``: ``timer``, ``api`` or ``ingest``): when, the
#: cut-off, how many events and runs went and how long it took (microseconds). Kept in the store, not in a
#: process, so ``GET /api/v1/retention`` answers the same in every process and after a restart; only the
#: latest rows are kept (see :func:`..retention.record_prune`).
prunes = Table(
    "lineage_prunes",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("pruned_at", UtcDateTime, nullable=False),
    Column("cutoff", UtcDateTime, nullable=False),
    Column("triggered_by", String(8), nullable=False),
    Column("events", BigInteger, nullable=False),
    Column("runs", BigInteger, nullable=False),
    Column("duration_us", BigInteger, nullable=False),
)
