"""Reset: remove everything the store holds, or one namespace's jobs and datasets and all that refers to them.

Whole store (:func:`reset_all`): every lineage row goes — events (and the ingest log: events not applied yet or
set aside, see :mod:`.deferred_apply`), nodes, runs and their inputs and outputs,
edges, io groups, fields and column edges, symlinks and other claimed names, the producers of each node,
dataset groups, tags on nodes, templated declared names and their renderings. The tag names themselves
(``lineage_tags``, what ``PUT /api/v1/tags`` made), the store's settings (the namespace aliases its groups were
derived with), the prune history and the schema version stay.

One namespace (:func:`reset_namespace`): its jobs and datasets go with

* the runs of its jobs (and their inputs and outputs), and other runs' inputs and outputs among its datasets;
* every edge, field, column edge, claimed name (``lineage_symlinks`` rows of its datasets), producer record,
  node tag, templated declared name and rendering of a templated name of its nodes; names other datasets
  claim stay theirs;
* every raw event that names one of its nodes where the ingest makes a node of a name: the job, inputs,
  outputs, a DatasetEvent's dataset, a column-lineage input field. So other namespaces' jobs lose the events
  that read or wrote its datasets: re-sending the same events then rebuilds exactly what a store that never
  saw them would hold, where keeping them would make the re-sent ones duplicates that rebuild nothing;
* io groups: a group of one of its jobs goes. A group of another job loses the namespace's datasets and
  keeps its other pairs, under the key the ingest gives a group of what is left (merged into a group
  that already has that key), so table lineage between surviving datasets stays and a re-sent event finds
  its own group. A group left without an input or without an output goes;
* dataset groups (one dataset under several names, :mod:`.identity`): the groups its datasets belonged to
  are derived again from what is left.

Nodes of other namespaces stay; those that lost an edge, an io group member, a column edge, a run's input
or output or a dataset-group member get their ``version`` bumped, so cached graph cards and job objects of
them are read again in every process. Tables added later that refer to node ids must be added here too.

A dry run (``dry_run=True``) counts what would go, in a read transaction, and changes nothing; the counts
are those the reset itself reports in the same state.

A namespace-limited key (``visible``: the namespaces it sees) may reset a namespace only when the reset stays
inside what it sees: no event that would go names another namespace (the events listing's rule), and no
surviving node whose edges, io groups, column edges, runs or dataset groups would change, and no claimed name
that would go, lies in another. Otherwise :class:`SharedNamespace` is raised before anything changes. The caller
checks that first in a read transaction (:func:`check_confined`: a refusal takes no lock and holds nobody off);
the reset checks it again in its own transaction, with ingests held off (:func:`_hold_off_ingests`), so what it
deletes is what it checked: no event can be stored between the check and the deletes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, and_, delete, exists, func, not_, or_, select, true, update
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.graph import identity
from airflow_lineage_provider.consumer.store.graph.versioned_cache import bump_versions
from airflow_lineage_provider.consumer.store.read.visibility import (
    NODE_KINDS,
    event_names_hidden_namespace,
    namespace_in,
)
from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.store.schema.store_settings import new_store_id
from airflow_lineage_provider.consumer.store.write import facet_readers
from airflow_lineage_provider.consumer.store.write.ingest import io_group_key
from airflow_lineage_provider.consumer.store.write.namespaces import refresh as refresh_namespaces
from airflow_lineage_provider.consumer.store.write.unapplied import forget_gone
from airflow_lineage_provider.consumer.validation import parse_event

#: Rows per ``IN (...)`` list when rows are changed by id.
_CHUNK = 500


@dataclass
class ResetCounts:
    """Rows a reset removed (or, in a dry run, would remove), by kind; ``io_groups_narrowed``: io groups of
    surviving jobs that lost the namespace's datasets and were kept for their other pairs."""

    events: int = 0
    runs: int = 0
    jobs: int = 0
    datasets: int = 0
    edges: int = 0
    io_groups: int = 0
    io_groups_narrowed: int = 0
    fields: int = 0
    column_edges: int = 0
    tags: int = 0
    symlinks: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts with the API's camelCase names (``ioGroups``, ``columnEdges``, ...)."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _count(conn: Connection, table: Table, where: ColumnElement[bool]) -> int:
    return conn.execute(select(func.count()).select_from(table).where(where)).scalar() or 0


