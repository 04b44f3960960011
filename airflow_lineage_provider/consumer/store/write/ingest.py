"""Storing validated events: raw event once, then jobs, datasets, runs and the lineage edges.

A batch is written with one prebuilt statement per table (see :mod:`.statements`), whatever its size. Idempotency comes
from the raw event table: an event is applied only by the transaction that inserted its content hash,
so the same event posted twice, or by two clients at once, is stored and applied once.

What an event writes is linear in its inputs + outputs: table lineage is stored as the event's io group
(job, input set, output set), never as the input-output pairs it implies (see ``tables.io_groups``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.consumer.store.graph import identity
from airflow_lineage_provider.consumer.store.graph.versioned_cache import bump_versions
from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.store.schema.store_settings import STORE_ID, read_settings_and_claims
from airflow_lineage_provider.consumer.store.schema.tables import DECLARED_LINEAGE, TEMPLATED_NAMES, as_utc
from airflow_lineage_provider.consumer.store.write import declarations, facet_readers, lifecycle, templated_names
from airflow_lineage_provider.consumer.store.write.namespaces import note_nodes
from airflow_lineage_provider.consumer.store.write.node_versions import node_upsert
from airflow_lineage_provider.consumer.store.write.statements import Statement, Statements, column_arrays, statements
from airflow_lineage_provider.consumer.validation import DatasetRef, LineageEvent

NodeKey = str
#: A column edge of a batch: ``(source dataset, source field, target dataset, target field)``.
ColumnKey = tuple[NodeKey, str, NodeKey, str]


def node_key(kind: str, namespace: str, name: str) -> NodeKey:
    """Unique key of a job or dataset node (SHA-1 of kind, namespace and name)."""
    return hashlib.sha1(f"{kind}\x00{namespace}\x00{name}".encode()).hexdigest()


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def field_key(dataset_id: int, name: str) -> str:
    """Unique key of a dataset field."""
    return hashlib.sha1(f"{dataset_id}\x00{name}".encode()).hexdigest()


def io_group_key(job: NodeKey, inputs: Iterable[NodeKey], outputs: Iterable[NodeKey]) -> str:
    """Unique key of an io group: SHA-1 of the job's node key and the sorted node keys of its datasets.

    Example: every event of one job that reads ``a`` and ``b`` and writes ``x`` has the group
    ``io_group_key(job, [a, b], [x])``, whatever order the event lists them in.
    """
    text = f"{job}>{','.join(sorted(set(inputs)))}>{','.join(sorted(set(outputs)))}"
    return hashlib.sha1(text.encode()).hexdigest()


#: Most rows one statement writes: a larger write is sent as several statements, in order, so what one statement
#: costs the database in memory (its arrays, parsed and unnested) is bounded whatever the batch or event.
STATEMENT_ROWS = 5_000
#: ``Connection.info`` key of when the write transaction must be done by (``time.monotonic()``; deferred apply's
#: time bound): :func:`_execute` raises :class:`ApplyTimeout` past it.
APPLY_DEADLINE = "lineage_apply_deadline"


class ApplyTimeout(RuntimeError):
    """The write transaction ran past its deadline (:data:`APPLY_DEADLINE`)."""


def event_rows(event: LineageEvent) -> int:
    """About how many rows applying ``event`` writes, to size batches by: one for its job (or dataset) and run, and
    per dataset it names one, plus one per symlink and column-lineage input field of its facets. Each counts a
    handful of table rows (node, dataset, edge, run input or output, io group member), the same for every event."""
    refs = (event.dataset,) if event.dataset is not None else event.inputs + event.outputs
    rows = 1 + len(refs)
    for ref in refs:
        if ref.facets:
            rows += _facet_rows(ref.facets)
    return rows


def _facet_rows(facets: dict[str, Any]) -> int:
    rows = 0
    lineage = facets.get("columnLineage")
    if isinstance(lineage, dict) and isinstance(lineage.get("fields"), dict):
        for mapping in lineage["fields"].values():
            if isinstance(mapping, dict) and isinstance(mapping.get("inputFields"), list):
                rows += len(mapping["inputFields"])
    symlinks = facets.get("symlinks")
    if isinstance(symlinks, dict) and isinstance(symlinks.get("identifiers"), list):
        rows += len(symlinks["identifiers"])
    return rows


def _execute(conn: Connection, statement: Statement, rows: list[dict[str, Any]], answers: bool = True) -> list[Any]:
    """Run a prebuilt insert with ``rows`` through SQLAlchemy (its compiled cache: the statement is compiled once),
    in statements of at most :data:`STATEMENT_ROWS` rows. The rows it answers (``RETURNING``); none without
    ``answers``."""
    deadline = conn.info.get(APPLY_DEADLINE)
    if deadline is not None and time.monotonic() > deadline:
        raise ApplyTimeout("the apply ran past its time bound")
    # Rows go in key order so that concurrent transactions lock shared rows in the same order
    # (PostgreSQL would otherwise detect deadlocks between two batches that share jobs or datasets).
    rows.sort(key=itemgetter(*statement.order))
    if len(rows) <= STATEMENT_ROWS:
        return _execute_sorted(conn, statement, rows, answers)
    answered: list[Any] = []
    for start in range(0, len(rows), STATEMENT_ROWS):
        if deadline is not None and time.monotonic() > deadline:
            raise ApplyTimeout("the apply ran past its time bound")
        answered += _execute_sorted(conn, statement, rows[start : start + STATEMENT_ROWS], answers)
    return answered


def _execute_sorted(conn: Connection, statement: Statement, rows: list[dict[str, Any]], answers: bool) -> list[Any]:
    if statement.columns:  # PostgreSQL: one array per column, the whole batch in one statement
        result = conn.execute(statement.sql, column_arrays(statement, rows))
    else:  # SQLite: RETURNING, so SQLAlchemy sends the rows as multi-row VALUES (insertmanyvalues)
        result = conn.execute(statement.sql, rows)
    if not answers or not result.returns_rows:
        result.close()
        return []
    return list(result.all())


def _write(conn: Connection, statement: Statement, rows: list[dict[str, Any]]) -> None:
    _execute(conn, statement, rows, answers=False)


@dataclass
class IngestResult:
    """How many events were new (stored and applied) and how many were already stored, and the keys
    (:attr:`.LineageEvent.key`) of the new ones."""

    stored: int = 0
    duplicates: int = 0
    inserted: frozenset[str] = frozenset()


def _span(found: dict[Any, tuple[datetime, datetime]], key: Any, at: datetime) -> None:
    first, last = found.get(key, (at, at))
    found[key] = (min(first, at), max(last, at))


def _max(found: dict[Any, datetime], key: Any, at: datetime) -> None:
    known = found.get(key)
    if known is None or at > known:
        found[key] = at


def _latest(found: dict[Any, tuple[datetime, Any]], key: Any, at: datetime, value: Any) -> None:
    if key not in found or at >= found[key][0]:
        found[key] = (at, value)


def _latest_run(found: dict[NodeKey, tuple[datetime, str]], job: NodeKey, at: datetime, run_uuid: str) -> None:
    # On the same event time the greater run UUID wins, in SQL against the stored row too
    # (statements._later_run): which run is a job's latest must not depend on which arrived last.
    if job not in found or (at, run_uuid) > found[job]:
        found[job] = (at, run_uuid)


@dataclass(frozen=True)
class _IoGroup:
    """One io group of a batch: a job, the datasets its events read and wrote, and the latest event time."""

    job: NodeKey
    inputs: frozenset[NodeKey]
    outputs: frozenset[NodeKey]
    last_seen: datetime
    declared_at: datetime | None = None
    observed_at: datetime | None = None


@dataclass
class _Changes:
    """Everything a batch of new events changes, reduced to one row per key."""

    nodes: dict[NodeKey, tuple[str, str, str]] = field(default_factory=dict)
    node_times: dict[NodeKey, tuple[datetime, datetime]] = field(default_factory=dict)
    schemas: dict[NodeKey, tuple[datetime, str]] = field(default_factory=dict)
    dataset_facets: dict[NodeKey, tuple[datetime, str]] = field(default_factory=dict)
    job_facets: dict[NodeKey, tuple[datetime, str]] = field(default_factory=dict)
    latest_runs: dict[NodeKey, tuple[datetime, str]] = field(default_factory=dict)
    runs: dict[str, lifecycle.RunRow] = field(default_factory=dict)
    run_io: set[tuple[str, NodeKey, str]] = field(default_factory=set)
    edges: dict[tuple[NodeKey, NodeKey], tuple[datetime, datetime]] = field(default_factory=dict)
    io_groups: dict[str, _IoGroup] = field(default_factory=dict)
    column_edges: dict[ColumnKey, tuple[datetime, str | None]] = field(default_factory=dict)
    #: The latest time a static event declared each column edge, and a RunEvent observed it.
    column_declared: dict[ColumnKey, datetime] = field(default_factory=dict)
    column_observed: dict[ColumnKey, datetime] = field(default_factory=dict)
    #: The column edges each job's declaration links (see ..declarations).
    column_links: set[tuple[NodeKey, ColumnKey]] = field(default_factory=set)
    #: The declaration each job's JobEvent of the batch makes (one per job: see :func:`.declarations.current_events`).
    declarations: dict[NodeKey, declarations.Declaration] = field(default_factory=dict)
    #: Names datasets claim (see ..identity): ``(dataset, namespace, name, type, via) → producer``, the first
    #: producer of the batch that said it.
    claims: dict[tuple[NodeKey, str, str, str | None, str], str | None] = field(default_factory=dict)
    #: ``(dataset, producer)`` of each producer that named a dataset.
    producers: set[tuple[NodeKey, str]] = field(default_factory=set)
    #: The latest time a static event (JobEvent, DatasetEvent) *declared* each node, and a RunEvent *observed* it.
    node_declared: dict[NodeKey, datetime] = field(default_factory=dict)
    node_observed: dict[NodeKey, datetime] = field(default_factory=dict)
    #: The same for each edge: a JobEvent declared it, a RunEvent observed it.
    edge_declared: dict[tuple[NodeKey, NodeKey], datetime] = field(default_factory=dict)
    edge_observed: dict[tuple[NodeKey, NodeKey], datetime] = field(default_factory=dict)
    #: Declared datasets whose names are templates (see ..templated_names).
    patterns: dict[NodeKey, templated_names.Pattern] = field(default_factory=dict)
    #: Whether the event being added is a RunEvent (what it names is observed) or a static one (declared).
    observing: bool = False

    def node(self, kind: str, namespace: str, name: str, at: datetime) -> NodeKey:
        key = node_key(kind, namespace, name)
        self.nodes[key] = (kind, namespace, name)
        _span(self.node_times, key, at)
        _max(self.node_observed if self.observing else self.node_declared, key, at)
        return key

    def edge(self, origin: NodeKey, destination: NodeKey, at: datetime) -> None:
        """An edge named by the event being added (declared or observed, as the event is)."""
        _span(self.edges, (origin, destination), at)
        _max(self.edge_observed if self.observing else self.edge_declared, (origin, destination), at)

    def dataset(self, ref: DatasetRef, at: datetime, producer: str | None, job: NodeKey | None = None) -> NodeKey:
        key = self.node("dataset", ref.namespace, ref.name, at)
        if producer:
            self.producers.add((key, producer))
        if not ref.facets:
            return key
        _latest(self.dataset_facets, key, at, json.dumps(ref.facets, sort_keys=True))
        if not self.observing:
            pattern = templated_names.pattern_of(ref.namespace, ref.name, ref.facets)
            if pattern is not None:
                self.patterns[key] = pattern
        fields = facet_readers.schema_fields(ref.facets)
        if fields is not None:
            _latest(self.schemas, key, at, json.dumps(fields))  # already in the API's shape
        for namespace, name, kind in facet_readers.symlinks(ref.facets):
            self.claims.setdefault((key, namespace, name, kind, "symlink"), producer)
        source = identity.data_source_alias(ref.namespace, ref.facets)
        if source is not None:
            self.claims.setdefault((key, source, ref.name, None, "dataSource"), producer)
        for link in facet_readers.column_links(ref.facets):
            source = self.node("dataset", link.source_namespace, link.source_name, at)
            column = (source, link.source_field, key, link.target_field)
            _latest(self.column_edges, column, at, link.transformation)
            _max(self.column_observed if self.observing else self.column_declared, column, at)
            if job is not None and not self.observing:
                self.column_links.add((job, column))
        return key

    def add(self, event: LineageEvent) -> None:
        at = event.event_time
        self.observing = event.run_id is not None
        if event.dataset is not None:
            self.dataset(event.dataset, at, event.producer)
            return
        assert event.job is not None
        job = self.node("job", event.job.namespace, event.job.name, at)
        job_facets = json.dumps(event.job.facets, sort_keys=True) if event.job.facets else None
        if job_facets is not None:
            _latest(self.job_facets, job, at, job_facets)
        if declarations.is_declaration(event):
            self.declarations[job] = declarations.of(event)
        inputs = [self.dataset(ref, at, event.producer, job) for ref in event.inputs]
        outputs = [self.dataset(ref, at, event.producer, job) for ref in event.outputs]
        for source in inputs:
            self.edge(source, job, at)
        for target in outputs:
            self.edge(job, target, at)
        if inputs and outputs:
            self._io_group(job, inputs, outputs, at)
        if event.run_id is not None:
            self._run(event, job, inputs, outputs, job_facets)

    def _io_group(self, job: NodeKey, inputs: list[NodeKey], outputs: list[NodeKey], at: datetime) -> None:
        key = io_group_key(job, inputs, outputs)
        known = self.io_groups.get(key) or _IoGroup(job, frozenset(inputs), frozenset(outputs), at)
        last_seen = max(known.last_seen, at)
        if self.observing:
            observed = at if known.observed_at is None or at > known.observed_at else known.observed_at
            self.io_groups[key] = replace(known, last_seen=last_seen, observed_at=observed)
        else:
            declared = at if known.declared_at is None or at > known.declared_at else known.declared_at
            self.io_groups[key] = replace(known, last_seen=last_seen, declared_at=declared)

    def forget_declaration(self, job: NodeKey) -> None:
        """Take back what ``job``'s JobEvent of the batch declared: a newer declaration of the job was stored
        meanwhile (see :func:`.declarations.replace`). What a run of the batch observed stays."""
        for edge in [edge for edge in self.edge_declared if job in edge]:
            del self.edge_declared[edge]
            if edge not in self.edge_observed:
                del self.edges[edge]
        for key, group in list(self.io_groups.items()):
            if group.job == job:
                if group.observed_at is None:
                    del self.io_groups[key]
                else:
                    self.io_groups[key] = replace(group, declared_at=None)
        links = {link for link in self.column_links if link[0] == job}
        self.column_links -= links
        still = {column for _job, column in self.column_links}
        for _job, column in links:
            if column not in still:
                self.column_declared.pop(column, None)
                if column not in self.column_observed:
                    self.column_edges.pop(column, None)

    def _run(
        self, event: LineageEvent, job: NodeKey, inputs: list[NodeKey], outputs: list[NodeKey], job_facets: str | None
    ) -> None:
        assert event.run_id is not None and event.event_type is not None
        row = lifecycle.RunRow.from_event(
            event.run_id,
            job,
            event.event_type,
            event.event_time,
            facet_readers.nominal_times(event.run_facets),
            facet_readers.parent_run_id(event.run_facets),
            json.dumps(event.run_facets, sort_keys=True) if event.run_facets else None,
            job_facets,
        )
        known = self.runs.get(event.run_id)
        self.runs[event.run_id] = row if known is None else lifecycle.merge(known, row)
        _latest_run(self.latest_runs, self.runs[event.run_id].job_key, event.event_time, event.run_id)
        self.run_io.update((event.run_id, key, "input") for key in inputs)
        self.run_io.update((event.run_id, key, "output") for key in outputs)


def ingest_events(conn: Connection, events: Sequence[LineageEvent]) -> IngestResult:
    """Store ``events`` in the open transaction of ``conn`` and apply the new ones to the graph; duplicates
    (stored before) change nothing."""
    unique = {event.key: event for event in events}
    inserted = _insert_events(conn, unique.values(), datetime.now(timezone.utc))
    apply_events(conn, [unique[key] for key in inserted])
    return IngestResult(stored=len(inserted), duplicates=len(events) - len(inserted), inserted=frozenset(inserted))


def log_events(
    conn: Connection, events: Sequence[LineageEvent], senders: Mapping[str, str] | None = None
) -> IngestResult:
    """Store ``events`` in the open transaction of ``conn`` and log the new ones as pending
    (:data:`.tables.pending_events`), for :func:`apply_events` to apply in a later transaction (see
    :mod:`..deferred_apply`); duplicates (stored before) change nothing. Counts as :func:`ingest_events` does.
    ``senders``: event key → the principal that posted it (:attr:`.Principal.log_name`), recorded with its row."""
    unique = {event.key: event for event in events}
    inserted = _insert_events(conn, unique.values(), datetime.now(timezone.utc))
    if inserted:
        senders = senders or {}
        rows = [
            {"event_key": key, "logged_by": tables.logged_by(sender) if (sender := senders.get(key)) else None}
            for key in inserted
        ]
        _write(conn, statements(conn.dialect.name).pending_events, rows)
    return IngestResult(stored=len(inserted), duplicates=len(events) - len(inserted), inserted=frozenset(inserted))


def apply_events(conn: Connection, events: Sequence[LineageEvent]) -> None:
    """Apply ``events``, stored already and new (each applied once), to the graph in the open transaction of
    ``conn``: jobs, datasets, runs, edges and the rest, as one batch."""
    if not events:
        return
    jobs = {
        event.key: node_key("job", event.job.namespace, event.job.name)
        for event in events
        if event.job is not None and declarations.is_declaration(event)
    }
    current = declarations.current_events(conn, events, jobs) if jobs else events
    if not current:  # only JobEvents a later declaration of their job supersedes: stored, nothing to apply
        return
    changes = _Changes()
    for event in current:
        changes.add(event)
    after_commit(conn, _apply(conn, changes))


def _insert_events(conn: Connection, events: Iterable[LineageEvent], received_at: datetime) -> list[str]:
    events = list(events)
    if not events:
        return []
    packer = payloads.dictionary_for_ingest(conn, len(events))
    rows = [
        {
            "event_key": e.key,
            "kind": e.kind,
            "event_type": e.event_type,
            "event_time": e.event_time,
            "run_uuid": e.run_id,
            "job_namespace": e.job.namespace if e.job else None,
            "job_name": e.job.name if e.job else None,
            "producer": e.producer,
            "received_at": received_at,
            **payloads.stored_columns(e.payload, e.namespaces, packer),
        }
        for e in events
    ]
    return [key for (key,) in _execute(conn, statements(conn.dialect.name).events, rows)]


def _each_chunk(conn: Connection, query: Any, values: list[Any], parameter: str) -> Iterator[Sequence[Any]]:
    """The rows of ``query`` with its expanding ``parameter`` bound to ``values``, 900 at a time (SQLite's
    parameter limit)."""
    for start in range(0, len(values), 900):
        yield from conn.execute(query, {parameter: values[start : start + 900]})


def _ids(conn: Connection, query: Any, keys: Iterable[str]) -> dict[str, int]:
    """``key → id`` of ``query`` (``node_ids`` or ``field_ids`` of :mod:`.statements`) for ``keys``."""
    return {key: found_id for key, found_id in _each_chunk(conn, query, list(keys), "keys")}


#: ``Connection.info`` key of what to do once the write transaction has committed (see ``LineageStore.write``).
AFTER_COMMIT = "lineage_after_commit"


def after_commit(conn: Connection, callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``conn``'s write transaction has committed (never if it rolls back).

    Only :meth:`..LineageStore.write` runs these; on a connection from elsewhere nothing is ever called.
    """
    conn.info.setdefault(AFTER_COMMIT, []).append(callback)


