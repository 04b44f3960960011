"""A job's declaration is its latest JobEvent (docs/declared-lineage.md, "The rule").

A JobEvent states what a job reads and writes *now*: the edges, table lineage (io group) and column-lineage links
it names are the job's declared lineage, and whatever an earlier JobEvent of the job named and this one does not
is no longer declared. "Latest" is by event time, the greater event key on a tie, so the outcome does not depend on
the order JobEvents arrive in (as a run's state does not, :mod:`.lifecycle`). A JobEvent naming no dataset (a
retired job's) leaves the job with no declaration.

At ingest, in the write transaction:

1. :func:`current_events` drops the batch's JobEvents that a later JobEvent of the same job supersedes, in the
   batch or stored: they stay stored (``lineage_events``) and change nothing else.
2. :func:`replace` records the surviving declarations in ``lineage_job_declarations`` (an upsert that only a
   newer declaration passes: concurrent batches declaring one job are serialized on its row, and the loser learns
   it lost) and clears what the replaced declarations named: the jobs' edges, io groups and column-lineage links
   lose their ``declared_at``. The batch's own writes then set it again on what the new declaration names.
3. :func:`sweep`, after the batch's writes, deletes what is left neither declared nor observed: an edge, io group
   or column edge that only a replaced declaration named is gone from every view (its events stay stored), and so
   is a dataset only such lineage named (no run, nothing else in the store pointing at it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, and_, bindparam, delete, exists, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.consumer.store.graph.identity import chunks
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.tables import as_utc
from airflow_lineage_provider.consumer.store.write.namespaces import of_nodes as namespaces_of_nodes
from airflow_lineage_provider.consumer.store.write.namespaces import refresh as refresh_namespaces
from airflow_lineage_provider.consumer.validation import LineageEvent

#: A column edge: ``(source_field_id, target_field_id)``.
ColumnEdge = tuple[int, int]


@dataclass(frozen=True)
class Declaration:
    """A job's declaration a batch brings: its JobEvent's time and key, and whether it named no dataset."""

    at: datetime
    event_key: str
    empty: bool

    def rank(self) -> tuple[datetime, str]:
        """What orders two declarations of one job: event time, then event key."""
        return (as_utc(self.at), self.event_key)


def is_declaration(event: LineageEvent) -> bool:
    """Whether ``event`` declares a job: a JobEvent (a job and no run)."""
    return event.job is not None and event.run_id is None


def of(event: LineageEvent) -> Declaration:
    """The declaration a JobEvent makes."""
    return Declaration(event.event_time, event.key, not event.inputs and not event.outputs)


def current_events(
    conn: Connection, events: Sequence[LineageEvent], key_of_job: Mapping[str, str]
) -> list[LineageEvent]:
    """``events`` without the JobEvents a later declaration of their job supersedes: a later JobEvent of the batch,
    or the declaration stored. ``key_of_job`` maps each event key of a JobEvent to its job's node key."""
    latest: dict[str, LineageEvent] = {}
    for event in events:
        if is_declaration(event):
            job = key_of_job[event.key]
            known = latest.get(job)
            if known is None or of(event).rank() > of(known).rank():
                latest[job] = event
    if not latest:
        return list(events)
    stored = _stored(conn, sorted(latest))
    # The stored declaration's own JobEvent again (stored again after a reset or retention removed it) is applied
    # again: only a new event reaches the apply.
    keep = {event.key for job, event in latest.items() if job not in stored or of(event).rank() >= stored[job]}
    return [event for event in events if not is_declaration(event) or event.key in keep]


def _stored(conn: Connection, job_keys: list[str]) -> dict[str, tuple[datetime, str]]:
    """The stored declarations of the jobs with these node keys: ``node key → (event time, event key)``."""
    n, d = tables.nodes.c, tables.job_declarations.c
    query = (
        select(n.node_key, d.declared_at, d.event_key)
        .select_from(tables.nodes.join(tables.job_declarations, d.job_id == n.id))
        .where(n.node_key.in_(bindparam("keys", expanding=True)))
    )
    found: dict[str, tuple[datetime, str]] = {}
    for keys in chunks(job_keys):
        for key, at, event_key in conn.execute(query, {"keys": keys}):
            found[key] = (as_utc(at), event_key)
    return found


@dataclass
class Replaced:
    """What :func:`replace` did: the jobs whose declaration the batch wrote, and the column edges their replaced
    declarations linked (for :func:`sweep`)."""

    jobs: list[int]
    column_edges: list[ColumnEdge]