def _chunks(values: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


# -- the whole store ------------------------------------------------------------------------------------------

#: The tables a whole-store reset empties, in an order that deletes what refers before what is referred to.
_LINEAGE_TABLES = (
    tables.pending_events,
    tables.unapplied_events,
    tables.events,
    tables.run_io,
    tables.runs,
    tables.edges,
    tables.io_members,
    tables.io_groups,
    tables.declared_column_links,
    tables.column_edges,
    tables.fields,
    tables.symlinks,
    tables.node_producers,
    tables.dataset_members,
    tables.node_tags,
    tables.pattern_renderings,
    tables.name_patterns,
    tables.datasets,
    tables.job_declarations,
    tables.jobs,
    tables.nodes,
    tables.node_counts,  # after the nodes: deleting them moves the counts (.schema.node_counts)
    tables.namespaces,
)


def reset_all(conn: Connection, dry_run: bool = False) -> ResetCounts:
    """Remove every lineage row (see the module docstring for what stays); what went, or would go."""
    n = tables.nodes.c
    if dry_run:
        kinds: dict[str, int] = dict(conn.execute(select(n.kind, func.count()).group_by(n.kind)).all())
        return ResetCounts(
            events=_count(conn, tables.events, true()),
            runs=_count(conn, tables.runs, true()),
            jobs=kinds.get("job", 0),
            datasets=kinds.get("dataset", 0),
            edges=_count(conn, tables.edges, true()),
            io_groups=_count(conn, tables.io_groups, true()),
            fields=_count(conn, tables.fields, true()),
            column_edges=_count(conn, tables.column_edges, true()),
            tags=_count(conn, tables.node_tags, true()),
            symlinks=_count(conn, tables.symlinks, true()),
        )
    _hold_off_ingests(conn)
    kinds = dict(conn.execute(select(n.kind, func.count()).group_by(n.kind)).all())
    removed = {table.name: conn.execute(delete(table)).rowcount or 0 for table in _LINEAGE_TABLES}
    new_store_id(conn)  # what any process remembers of this store (recorded producers) no longer holds
    return ResetCounts(
        events=removed["lineage_events"],
        runs=removed["lineage_runs"],
        jobs=kinds.get("job", 0),
        datasets=kinds.get("dataset", 0),
        edges=removed["lineage_edges"],
        io_groups=removed["lineage_io_groups"],
        fields=removed["lineage_fields"],
        column_edges=removed["lineage_column_edges"],
        tags=removed["lineage_node_tags"],
        symlinks=removed["lineage_symlinks"],
    )


def _hold_off_ingests(conn: Connection) -> None:
    """On PostgreSQL, make concurrent ingests and appliers wait for the reset (SQLite writers are serialised
    already), so that no event is stored, and none applied, between what the reset reads and what it deletes.

    * ``lineage_pending_events`` ``EXCLUSIVE``: a deferred ingest logs its new events there in the transaction that
      stores them, and the applier locks the rows it applies (``FOR UPDATE``): the reset waits for a batch being
      applied, and neither logs nor batches begin until it commits;
    * ``lineage_nodes`` ``SHARE ROW EXCLUSIVE``: an inline ingest (and every other graph write) writes nodes.

    Both conflict with writes, not with reads. Taken in this order, the applier's (log rows, then nodes)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("LOCK TABLE lineage_pending_events IN EXCLUSIVE MODE")
        conn.exec_driver_sql("LOCK TABLE lineage_nodes IN SHARE ROW EXCLUSIVE MODE")


# -- one namespace --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    """The conditions selecting what a namespace reset removes, table by table."""

    namespace: str

    def nodes(self, kinds: tuple[str, ...] = NODE_KINDS) -> Any:
        n = tables.nodes.c
        return select(n.id).where(n.kind.in_(kinds), n.namespace == self.namespace)

    @property
    def node_rows(self) -> ColumnElement[bool]:
        n = tables.nodes.c
        return and_(n.kind.in_(NODE_KINDS), n.namespace == self.namespace)

    @property
    def runs(self) -> ColumnElement[bool]:
        return tables.runs.c.job_id.in_(self.nodes(("job",)))

    @property
    def run_io(self) -> ColumnElement[bool]:
        io, r = tables.run_io.c, tables.runs.c
        return or_(io.run_uuid.in_(select(r.run_uuid).where(self.runs)), io.dataset_id.in_(self.nodes()))

    @property
    def edges(self) -> ColumnElement[bool]:
        e = tables.edges.c
        return or_(e.origin_id.in_(self.nodes()), e.destination_id.in_(self.nodes()))

    @property
    def fields(self) -> ColumnElement[bool]:
        return tables.fields.c.dataset_id.in_(self.nodes(("dataset",)))

    @property
    def column_edges(self) -> ColumnElement[bool]:
        c, f = tables.column_edges.c, tables.fields.c
        gone = select(f.id).where(self.fields)
        return or_(c.source_field_id.in_(gone), c.target_field_id.in_(gone))

    def of_nodes(self, column: Any) -> ColumnElement[bool]:
        return column.in_(self.nodes())


@dataclass
class _GroupPlan:
    """What becomes of the io groups that hold a node of the namespace."""

    removed: list[int] = field(default_factory=list)
    #: ``group id → (new key, the namespace's datasets it loses)``.
    narrowed: dict[int, tuple[str, list[int]]] = field(default_factory=dict)
    #: ``group id → (the group it merges into, its last_seen)``.
    merged: dict[int, tuple[int, datetime]] = field(default_factory=dict)
    #: Surviving nodes that lose a pair: bumped.
    touched: set[int] = field(default_factory=set)


@dataclass
class _Plan:
    """A namespace reset, worked out without changing anything."""

    scope: _Scope
    events: list[int]
    events_of_jobs: int
    groups: _GroupPlan
    touched: set[int]
    #: Surviving datasets grouped with one of the namespace's: their dataset groups are derived again.
    regroup: set[int]


class SharedNamespace(Exception):
    """A namespace reset by a namespace-limited key would change what lies in namespaces the key cannot see."""


def reset_namespace(
    conn: Connection, namespace: str, dry_run: bool = False, visible: Collection[str] | None = None
) -> ResetCounts:
    """Remove namespace ``namespace``'s jobs and datasets and what refers to them (see the module docstring);
    what went, or would go. ``visible``: a limited key's visible namespaces; :class:`SharedNamespace` when
    the reset would reach beyond them (None: no check, no extra statement)."""
    if not dry_run:
        _hold_off_ingests(conn)
    plan = _plan(conn, _Scope(namespace))
    if visible is not None and _reaches_beyond(conn, plan, visible):
        raise _shared(namespace)
    if dry_run:
        return _planned_counts(conn, plan)
    new_store_id(conn)  # what any process remembers of this store (recorded producers) no longer holds
    return _apply(conn, plan)


def check_confined(conn: Connection, namespace: str, visible: Collection[str]) -> None:
    """Raise :class:`SharedNamespace` when a reset of ``namespace`` would reach beyond ``visible`` in what
    ``conn`` sees (a read transaction: no lock is taken and nothing is held off, so a limited key refused costs
    the writers nothing). :func:`reset_namespace` checks again in its own transaction."""
    if _reaches_beyond(conn, _plan(conn, _Scope(namespace)), visible):
        raise _shared(namespace)


def _shared(namespace: str) -> SharedNamespace:
    return SharedNamespace(
        f"namespace {namespace!r} is shared with namespaces this key cannot see (events, edges, runs, io "
        "groups, column lineage or claimed names link them): a reset needs a key without namespace limits"
    )


def _plan(conn: Connection, scope: _Scope) -> _Plan:
    e = tables.events.c
    events_of_jobs = _count(conn, tables.events, e.job_namespace == scope.namespace)
    groups = _plan_groups(conn, scope)
    m = tables.dataset_members.c
    survivors = m.node_id.not_in(scope.nodes())
    regroup = set(conn.execute(select(m.node_id).where(m.member_id.in_(scope.nodes()), survivors)).scalars())
    touched = _touched(conn, scope) | groups.touched | regroup
    return _Plan(scope, _events_naming(conn, scope.namespace), events_of_jobs, groups, touched, regroup)


def _reaches_beyond(conn: Connection, plan: _Plan, visible: Collection[str]) -> bool:
    """Whether carrying ``plan`` out would remove or change something that involves a namespace outside
    ``visible``: an event that names one, a claim of one, a run's input or output in one, or a surviving node
    in one (the far end of an edge, column edge, io group, rendering or dataset group of the namespace)."""
    dialect, scope = conn.dialect.name, plan.scope
    e, s, r, io = tables.events.c, tables.symlinks.c, tables.runs.c, tables.run_io.c
    hidden_event = event_names_hidden_namespace(visible, dialect)
    if conn.execute(select(exists().where(e.job_namespace == scope.namespace, hidden_event))).scalar():
        return True
    for ids in _chunks(plan.events):
        if conn.execute(select(exists().where(e.id.in_(ids), hidden_event))).scalar():
            return True
    claims = select(s.dataset_id).where(
        s.dataset_id.in_(scope.nodes()), not_(namespace_in(s.namespace, visible, dialect))
    )
    if conn.execute(select(exists(claims))).scalar():
        return True
    renderings = tables.pattern_renderings.c
    linked: list[Any] = [  # node ids: statements, or lists of ids
        select(io.dataset_id).where(io.run_uuid.in_(select(r.run_uuid).where(scope.runs))),
        select(renderings.dataset_id).where(renderings.pattern_id.in_(scope.nodes())),
        select(renderings.pattern_id).where(renderings.dataset_id.in_(scope.nodes())),
        *_chunks(sorted(plan.touched)),
    ]
    far = tables.nodes.alias("far_end")  # not the scope's own lineage_nodes, which the queries above read
    outside = not_(namespace_in(far.c.namespace, visible, dialect))
    return any(
        conn.execute(select(exists(select(far.c.id).where(far.c.id.in_(nodes), outside)))).scalar() for nodes in linked
    )


def _events_naming(conn: Connection, namespace: str) -> list[int]:
    """Ids of the events of other namespaces' jobs (and DatasetEvents) that name a node of ``namespace``.

    The database picks the events that name the namespace anywhere: by the namespaces a row lists, or, for an
    event stored before schema version 18, by its text (canonical JSON, :func:`..validation.canonical_json`: it
    holds ``"namespace":<the namespace as JSON>`` exactly). Each is read as the ingest reads it to keep only
    those naming it where the ingest makes a node.
    """
    e = tables.events.c
    quoted = json.dumps(namespace, ensure_ascii=True)
    mentioned = or_(
        and_(e.namespaces.is_(None), e.payload.contains('"namespace":' + quoted, autoescape=True)),
        e.namespaces.contains(quoted, autoescape=True),  # a JSON array of strings: a few false matches, read below
    )
    query = select(e.id, *payloads.payload_columns()).where(
        or_(e.job_namespace.is_(None), e.job_namespace != namespace), mentioned
    )
    rows = conn.execute(query.execution_options(yield_per=500))
    return [event_id for event_id, *stored in rows if _names_node_in(payloads.text_of(conn, *stored), namespace)]


def _names_node_in(payload: str, namespace: str) -> bool:
    """Whether an event makes (or names) a node in ``namespace`` when ingested."""
    try:
        event = parse_event(json.loads(payload), stored=True)
    except ValueError:  # stored events were valid: if one is not now, remove it with the namespace it names
        return True
    if event.job is not None and event.job.namespace == namespace:
        return True
    for ref in (event.dataset, *event.inputs, *event.outputs):
        if ref is None:
            continue
        if ref.namespace == namespace:
            return True
        if any(link.source_namespace == namespace for link in facet_readers.column_links(ref.facets)):
            return True
    return False


def _touched(conn: Connection, scope: _Scope) -> set[int]:
    """Surviving nodes at the other end of what goes: edges, column edges, runs' inputs and outputs."""
    e, c, r, io = tables.edges.c, tables.column_edges.c, tables.runs.c, tables.run_io.c
    gone = scope.nodes()
    source, target = tables.fields.alias("source"), tables.fields.alias("target")
    sides = [
        select(e.destination_id).where(e.origin_id.in_(gone), e.destination_id.not_in(gone)),
        select(e.origin_id).where(e.destination_id.in_(gone), e.origin_id.not_in(gone)),
        select(target.c.dataset_id)
        .join_from(tables.column_edges, source, source.c.id == c.source_field_id)
        .join(target, target.c.id == c.target_field_id)
        .where(source.c.dataset_id.in_(gone), target.c.dataset_id.not_in(gone)),
        select(source.c.dataset_id)
        .join_from(tables.column_edges, source, source.c.id == c.source_field_id)
        .join(target, target.c.id == c.target_field_id)
        .where(target.c.dataset_id.in_(gone), source.c.dataset_id.not_in(gone)),
        select(r.job_id)
        .join_from(tables.run_io, tables.runs, r.run_uuid == io.run_uuid)
        .where(io.dataset_id.in_(gone), r.job_id.not_in(gone)),
    ]
    return {node for query in sides for node in conn.execute(query).scalars()}


def _plan_groups(conn: Connection, scope: _Scope) -> _GroupPlan:
    """Which io groups go, which are narrowed to a new key, which merge into the group holding that key."""
    g, m, n = tables.io_groups.c, tables.io_members.c, tables.nodes.c
    gone = scope.nodes()
    affected = conn.execute(
        select(g.id, g.job_id, g.last_seen).where(
            or_(g.job_id.in_(gone), g.id.in_(select(m.group_id).where(m.dataset_id.in_(gone))))
        )
    ).all()
    plan = _GroupPlan()
    members: dict[int, list[tuple[str, int, str, bool]]] = {}
    job_keys: dict[int, tuple[str, bool]] = {}
    for ids in _chunks([group_id for group_id, _job, _seen in affected]):
        query = (
            select(m.group_id, m.direction, m.dataset_id, n.node_key, n.namespace)
            .join_from(tables.io_members, tables.nodes, n.id == m.dataset_id)
            .where(m.group_id.in_(ids))
        )
        for group_id, direction, dataset_id, key, namespace in conn.execute(query):
            members.setdefault(group_id, []).append((direction, dataset_id, key, namespace == scope.namespace))
    for ids in _chunks(sorted({job for _group, job, _seen in affected})):
        query = select(n.id, n.node_key, n.namespace).where(n.id.in_(ids))
        job_keys.update({row.id: (row.node_key, row.namespace == scope.namespace) for row in conn.execute(query)})
    new_keys: dict[int, str] = {}
    for group_id, job_id, _seen in affected:
        job_key, job_gone = job_keys.get(job_id, ("", True))
        kept = [(way, dataset, key) for way, dataset, key, lost in members.get(group_id, []) if not lost]
        plan.touched.update(dataset for _way, dataset, _key in kept)
        inputs = [key for way, _dataset, key in kept if way == "input"]
        outputs = [key for way, _dataset, key in kept if way == "output"]
        if job_gone or not inputs or not outputs:
            plan.removed.append(group_id)
        else:
            new_keys[group_id] = io_group_key(job_key, inputs, outputs)
        if not job_gone:
            plan.touched.add(job_id)
    _place_narrowed(conn, plan, new_keys, members, {group_id: seen for group_id, _job, seen in affected})
    return plan


def _place_narrowed(
    conn: Connection,
    plan: _GroupPlan,
    new_keys: dict[int, str],
    members: dict[int, list[tuple[str, int, str, bool]]],
    last_seen: dict[int, datetime],
) -> None:
    """Each narrowed group takes its new key, or merges into the group that holds it (one already stored,
    or an earlier narrowed group of this reset)."""
    g = tables.io_groups.c
    holders: dict[str, int] = {}
    for keys in _chunks(sorted(set(new_keys.values()))):
        holders.update(
            (key, group_id) for group_id, key in conn.execute(select(g.id, g.group_key).where(g.group_key.in_(keys)))
        )
    for group_id in sorted(new_keys):
        key = new_keys[group_id]
        if key in holders:
            plan.merged[group_id] = (holders[key], last_seen[group_id])
        else:
            holders[key] = group_id
            lost = [dataset for _way, dataset, _key, gone in members.get(group_id, []) if gone]
            plan.narrowed[group_id] = (key, lost)


def _planned_counts(conn: Connection, plan: _Plan) -> ResetCounts:
    scope, n = plan.scope, tables.nodes.c
    kinds: dict[str, int] = dict(
        conn.execute(select(n.kind, func.count()).where(scope.node_rows).group_by(n.kind)).all()
    )
    return ResetCounts(
        events=plan.events_of_jobs + len(plan.events),
        runs=_count(conn, tables.runs, scope.runs),
        jobs=kinds.get("job", 0),
        datasets=kinds.get("dataset", 0),
        edges=_count(conn, tables.edges, scope.edges),
        io_groups=len(plan.groups.removed) + len(plan.groups.merged),
        io_groups_narrowed=len(plan.groups.narrowed),
        fields=_count(conn, tables.fields, scope.fields),
        column_edges=_count(conn, tables.column_edges, scope.column_edges),
        tags=_count(conn, tables.node_tags, scope.of_nodes(tables.node_tags.c.node_id)),
        symlinks=_count(conn, tables.symlinks, scope.of_nodes(tables.symlinks.c.dataset_id)),
    )


def _deleted(conn: Connection, table: Table, where: ColumnElement[bool]) -> int:
    return conn.execute(delete(table).where(where)).rowcount or 0


def _apply(conn: Connection, plan: _Plan) -> ResetCounts:
    """Carry ``plan`` out: what refers to the namespace's nodes first, the nodes last, then the bumps."""
    scope, e, n = plan.scope, tables.events.c, tables.nodes.c
    counts = ResetCounts()
    # By condition, yet exactly the events planned and checked: ingests are held off (_hold_off_ingests).
    counts.events = _deleted(conn, tables.events, e.job_namespace == scope.namespace)
    counts.events += sum(_deleted(conn, tables.events, e.id.in_(ids)) for ids in _chunks(plan.events))
    forget_gone(conn)  # set-aside rows (deferred apply) of the events that went
    _forget_pending_gone(conn)  # and log rows of events logged, not applied yet, that went
    counts.io_groups, counts.io_groups_narrowed = _apply_groups(conn, plan.groups)
    _deleted(conn, tables.run_io, scope.run_io)
    counts.runs = _deleted(conn, tables.runs, scope.runs)
    counts.edges = _deleted(conn, tables.edges, scope.edges)
    links = tables.declared_column_links.c
    gone_fields = select(tables.fields.c.id).where(scope.fields)
    _deleted(conn, tables.declared_column_links, scope.of_nodes(links.job_id))
    _deleted(conn, tables.declared_column_links, links.source_field_id.in_(gone_fields))
    _deleted(conn, tables.declared_column_links, links.target_field_id.in_(gone_fields))
    counts.column_edges = _deleted(conn, tables.column_edges, scope.column_edges)
    counts.fields = _deleted(conn, tables.fields, scope.fields)
    counts.symlinks = _deleted(conn, tables.symlinks, scope.of_nodes(tables.symlinks.c.dataset_id))
    counts.tags = _deleted(conn, tables.node_tags, scope.of_nodes(tables.node_tags.c.node_id))
    _deleted(conn, tables.node_producers, scope.of_nodes(tables.node_producers.c.node_id))
    _deleted(conn, tables.dataset_members, scope.of_nodes(tables.dataset_members.c.node_id))
    renderings = tables.pattern_renderings.c
    _deleted(conn, tables.pattern_renderings, scope.of_nodes(renderings.pattern_id))
    _deleted(conn, tables.pattern_renderings, scope.of_nodes(renderings.dataset_id))
    _deleted(conn, tables.name_patterns, scope.of_nodes(tables.name_patterns.c.node_id))
    _deleted(conn, tables.datasets, scope.of_nodes(tables.datasets.c.node_id))
    _deleted(conn, tables.job_declarations, scope.of_nodes(tables.job_declarations.c.job_id))
    _deleted(conn, tables.jobs, scope.of_nodes(tables.jobs.c.node_id))
    kinds: dict[str, int] = dict(
        conn.execute(select(n.kind, func.count()).where(scope.node_rows).group_by(n.kind)).all()
    )
    counts.jobs, counts.datasets = kinds.get("job", 0), kinds.get("dataset", 0)
    _deleted(conn, tables.nodes, scope.node_rows)
    refresh_namespaces(conn, [scope.namespace])  # its row goes with its nodes
    identity.regroup(conn, plan.regroup)  # rows pointing at the removed datasets are rewritten with the groups
    _bump(conn, plan.touched)
    return counts


def _apply_groups(conn: Connection, plan: _GroupPlan) -> tuple[int, int]:
    """Remove, merge and narrow the io groups as planned: ``(groups removed, groups narrowed)``."""
    g, m = tables.io_groups.c, tables.io_members.c
    for into, seen in plan.merged.values():
        conn.execute(update(tables.io_groups).where(g.id == into, g.last_seen < seen).values(last_seen=seen))
    for group_id, (key, lost) in plan.narrowed.items():
        conn.execute(delete(tables.io_members).where(m.group_id == group_id, m.dataset_id.in_(lost)))
        conn.execute(update(tables.io_groups).where(g.id == group_id).values(group_key=key))
    gone = [*plan.removed, *plan.merged]
    for ids in _chunks(gone):
        conn.execute(delete(tables.io_members).where(m.group_id.in_(ids)))
        conn.execute(delete(tables.io_groups).where(g.id.in_(ids)))
    return len(gone), len(plan.narrowed)


def _forget_pending_gone(conn: Connection) -> None:
    """Remove the ingest log's rows whose raw event has gone: nothing is left to apply of them. No applier holds
    one: a reset holds them off (:func:`_hold_off_ingests`; on SQLite the writer is alone)."""
    p, e = tables.pending_events.c, tables.events.c
    conn.execute(delete(tables.pending_events).where(~exists().where(e.event_key == p.event_key)))


def _bump(conn: Connection, nodes: Iterable[int]) -> None:
    """Bump the version of ``nodes``: what answers show of them changed, so cached cards are read again."""
    for ids in _chunks(sorted(nodes)):
        bump_versions(conn, ids)