def _apply(conn: Connection, changes: _Changes) -> Callable[[], None]:
    sql = statements(conn.dialect.name)
    ids, rewritten = _write_nodes(conn, changes)
    replaced = declarations.replace(conn, {ids[key]: one for key, one in changes.declarations.items()})
    for key in changes.declarations.keys() - {key for key in changes.declarations if ids[key] in replaced.jobs}:
        changes.forget_declaration(key)
    refaceted = _datasets_given_new_facets(conn, changes, ids, rewritten)
    settings, any_claim = read_settings_and_claims(conn)
    _write_io_groups(conn, sql, changes, ids)
    _write_datasets(conn, sql, changes, ids)
    remember, recorded = _write_producers(conn, sql, changes, ids, settings.get(STORE_ID, ""))
    _write_jobs(conn, sql, changes, ids)
    _write_runs(conn, sql, changes, ids)
    _write_edges(conn, sql, changes, ids)
    claimed = _write_claims(conn, sql, changes, ids)
    changed = refaceted | {ids[key] for key, _producer in recorded} | claimed
    if changed - rewritten:  # what a dataset's card shows changed, not its own row (see .node_versions)
        bump_versions(conn, sorted(changed - rewritten))
    if changes.node_declared and DECLARED_LINEAGE not in settings:
        _mark_setting(conn, DECLARED_LINEAGE)
    _match_templated_names(conn, changes, ids, settings)
    _write_columns(conn, sql, changes, ids)
    declarations.sweep(conn, replaced)
    _regroup(conn, changes, settings, claimed, any_claim or bool(claimed))
    return remember