def replace(conn: Connection, declared: Mapping[int, Declaration]) -> Replaced:
    """Record ``declared`` (job id → declaration) where it is newer than the stored one, and clear what the
    declarations it replaces named; the jobs whose declaration was written (the others lost to a newer one, stored
    meanwhile by another transaction: what they name must not be declared)."""
    if not declared:
        return Replaced([], [])
    d = tables.job_declarations
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    written: list[int] = []
    rows = [
        {"job_id": job, "declared_at": one.at, "event_key": one.event_key, "empty": int(one.empty)}
        for job, one in sorted(declared.items())
    ]
    for some in chunks(rows):
        statement = insert(d).values(some)
        newer = or_(
            statement.excluded.declared_at > d.c.declared_at,
            and_(statement.excluded.declared_at == d.c.declared_at, statement.excluded.event_key >= d.c.event_key),
        )
        upsert = statement.on_conflict_do_update(
            index_elements=["job_id"],
            set_={
                "declared_at": statement.excluded.declared_at,
                "event_key": statement.excluded.event_key,
                "empty": statement.excluded.empty,
            },
            where=newer,
        ).returning(d.c.job_id)
        written += [job for (job,) in conn.execute(upsert)]
    jobs = sorted(written)
    return Replaced(jobs, _clear(conn, jobs))


def _clear(conn: Connection, jobs: list[int]) -> list[ColumnEdge]:
    """Take ``declared_at`` off every edge, io group and column-lineage link of ``jobs``' declarations; the column
    edges they linked."""
    e, g, links, c = tables.edges, tables.io_groups, tables.declared_column_links, tables.column_edges
    linked: list[ColumnEdge] = []
    for ids in chunks(jobs):
        conn.execute(
            update(e)
            .where(or_(e.c.origin_id.in_(ids), e.c.destination_id.in_(ids)), e.c.declared_at.is_not(None))
            .values(declared_at=None)
        )
        conn.execute(update(g).where(g.c.job_id.in_(ids), g.c.declared_at.is_not(None)).values(declared_at=None))
        found = conn.execute(
            select(links.c.source_field_id, links.c.target_field_id).where(links.c.job_id.in_(ids))
        ).all()
        linked += [(source, target) for source, target in found]
        if found:
            conn.execute(delete(links).where(links.c.job_id.in_(ids)))
    linked = sorted(set(linked))
    if linked:
        still_linked = exists().where(
            links.c.source_field_id == c.c.source_field_id, links.c.target_field_id == c.c.target_field_id
        )
        conn.execute(
            update(c)
            .where(c.c.source_field_id == bindparam("b_source"), c.c.target_field_id == bindparam("b_target"))
            .where(c.c.declared_at.is_not(None), ~still_linked)
            .values(declared_at=None),
            [{"b_source": source, "b_target": target} for source, target in linked],
        )
    return linked


def sweep(conn: Connection, replaced: Replaced) -> None:
    """After the batch's writes: delete what the replaced declarations named and nothing declares or observed (the
    jobs' edges, io groups with their members, the column edges they linked), and forget the renderings of
    templated names no declaration names any more (:mod:`.templated_names` matches them again if one does)."""
    e, g, m, c = tables.edges, tables.io_groups, tables.io_members, tables.column_edges
    unseen_edge = and_(e.c.declared_at.is_(None), e.c.observed_at.is_(None))
    far_ends: set[int] = set()
    for ids in chunks(replaced.jobs):
        patterns = _undeclared_patterns(conn, ids)
        far_ends.update(conn.execute(select(e.c.origin_id).where(e.c.destination_id.in_(ids), unseen_edge)).scalars())
        far_ends.update(conn.execute(select(e.c.destination_id).where(e.c.origin_id.in_(ids), unseen_edge)).scalars())
        conn.execute(delete(e).where(or_(e.c.origin_id.in_(ids), e.c.destination_id.in_(ids)), unseen_edge))
        gone = [
            group
            for (group,) in conn.execute(
                select(g.c.id).where(g.c.job_id.in_(ids), g.c.declared_at.is_(None), g.c.observed_at.is_(None))
            )
        ]
        for groups in chunks(gone):
            conn.execute(delete(m).where(m.c.group_id.in_(groups)))
            conn.execute(delete(g).where(g.c.id.in_(groups)))
        if patterns:
            r = tables.pattern_renderings
            conn.execute(delete(r).where(r.c.pattern_id.in_(patterns)))
    if replaced.column_edges:
        conn.execute(
            delete(c)
            .where(c.c.source_field_id == bindparam("b_source"), c.c.target_field_id == bindparam("b_target"))
            .where(c.c.declared_at.is_(None), c.c.observed_at.is_(None)),
            [{"b_source": source, "b_target": target} for source, target in replaced.column_edges],
        )
        far_ends.update(_field_datasets(conn, {field for edge in replaced.column_edges for field in edge}))
    if far_ends:
        _forget_retracted_datasets(conn, sorted(far_ends))


