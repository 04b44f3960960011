"""The namespaces table (``lineage_namespaces``): one row per namespace of the jobs and datasets, kept by the writer.

A namespace's row says when its first node was created (the earliest ``created_at`` of its nodes, exact) and when
its latest node was updated (the latest ``updated_at`` of its nodes, within :data:`UPDATED_PRECISION`), so a listing
of namespaces reads one row per namespace it shows instead of grouping every node of the store.

* **Ingest** (:func:`note_nodes`, from the write of the batch's nodes): a namespace the store does not hold yet is
  inserted (``ON CONFLICT DO NOTHING``: several processes may apply at once); ``created_at`` is lowered when an
  older node appears (events arrive in any order); ``updated_at`` is raised only when the batch moves it on by more
  than :data:`UPDATED_PRECISION`. Most batches of a busy deployment name namespaces already held at most a minute
  behind, and write nothing here: appliers of several processes do not queue on one row per namespace each batch.
  A plain ``UPDATE ... WHERE`` that matches nothing locks nothing, which an ``ON CONFLICT DO UPDATE`` would.
* **Deletes of nodes** (a namespace reset, a dataset only a replaced declaration named) call :func:`refresh` for
  the namespaces that lost nodes: a namespace left without any goes, the others take their nodes' times again.
  A reset of the whole store empties the table with the others. Retention deletes no node.

So ``updatedAt`` of a namespace may trail its latest node's by up to :data:`UPDATED_PRECISION`, never lead it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import Connection, Update, and_, bindparam, case, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.consumer.store.graph.identity import chunks
from airflow_lineage_provider.consumer.store.read.visibility import NODE_KINDS
from airflow_lineage_provider.consumer.store.schema import tables

#: How far a namespace's ``updated_at`` may trail the latest ``updated_at`` of its nodes: it is raised only when an
#: ingest moves it on by more than this.
UPDATED_PRECISION = timedelta(minutes=1)

#: A span of event times: the earliest and the latest.
Span = tuple[datetime, datetime]


def spans(nodes: Iterable[tuple[str, Span]]) -> dict[str, Span]:
    """The span of each namespace over ``nodes`` (``(namespace, (created, updated))`` each)."""
    found: dict[str, Span] = {}
    for namespace, (first, last) in nodes:
        known = found.get(namespace)
        found[namespace] = (first, last) if known is None else (min(known[0], first), max(known[1], last))
    return found


def note_nodes(conn: Connection, nodes: Iterable[tuple[str, Span]]) -> None:
    """:func:`note` of the nodes an ingest wrote (``(namespace, (created, updated))`` each)."""
    note(conn, spans(nodes))


def note(conn: Connection, written: Mapping[str, Span]) -> None:
    """Record that nodes of each namespace of ``written`` were written with those times (see the module docstring).

    An ``INSERT ... ON CONFLICT DO NOTHING`` of every namespace of the batch (one held already costs an index probe
    and writes nothing; one a concurrent :func:`refresh` is deleting is inserted again once that commits), one read
    of the rows it did not insert, and an update only of those whose times the batch moves."""
    if not written:
        return
    ns = tables.namespaces.c
    # In name order, as the updates: two appliers inserting the same new namespaces wait on each other in one order.
    rows = [
        {"namespace": name, "created_at": first, "updated_at": last} for name, (first, last) in sorted(written.items())
    ]
    inserted = set(conn.execute(_insert(conn.dialect.name), rows).scalars())
    held = sorted(set(written) - inserted)
    moving = []
    for chunk in chunks(held):
        query = select(ns.namespace, ns.created_at, ns.updated_at).where(ns.namespace.in_(chunk))
        moving += [name for name, created, updated in conn.execute(query) if _moves((created, updated), *written[name])]
    if moving:
        conn.execute(_raise_times(), [_bounds(name, *written[name]) for name in sorted(moving)])


@cache
def _insert(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT DO NOTHING RETURNING namespace``: answers the namespaces it inserted."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(tables.namespaces).on_conflict_do_nothing(index_elements=["namespace"])
    return statement.returning(tables.namespaces.c.namespace)


def _moves(stored: Span, first: datetime, last: datetime) -> bool:
    created, updated = stored
    return first < created or last - UPDATED_PRECISION > updated


def _bounds(name: str, first: datetime, last: datetime) -> dict[str, object]:
    return {"name": name, "first": first, "last": last, "stale": last - UPDATED_PRECISION}


@cache
def _raise_times() -> Update:
    """``created_at`` lowered to ``:first`` and ``updated_at`` raised to ``:last`` where either moves (the stored
    ``updated_at`` before ``:stale``): the row's current values decide, not what :func:`note` read."""
    n = tables.namespaces
    first = bindparam("first", type_=n.c.created_at.type)
    last, stale = bindparam("last", type_=n.c.updated_at.type), bindparam("stale", type_=n.c.updated_at.type)
    return (
        update(n)
        .where(n.c.namespace == bindparam("name"), or_(n.c.created_at > first, n.c.updated_at < stale))
        .values(
            created_at=case((n.c.created_at > first, first), else_=n.c.created_at),
            updated_at=case((n.c.updated_at < last, last), else_=n.c.updated_at),
        )
    )


def of_nodes(conn: Connection, node_ids: Iterable[int]) -> set[str]:
    """The namespaces of the nodes ``node_ids`` (read before they are deleted, for :func:`refresh` after)."""
    n = tables.nodes.c
    found: set[str] = set()
    for chunk in chunks(sorted(node_ids)):
        found.update(conn.execute(select(n.namespace).where(n.id.in_(chunk)).distinct()).scalars())
    return found


def refresh(conn: Connection, names: Iterable[str]) -> None:
    """After nodes of namespaces ``names`` were deleted: each namespace takes its nodes' times again (exact), and
    goes when no node is left in it."""
    n, ns = tables.nodes.c, tables.namespaces.c
    for name in sorted(set(names)):
        held = and_(n.kind.in_(NODE_KINDS), n.namespace == name)
        created, updated = conn.execute(select(func.min(n.created_at), func.max(n.updated_at)).where(held)).one()
        if created is None:
            conn.execute(delete(tables.namespaces).where(ns.namespace == name))
        else:
            conn.execute(
                update(tables.namespaces).where(ns.namespace == name).values(created_at=created, updated_at=updated)
            )
