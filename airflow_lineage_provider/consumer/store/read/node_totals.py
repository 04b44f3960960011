"""Totals of a listing from the counts the database keeps (:mod:`.schema.node_counts`)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Connection, func, select

from airflow_lineage_provider.consumer.store.read.visibility import namespace_in
from airflow_lineage_provider.consumer.store.schema import tables


def total(conn: Connection, kind: str, namespace: str | None = None, visible: Collection[str] | None = None) -> int:
    """How many nodes of ``kind`` the store holds — in ``namespace`` if given, in the ``visible`` namespaces if
    given (None: all) — as of the transaction of ``conn``."""
    c = tables.node_counts.c
    query = select(func.coalesce(func.sum(c.nodes), 0)).where(c.kind == kind)
    if namespace is not None:
        query = query.where(c.namespace == namespace)
    if visible is not None:
        query = query.where(namespace_in(c.namespace, visible, conn.dialect.name))
    return int(conn.execute(query).scalar_one())