def _write_nodes(conn: Connection, changes: _Changes) -> tuple[dict[NodeKey, int], set[int]]:
    """Insert the batch's new nodes and rewrite the stored ones it changes (:mod:`.node_versions`): every node's
    id by key, and the ids of the nodes written (new, or their version bumped)."""
    # A new node's version starts at the time it is written (µs): after a reset, SQLite may give a new node
    # the id of a removed one, and what another process keeps by (id, version) must not match it.
    first_version = time.time_ns() // 1000
    rows = [
        {
            "node_key": key,
            "kind": kind,
            "namespace": ns,
            "name": name,
            "created_at": first,
            "updated_at": last,
            "version": first_version,
            "declared_at": changes.node_declared.get(key),
            "observed_at": changes.node_observed.get(key),
        }
        for key, (kind, ns, name) in changes.nodes.items()
        for first, last in [changes.node_times[key]]
    ]
    ids = dict(_execute(conn, node_upsert(conn.dialect.name), rows))  # the nodes written
    note_nodes(conn, ((ns, changes.node_times[key]) for key, (_, ns, _) in changes.nodes.items()))  # their namespaces
    written = set(ids.values())
    unchanged = [key for key in changes.nodes if key not in ids]
    if unchanged:
        ids.update(_ids(conn, statements(conn.dialect.name).node_ids, unchanged))
    return ids, written


