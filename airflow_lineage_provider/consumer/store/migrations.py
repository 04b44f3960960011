"""Schema versions of the lineage store, from the first release on.

A new store is created from :mod:`.tables` (which always describes the latest version) and stamped
with :data:`LATEST`. An existing store is brought forward by running, in order, every migration newer
than its recorded version. A migration is explicit DDL written against the previous version, so it
stays correct after ``tables.py`` moves on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, case, func, inspect, null, select, text

from airflow_lineage_provider.consumer.store import tables, templated_names
from airflow_lineage_provider.consumer.store.identity import regroup_everything
from airflow_lineage_provider.consumer.store.ingest import _Changes, io_group_key, node_key
from airflow_lineage_provider.consumer.store.json_paths import json_member, member_value
from airflow_lineage_provider.consumer.store.store_settings import new_store_id, write_setting
from airflow_lineage_provider.consumer.validation import EventError, parse_event

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


_IO_TABLES = """
CREATE TABLE lineage_io_groups (
    id {serial} NOT NULL,
    group_key VARCHAR(40) NOT NULL,
    job_id {bigint} NOT NULL,
    last_seen {timestamp} NOT NULL,
    PRIMARY KEY (id),
    UNIQUE (group_key)
);
CREATE TABLE lineage_io_members (
    group_id {bigint} NOT NULL,
    direction VARCHAR(6) NOT NULL,
    dataset_id {bigint} NOT NULL,
    PRIMARY KEY (group_id, direction, dataset_id)
);
CREATE INDEX ix_lineage_io_members_dataset ON lineage_io_members (dataset_id, direction, group_id)
"""

#: Version 3's table lineage with the node keys of each pair, a page at a time in key order after the last
#: key of the page before.
_V3_PAIRS = """
SELECT e.source_id, e.target_id, e.job_id, e.last_seen, s.node_key, t.node_key, j.node_key
FROM lineage_dataset_edges e
JOIN lineage_nodes s ON s.id = e.source_id
JOIN lineage_nodes t ON t.id = e.target_id
JOIN lineage_nodes j ON j.id = e.job_id
WHERE (e.source_id, e.target_id, e.job_id) > (:source, :target, :job)
ORDER BY e.source_id, e.target_id, e.job_id
LIMIT 5000
"""


def _io_groups(conn: Connection) -> None:
    """Version 4: table lineage as io groups instead of every source → target pair (see :mod:`.tables`).

    Each ``lineage_dataset_edges`` row becomes a group of its job with its source as the one input and its
    target as the one output, with its ``last_seen`` and the key the ingest gives that group (so a later
    event of the job reading and writing just those datasets updates it); then the table is dropped. Every
    pair, its time and so every walk stay as they were (a row pointing at no node, which the writer never
    leaves, is dropped). Rows are read a page at a time: memory stays flat whatever the store's size.
    """
    postgres = conn.dialect.name == "postgresql"
    types = ("BIGSERIAL", "BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "INTEGER", "DATETIME")
    for ddl in _IO_TABLES.format(serial=types[0], bigint=types[1], timestamp=types[2]).split(";"):
        conn.exec_driver_sql(ddl)
    add_group = text("INSERT INTO lineage_io_groups (id, group_key, job_id, last_seen) VALUES (:id, :key, :job, :seen)")
    add_member = text("INSERT INTO lineage_io_members (group_id, direction, dataset_id) VALUES (:id, :way, :dataset)")
    group_id, after = 0, {"source": 0, "target": 0, "job": 0}  # node ids start at 1
    while pairs := conn.execute(text(_V3_PAIRS), after).all():
        groups, members = [], []
        for source, target, job, seen, source_key, target_key, job_key in pairs:
            group_id += 1
            groups.append(
                {"id": group_id, "key": io_group_key(job_key, [source_key], [target_key]), "job": job, "seen": seen}
            )
            members += [
                {"id": group_id, "way": "input", "dataset": source},
                {"id": group_id, "way": "output", "dataset": target},
            ]
        conn.execute(add_group, groups)
        conn.execute(add_member, members)
        after = {"source": pairs[-1][0], "target": pairs[-1][1], "job": pairs[-1][2]}
    if postgres:  # the ids above were given explicitly: the sequence continues after them
        conn.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('lineage_io_groups', 'id'), {group_id + 1}, false)")
    conn.exec_driver_sql("DROP TABLE lineage_dataset_edges")


_TAG_TABLES = """
CREATE TABLE lineage_tags (
    name VARCHAR(255) NOT NULL,
    description TEXT,
    created_at {timestamp} NOT NULL,
    PRIMARY KEY (name)
);
CREATE TABLE lineage_node_tags (
    node_id {bigint} NOT NULL,
    field_key VARCHAR(40) NOT NULL,
    tag VARCHAR(255) NOT NULL,
    field TEXT,
    tagged_at {timestamp} NOT NULL,
    PRIMARY KEY (node_id, field_key, tag)
);
CREATE INDEX ix_lineage_node_tags_tag ON lineage_node_tags (tag)
"""


def _tags(conn: Connection) -> None:
    """Version 5: tags on jobs, datasets and dataset fields (Marquez's tag API), empty at first."""
    postgres = conn.dialect.name == "postgresql"
    bigint, timestamp = ("BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    for ddl in _TAG_TABLES.format(bigint=bigint, timestamp=timestamp).split(";"):
        conn.exec_driver_sql(ddl)


#: Runs a page at a time, in run id order after the last one of the page before.
_V5_RUNS = "SELECT run_uuid FROM lineage_runs WHERE run_uuid > :after ORDER BY run_uuid LIMIT 1000"


def _run_job_facets(conn: Connection) -> None:
    """Version 6: ``lineage_runs.job_facets`` (and its time), so a job version is read without parsing events;
    the index on nodes' kind and namespace gains the name, so a page of jobs or datasets is read in order.

    Each run gets the job facets of its latest event that carried some (by event time, then by the order
    stored), as the ingest keeps them from now on, read from the stored events a page of runs at a time.
    """
    postgres = conn.dialect.name == "postgresql"
    timestamp = "TIMESTAMP WITH TIME ZONE" if postgres else "DATETIME"
    conn.exec_driver_sql("CREATE INDEX ix_lineage_nodes_kind_namespace_name ON lineage_nodes (kind, namespace, name)")
    conn.exec_driver_sql("DROP INDEX ix_lineage_nodes_kind_namespace")
    conn.exec_driver_sql("ALTER TABLE lineage_runs ADD COLUMN job_facets TEXT")
    conn.exec_driver_sql(f"ALTER TABLE lineage_runs ADD COLUMN job_facets_time {timestamp}")
    e, r = tables.events.c, tables.runs.c
    member = json_member(e.payload, ("job", "facets"), conn.dialect.name)
    holds_nul = e.payload.contains("\\u0000", autoescape=True)
    set_facets = (
        tables.runs.update()
        .where(r.run_uuid == bindparam("b_run"))
        .values(job_facets=bindparam("b_facets"), job_facets_time=bindparam("b_at"))
    )
    after = ""
    while runs := conn.execute(text(_V5_RUNS), {"after": after}).scalars().all():
        after = runs[-1]
        query = (
            select(e.run_uuid, e.event_time, member.label("facets"), case((holds_nul, e.payload)).label("payload"))
            .where(e.run_uuid.in_(runs))
            .order_by(e.run_uuid, e.event_time, e.id)
        )
        latest: dict[str, tuple[str, datetime]] = {}
        for run_uuid, event_time, facets_text, payload in conn.execute(query):
            # PostgreSQL reads a \u0000 escape as U+FFFD: an event holding one is read whole, as it said it.
            facets = member_value(facets_text) if payload is None else json.loads(payload).get("job", {}).get("facets")
            if isinstance(facets, dict) and facets:
                latest[run_uuid] = (json.dumps(facets, sort_keys=True), event_time)
        if latest:
            rows = [{"b_run": run, "b_facets": facets, "b_at": at} for run, (facets, at) in latest.items()]
            conn.execute(set_facets, rows)


_PRUNES_TABLE = """
CREATE TABLE lineage_prunes (
    id {serial} NOT NULL,
    pruned_at {timestamp} NOT NULL,
    cutoff {timestamp} NOT NULL,
    triggered_by VARCHAR(8) NOT NULL,
    events BIGINT NOT NULL,
    runs BIGINT NOT NULL,
    duration_us BIGINT NOT NULL,
    PRIMARY KEY (id)
)
"""


def _prunes(conn: Connection) -> None:
    """Version 7: ``lineage_prunes``, a row per retention prune (what ``GET /api/v1/retention`` reports), empty."""
    postgres = conn.dialect.name == "postgresql"
    serial, timestamp = ("BIGSERIAL", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    conn.exec_driver_sql(_PRUNES_TABLE.format(serial=serial, timestamp=timestamp))


_IDENTITY_TABLES = """
CREATE INDEX ix_lineage_symlinks_alias ON lineage_symlinks (alias_key, dataset_id);
CREATE TABLE lineage_node_producers (
    node_id {bigint} NOT NULL,
    producer_key VARCHAR(40) NOT NULL,
    producer TEXT NOT NULL,
    first_seen {timestamp} NOT NULL,
    PRIMARY KEY (node_id, producer_key)
);
CREATE TABLE lineage_dataset_members (
    node_id {bigint} NOT NULL,
    member_id {bigint} NOT NULL,
    canonical_id {bigint} NOT NULL,
    PRIMARY KEY (node_id, member_id)
);
CREATE INDEX ix_lineage_dataset_members_canonical ON lineage_dataset_members (canonical_id);
CREATE TABLE lineage_store_settings (
    name VARCHAR(64) NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (name)
)
"""

#: Version 7's symlinks a page at a time, in key order after the last one of the page before.
_V7_SYMLINKS = (
    "SELECT dataset_id, symlink_key, namespace, name FROM lineage_symlinks"
    " WHERE dataset_id > :after_id OR (dataset_id = :after_id AND symlink_key > :after_key)"
    " ORDER BY dataset_id, symlink_key LIMIT 1000"
)


def _dataset_identity(conn: Connection) -> None:
    """Version 8: one dataset under several names. Symlinks gain the key of the dataset they name, how the
    name was claimed and by which producer; the producers of each node, the groups of datasets known under
    several names, and the store's settings (its id, the namespace aliases) get tables. Existing symlinks are keyed and
    grouped (without namespace aliases, which the consumer applies when it opens the store)."""
    postgres = conn.dialect.name == "postgresql"
    bigint, timestamp = ("BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN alias_key VARCHAR(40)")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN via VARCHAR(10) DEFAULT 'symlink' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN producer TEXT")
    for ddl in _IDENTITY_TABLES.format(bigint=bigint, timestamp=timestamp).split(";"):
        conn.exec_driver_sql(ddl)
    s = tables.symlinks.c
    keyed = (
        tables.symlinks.update()
        .where(s.dataset_id == bindparam("b_id"), s.symlink_key == bindparam("b_key"))
        .values(alias_key=bindparam("b_alias"))
    )
    after_id, after_key = -1, ""
    while rows := conn.execute(text(_V7_SYMLINKS), {"after_id": after_id, "after_key": after_key}).all():
        after_id, after_key = rows[-1][0], rows[-1][1]
        updates = [{"b_id": d, "b_key": k, "b_alias": node_key("dataset", ns, n)} for d, k, ns, n in rows]
        conn.execute(keyed, updates)
    new_store_id(conn)
    regroup_everything(conn)


#: Version 8's static events (JobEvents and DatasetEvents) a page at a time, in id order after the page before.
_V8_STATIC_EVENTS = (
    "SELECT id, payload FROM lineage_events WHERE kind IN ('job', 'dataset') AND id > :after ORDER BY id LIMIT 1000"
)
#: When runs last observed each dataset and each (job, dataset, direction): the latest state time of a run.
_V8_DATASET_RUNS = (
    "SELECT io.dataset_id, max(r.state_time) FROM lineage_run_io io"
    " JOIN lineage_runs r ON r.run_uuid = io.run_uuid GROUP BY io.dataset_id"
)
_V8_EDGE_RUNS = (
    "SELECT r.job_id, io.dataset_id, io.direction, max(r.state_time) FROM lineage_run_io io"
    " JOIN lineage_runs r ON r.run_uuid = io.run_uuid GROUP BY r.job_id, io.dataset_id, io.direction"
)
_V8_JOB_RUNS = "SELECT job_id, max(state_time) FROM lineage_runs GROUP BY job_id"


def _static_spans(conn: Connection) -> tuple[dict[str, tuple[datetime, datetime]], dict[tuple[str, str], Any]]:
    """``node key → (first, last)`` and ``(origin key, destination key) → (first, last)`` event times of what the
    stored static events (JobEvents, DatasetEvents) named, read a page at a time."""
    nodes: dict[str, tuple[datetime, datetime]] = {}
    edges: dict[tuple[str, str], tuple[datetime, datetime]] = {}
    after = 0
    while page := conn.execute(text(_V8_STATIC_EVENTS), {"after": after}).all():
        after = page[-1][0]
        changes = _Changes()
        for _id, payload in page:
            try:
                changes.add(parse_event(json.loads(payload)))
            except (EventError, ValueError):  # stored by an older, laxer release: it names nothing we can read
                continue
        for spans, found in ((nodes, changes.node_times), (edges, changes.edges)):
            for key, (first, last) in found.items():
                known = spans.get(key, (first, last))
                spans[key] = (min(known[0], first), max(known[1], last))
    return nodes, edges


def _runs_by(conn: Connection, query: str, keep: Callable[[tuple[Any, ...]], bool]) -> dict[tuple[Any, ...], datetime]:
    """The rows of ``query`` (key columns, then a time) that ``keep`` keeps, as ``key → time``."""
    found = {}
    time_type = tables.UtcDateTime()
    dialect = conn.dialect
    for *key, at in conn.execute(text(query)):
        if keep(tuple(key)) and at is not None:
            if isinstance(at, str):  # SQLite answers an aggregate's time as text
                at = datetime.fromisoformat(at)
            found[tuple(key)] = time_type.process_result_value(at, dialect)
    return found


def _declared_lineage(conn: Connection) -> None:
    """Version 9: declared and observed lineage (see ``docs/declared-lineage.md``). Nodes and edges gain
    ``declared_at`` (the latest static event naming them) and ``observed_at`` (the latest RunEvent).

    Derived from what is stored: everything is observed (at its ``last_seen``/``updated_at``) unless a stored
    JobEvent or DatasetEvent named it. What one did is declared at that event's latest time, and observed at the
    latest state time of a stored run that read or wrote it (for a job: of its runs), or else — when it was stored
    before the first static event named it, which only a RunEvent can have done — at its ``first_seen``/
    ``created_at``; otherwise it exists only by declaration. A run removed by retention before the upgrade is no
    evidence: an edge only such a run observed, named again later by a JobEvent, reads as declared-only until a
    run observes it again.
    """
    timestamp = "TIMESTAMP WITH TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
    for table in ("lineage_nodes", "lineage_edges"):
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN declared_at {timestamp}")
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN observed_at {timestamp}")
    conn.exec_driver_sql(
        "CREATE INDEX ix_lineage_edges_declared ON lineage_edges (origin_id, destination_id, observed_at)"
        " WHERE declared_at IS NOT NULL"
    )
    conn.exec_driver_sql("UPDATE lineage_nodes SET observed_at = updated_at")
    conn.exec_driver_sql("UPDATE lineage_edges SET observed_at = last_seen")
    node_spans, edge_spans = _static_spans(conn)
    if not node_spans:
        return
    write_setting(conn, tables.DECLARED_LINEAGE, "1")
    n, e = tables.nodes.c, tables.edges.c
    ids = {}
    keys = list(node_spans)
    for start in range(0, len(keys), 900):
        query = select(n.node_key, n.id, n.kind).where(n.node_key.in_(keys[start : start + 900]))
        ids.update((key, (node_id, kind)) for key, node_id, kind in conn.execute(query))
    declared = {node_id for node_id, _kind in ids.values()}
    job_runs = _runs_by(conn, _V8_JOB_RUNS, lambda key: key[0] in declared)
    dataset_runs = _runs_by(conn, _V8_DATASET_RUNS, lambda key: key[0] in declared)
    evidence, first, last = bindparam("b_evidence", type_=tables.UtcDateTime), bindparam("b_first"), bindparam("b_last")
    set_nodes = (
        tables.nodes.update()
        .where(n.id == bindparam("b_id"))
        .values(
            declared_at=last,
            observed_at=case((evidence.is_not(None), evidence), (n.created_at < first, n.created_at), else_=null()),
        )
    )
    rows = []
    for key, (node_id, kind) in ids.items():
        runs = job_runs if kind == "job" else dataset_runs
        at = runs.get((node_id,))
        rows.append({"b_id": node_id, "b_evidence": at, "b_first": node_spans[key][0], "b_last": node_spans[key][1]})
    conn.execute(set_nodes, rows)
    if not edge_spans:
        return
    edge_runs = _runs_by(conn, _V8_EDGE_RUNS, lambda key: key[0] in declared and key[1] in declared)
    set_edges = (
        tables.edges.update()
        .where(e.origin_id == bindparam("b_origin"), e.destination_id == bindparam("b_destination"))
        .values(
            declared_at=last,
            observed_at=case((evidence.is_not(None), evidence), (e.first_seen < first, e.first_seen), else_=null()),
        )
    )
    rows = []
    for (origin_key, destination_key), (first_at, last_at) in edge_spans.items():
        if origin_key not in ids or destination_key not in ids:
            continue
        origin, destination = ids[origin_key], ids[destination_key]
        if origin[1] == "job":  # job → output dataset
            at = edge_runs.get((origin[0], destination[0], "output"))
        else:
            at = edge_runs.get((destination[0], origin[0], "input"))
        row = {"b_origin": origin[0], "b_destination": destination[0], "b_evidence": at}
        rows.append({**row, "b_first": first_at, "b_last": last_at})
    conn.execute(set_edges, rows)


_TEMPLATED_NAME_TABLES = """
CREATE TABLE lineage_name_patterns (
    node_id {bigint} NOT NULL PRIMARY KEY, name_regex TEXT NOT NULL, namespace_regex TEXT
);
CREATE TABLE lineage_pattern_renderings (
    pattern_id {bigint} NOT NULL, dataset_id {bigint} NOT NULL, PRIMARY KEY (pattern_id, dataset_id)
);
CREATE INDEX ix_lineage_pattern_renderings_dataset ON lineage_pattern_renderings (dataset_id, pattern_id)
"""

#: Version 9's declared datasets whose facets may say their name is a template, a page at a time.
_V9_TEMPLATED_DATASETS = (
    "SELECT n.id, n.namespace, n.name, d.facets FROM lineage_nodes n JOIN lineage_datasets d ON d.node_id = n.id"
    " WHERE n.declared_at IS NOT NULL AND d.facets LIKE '%airflowLineageProvider_templatedName%' AND n.id > :after"
    " ORDER BY n.id LIMIT 1000"
)


def _templated_names(conn: Connection) -> None:
    """Version 10: declared templated names (``totals_{{ ds_nodash }}``) matched to their renderings (see
    :mod:`.templated_names`). The patterns are read from the stored facets of declared datasets, then every job's
    observed edges are matched against them."""
    bigint = "BIGINT" if conn.dialect.name == "postgresql" else "INTEGER"
    for ddl in _TEMPLATED_NAME_TABLES.format(bigint=bigint).split(";"):
        conn.exec_driver_sql(ddl)
    after, found = -1, {}
    while rows := conn.execute(text(_V9_TEMPLATED_DATASETS), {"after": after}).all():
        after = rows[-1][0]
        for node_id, namespace, name, facets in rows:
            pattern = templated_names.pattern_of(namespace, name, json.loads(facets))
            if pattern is not None:
                found[node_id] = pattern
    if found:
        templated_names.write_patterns(conn, found)
        write_setting(conn, tables.TEMPLATED_NAMES, "1")
        templated_names.rematch_all(conn)


#: ``(version, description, migration)`` in order. Append only; never edit a released entry.
MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial lineage store", _initial),
    (2, "references kept by the writer instead of foreign keys", _drop_foreign_keys),
    (3, "node versions for the graph-card cache", _node_versions),
    (4, "table lineage as io groups, linear in inputs + outputs", _io_groups),
    (5, "tags on jobs, datasets and fields", _tags),
    (6, "each run's latest job facets, and nodes indexed by name", _run_job_facets),
    (7, "a record of each retention prune", _prunes),
    (8, "one dataset under several names: symlink keys, producers, groups", _dataset_identity),
    (9, "declared and observed lineage on nodes and edges", _declared_lineage),
    (10, "templated declared names matched to their renderings", _templated_names),
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
            new_store_id(conn)
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