def _field_datasets(conn: Connection, field_ids: set[int]) -> set[int]:
    f = tables.fields.c
    found: set[int] = set()
    for chunk in chunks(sorted(field_ids)):
        found.update(conn.execute(select(f.dataset_id).where(f.id.in_(chunk))).scalars())
    return found


def _forget_retracted_datasets(conn: Connection, candidates: list[int]) -> None:
    """Delete the datasets of ``candidates`` that only a replaced declaration named: no run named them
    (``observed_at`` NULL) and nothing in the store points at them any more — no edge, io group, column edge, run,
    tag, other name or group. (A dataset a ``DatasetEvent`` also declared cannot be told apart: the node keeps
    only the latest static event's time; it goes too, its events staying stored.)
    """
    n, f, c = tables.nodes, tables.fields, tables.column_edges
    e, m, io, tags = tables.edges, tables.io_members, tables.run_io, tables.node_tags
    s, members, patterns = tables.symlinks, tables.dataset_members, tables.pattern_renderings
    used_field = or_(
        exists().where(c.c.source_field_id == f.c.id),
        exists().where(c.c.target_field_id == f.c.id),
    )
    for ids in chunks(candidates):
        retracted = (
            select(n.c.id)
            .where(n.c.id.in_(ids), n.c.kind == "dataset", n.c.observed_at.is_(None))
            .where(~exists().where(or_(e.c.origin_id == n.c.id, e.c.destination_id == n.c.id)))
            .where(~exists().where(m.c.dataset_id == n.c.id), ~exists().where(io.c.dataset_id == n.c.id))
            .where(~exists().where(tags.c.node_id == n.c.id), ~exists().where(s.c.dataset_id == n.c.id))
            .where(~exists().where(members.c.node_id == n.c.id), ~exists().where(patterns.c.dataset_id == n.c.id))
            .where(~exists().where(f.c.dataset_id == n.c.id, used_field))
        )
        gone = list(conn.execute(retracted).scalars())
        if not gone:
            continue
        conn.execute(delete(tables.fields).where(f.c.dataset_id.in_(gone)))
        conn.execute(delete(tables.node_producers).where(tables.node_producers.c.node_id.in_(gone)))
        conn.execute(delete(tables.name_patterns).where(tables.name_patterns.c.node_id.in_(gone)))
        conn.execute(delete(patterns).where(patterns.c.pattern_id.in_(gone)))
        conn.execute(delete(tables.datasets).where(tables.datasets.c.node_id.in_(gone)))
        emptied = namespaces_of_nodes(conn, gone)
        conn.execute(delete(n).where(n.c.id.in_(gone)))
        refresh_namespaces(conn, emptied)


def _undeclared_patterns(conn: Connection, jobs: list[int]) -> list[int]:
    """The templated names (pattern nodes) these jobs' edges reach that no declared edge names any more."""
    e, p = tables.edges, tables.name_patterns
    reached = select(p.c.node_id).where(
        exists().where(
            or_(
                and_(e.c.origin_id == p.c.node_id, e.c.destination_id.in_(jobs)),
                and_(e.c.destination_id == p.c.node_id, e.c.origin_id.in_(jobs)),
            )
        )
    )
    candidates = [node for (node,) in conn.execute(reached)]
    if not candidates:
        return []
    declared = exists().where(
        or_(e.c.origin_id == p.c.node_id, e.c.destination_id == p.c.node_id), e.c.declared_at.is_not(None)
    )
    return [node for (node,) in conn.execute(select(p.c.node_id).where(p.c.node_id.in_(candidates), ~declared))]


def link_columns(conn: Connection, links: Sequence[tuple[int, int, int]]) -> None:
    """Record the column-lineage links declarations name: ``(job id, source field id, target field id)``."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = insert(tables.declared_column_links).on_conflict_do_nothing(
        index_elements=["job_id", "source_field_id", "target_field_id"]
    )
    conn.execute(statement, [{"job_id": j, "source_field_id": s, "target_field_id": t} for j, s, t in links])