def _datasets_given_new_facets(
    conn: Connection, changes: _Changes, ids: dict[NodeKey, int], rewritten: set[int]
) -> set[int]:
    """The datasets, of those the node upsert did not rewrite, whose schema or facets the batch changes: the
    datasets upsert will store a value (as new as the stored one, :func:`.lifecycle.newer_sql`) that differs
    from the stored one. Read before that write; nothing is read when every such dataset was rewritten anyway
    (new events: their times moved)."""
    wanted = {ids[key]: key for key in changes.dataset_facets if ids[key] not in rewritten}
    if not wanted:
        return set()
    d = tables.datasets.c
    query = select(d.node_id, d.schema_time, d.fields, d.facets_time, d.facets).where(
        d.node_id.in_(bindparam("ids", expanding=True))
    )
    stored: dict[int, Any] = {row[0]: row[1:] for row in _each_chunk(conn, query, list(wanted), "ids")}
    changed: set[int] = set()
    for node, key in wanted.items():
        schema_time, fields, facets_time, facets = stored.get(node, (None, None, None, None))
        for (at, value), (stored_at, stored_value) in (
            (changes.schemas.get(key, (None, None)), (schema_time, fields)),
            (changes.dataset_facets[key], (facets_time, facets)),
        ):
            if at is not None and (stored_at is None or as_utc(at) >= stored_at) and value != stored_value:
                changed.add(node)
    return changed


def _write_datasets(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> None:
    rows = []
    for key, (kind, _ns, _name) in changes.nodes.items():
        if kind == "dataset":
            schema_time, fields = changes.schemas.get(key, (None, None))
            facets_time, facets = changes.dataset_facets.get(key, (None, None))
            rows.append(
                {
                    "node_id": ids[key],
                    "fields": fields,
                    "schema_time": schema_time,
                    "facets": facets,
                    "facets_time": facets_time,
                }
            )
    if rows:
        _write(conn, sql.datasets, rows)


def _write_producers(
    conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int], store_id: str
) -> tuple[Callable[[], None], list[tuple[NodeKey, str]]]:
    """Record which producers named which datasets (those this process has not recorded yet); what to call
    once the transaction has committed, to remember them, and the ``(dataset, producer)`` pairs written."""
    fresh = _producers.new(store_id, changes.producers)
    if fresh:
        seen = datetime.now(timezone.utc)
        rows = [
            {"node_id": ids[key], "producer_key": _sha1(producer), "producer": producer, "first_seen": seen}
            for key, producer in fresh
        ]
        _write(conn, sql.node_producers, rows)
    return (lambda: _producers.recorded(store_id, fresh)), fresh


def _write_claims(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> set[int]:
    """Store the names datasets claim; the datasets whose claims are new."""
    links: dict[tuple[int, str], dict[str, Any]] = {}
    for (key, ns, name, kind, via), producer in changes.claims.items():
        dataset_id, symlink_key = ids[key], node_key("symlink", ns, name)
        row = {
            "dataset_id": dataset_id,
            "symlink_key": symlink_key,
            "namespace": ns,
            "name": name,
            "type": kind,
            "alias_key": node_key("dataset", ns, name),
            "via": via,
            "producer": producer,
        }
        known = links.setdefault((dataset_id, symlink_key), row)
        if known["via"] != "symlink" and via == "symlink":  # a symlink says more (a type) than a dataSource
            links[(dataset_id, symlink_key)] = row
    if not links:
        return set()
    return {dataset_id for (dataset_id,) in _execute(conn, sql.symlinks, list(links.values()))}


def _regroup(conn: Connection, changes: _Changes, settings: dict[str, str], claimed: set[int], any_claim: bool) -> None:
    """Let groups form or change around the batch's datasets (see :mod:`.identity`)."""
    aliases = identity.stored_namespace_aliases(conn, settings)
    datasets = {key: ns for key, (kind, ns, _name) in changes.nodes.items() if kind == "dataset"}
    seeds = claimed | identity.ungrouped_candidates(conn, datasets, aliases, any_claim)
    if seeds:
        identity.regroup(conn, seeds, aliases)


class _RecordedProducers:
    """Which ``(store, dataset, producer)`` this process has recorded already, so a batch writes only new
    ones (most batches name datasets their producer named before). Keyed by the store's id, which a reset
    changes (:mod:`.store_settings`), so nothing remembered outlives what it remembers. Bounded: forgotten
    all at once past :data:`PRODUCERS_REMEMBERED` (a forgotten pair is written again, a no-op)."""

    def __init__(self) -> None:
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    def new(self, store_id: str, pairs: Iterable[tuple[NodeKey, str]]) -> list[tuple[NodeKey, str]]:
        with self._lock:
            fresh = [pair for pair in pairs if hash((store_id, *pair)) not in self._seen]
        return fresh

    def recorded(self, store_id: str, pairs: Iterable[tuple[NodeKey, str]]) -> None:
        with self._lock:
            if len(self._seen) > PRODUCERS_REMEMBERED:
                self._seen.clear()
            self._seen.update(hash((store_id, *pair)) for pair in pairs)


#: ``(store, dataset, producer)`` remembered per process (about 60 bytes each).
PRODUCERS_REMEMBERED = 200_000
_producers = _RecordedProducers()


def _write_jobs(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> None:
    rows = []
    for key, (kind, _ns, _name) in changes.nodes.items():
        if kind == "job":
            facets_time, facets = changes.job_facets.get(key, (None, None))
            run_time, run_uuid = changes.latest_runs.get(key, (None, None))
            rows.append(
                {
                    "node_id": ids[key],
                    "facets": facets,
                    "facets_time": facets_time,
                    "latest_run_uuid": run_uuid,
                    "latest_run_time": run_time,
                }
            )
    if rows:
        _write(conn, sql.jobs, rows)


def _write_runs(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> None:
    if not changes.runs:
        return
    rows = []
    for run in changes.runs.values():
        row = dict(vars(run))
        row["job_id"] = ids[row.pop("job_key")]
        rows.append(row)
    _write(conn, sql.runs, rows)
    if changes.run_io:
        io = [{"run_uuid": run, "dataset_id": ids[key], "direction": way} for run, key, way in changes.run_io]
        _write(conn, sql.run_io, io)


def _write_edges(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> None:
    if changes.edges:
        rows = [
            {
                "origin_id": ids[a],
                "destination_id": ids[b],
                "first_seen": first,
                "last_seen": last,
                "declared_at": changes.edge_declared.get((a, b)),
                "observed_at": changes.edge_observed.get((a, b)),
            }
            for (a, b), (first, last) in changes.edges.items()
        ]
        _write(conn, sql.edges, rows)


def _mark_setting(conn: Connection, name: str) -> None:
    """Record that the store holds declared lineage (:data:`.tables.DECLARED_LINEAGE`) or templated declared
    names (:data:`.tables.TEMPLATED_NAMES`), once."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    row = {"name": name, "value": "1"}
    conn.execute(insert(tables.store_settings).values(row).on_conflict_do_nothing(index_elements=["name"]))


def _match_templated_names(
    conn: Connection, changes: _Changes, ids: dict[NodeKey, int], settings: dict[str, str]
) -> None:
    """Store the batch's templated declared names and match renderings to them (see :mod:`.templated_names`);
    nothing in a store that never received one."""
    if changes.patterns:
        templated_names.write_patterns(conn, {ids[key]: pattern for key, pattern in changes.patterns.items()})
        if TEMPLATED_NAMES not in settings:
            _mark_setting(conn, TEMPLATED_NAMES)
    elif TEMPLATED_NAMES not in settings:
        return
    observed, declaring = [], set()
    for origin, destination in changes.edge_observed:
        job, dataset, direction = (origin, destination, "output")
        if changes.nodes[origin][0] != "job":
            job, dataset, direction = destination, origin, "input"
        _kind, namespace, name = changes.nodes[dataset]
        observed.append(templated_names.JobEdge(ids[job], ids[dataset], direction, namespace, name))
    for origin, destination in changes.edge_declared:
        if origin in changes.patterns:
            declaring.add(ids[destination])
        elif destination in changes.patterns:
            declaring.add(ids[origin])
    templated_names.match(conn, observed, declaring)


def _write_io_groups(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> None:
    if not changes.io_groups:
        return
    rows = [
        {
            "group_key": key,
            "job_id": ids[group.job],
            "last_seen": group.last_seen,
            "declared_at": group.declared_at,
            "observed_at": group.observed_at,
        }
        for key, group in changes.io_groups.items()
    ]
    # Only the groups the upsert inserted or moved on answer: a group skipped was stored with its members.
    written = _execute(conn, sql.io_groups, rows)
    members = [
        {"group_id": group_id, "direction": direction, "dataset_id": ids[dataset]}
        for key, group_id in written
        for direction, datasets in (
            ("input", changes.io_groups[key].inputs),
            ("output", changes.io_groups[key].outputs),
        )
        for dataset in datasets
    ]
    if members:
        _write(conn, sql.io_members, members)


def _write_columns(conn: Connection, sql: Statements, changes: _Changes, ids: dict[NodeKey, int]) -> None:
    if not changes.column_edges:
        return
    wanted: dict[str, dict[str, Any]] = {}
    for source, source_field, target, target_field in changes.column_edges:
        for dataset, name in ((source, source_field), (target, target_field)):
            key = field_key(ids[dataset], name)
            wanted[key] = {"field_key": key, "dataset_id": ids[dataset], "name": name}
    _write(conn, sql.fields, list(wanted.values()))
    field_ids = _ids(conn, sql.field_ids, wanted)

    def edge_ids(column: ColumnKey) -> tuple[int, int]:
        s, sf, t, tf = column
        return field_ids[field_key(ids[s], sf)], field_ids[field_key(ids[t], tf)]

    rows = [
        {
            "source_field_id": source,
            "target_field_id": target,
            "transformation": transformation,
            "last_seen": at,
            "declared_at": changes.column_declared.get(column),
            "observed_at": changes.column_observed.get(column),
        }
        for column, (at, transformation) in changes.column_edges.items()
        for source, target in [edge_ids(column)]
    ]
    _write(conn, sql.column_edges, rows)
    if changes.column_links:
        links = {(ids[job], *edge_ids(column)) for job, column in changes.column_links}
        declarations.link_columns(conn, sorted(links))
