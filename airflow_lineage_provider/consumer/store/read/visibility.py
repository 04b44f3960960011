"""What a key limited to namespace patterns may see: the visible namespaces, as SQL conditions and in Python.

A request of such a key computes the *visible namespaces* once — the namespaces of the store's nodes that
the key's patterns match (:func:`visible_namespaces`) — and hands that list to the store's reads, which
filter with it: ``namespace IN visible`` in SQL (:func:`namespace_in`), ``in`` in Python. ``None`` means
every namespace: reads then build exactly the statements they build without this module (no join, no
extra query), so unlimited keys pay nothing.

One rule everywhere: a namespace is visible when some node lives in it and the patterns match it. So a
namespace named only inside a facet or an event (a symlink's, a parent job's) and by no node counts as
hidden — for a limited key the answer then shows less, never more.

Example::

    visible = visible_namespaces(conn, principal.namespaces)  # None, without a query, for an unlimited key
    if visible is not None:
        query = query.where(namespace_in(tables.nodes.c.namespace, visible, conn.dialect.name))
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection, Text, and_, any_, cast, exists, func, literal, not_, or_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.security.access import NamespaceScope
from airflow_lineage_provider.consumer.store.schema import tables

#: Visible namespaces (None: all): the list :func:`visible_namespaces` returns, or a set made of it.
Visible = Collection[str] | None


#: The kinds of node the ingest writes.
NODE_KINDS = ("job", "dataset")


def _namespaces_query() -> Any:
    """The namespaces of the nodes: the rows of the namespaces table the writer keeps (:mod:`.write.namespaces`),
    one per namespace, whatever the number of nodes."""
    return select(tables.namespaces.c.namespace)


def visible_namespaces(conn: Connection, scope: NamespaceScope | None) -> list[str] | None:
    """The namespaces of the store's nodes that ``scope`` shows, sorted; None (and no query) without a scope."""
    if scope is None:
        return None
    return scope.visible(sorted(conn.execute(_namespaces_query()).scalars()))


def namespace_in(column: Any, visible: Collection[str], dialect: str) -> ColumnElement[bool]:
    """``column`` is one of ``visible``, with the whole list as one parameter (any length).

    PostgreSQL: ``column = ANY(CAST(:list AS TEXT[]))``; SQLite: ``column IN (SELECT value FROM
    json_each(:json))``, which SQLite evaluates once into a temporary index.
    """
    names = list(visible)
    if dialect == "postgresql":
        return column == any_(cast(literal(names, postgresql.ARRAY(Text)), postgresql.ARRAY(Text)))
    listed = func.json_each(literal(json.dumps(names), Text)).table_valued("value")
    return column.in_(select(listed.c.value))


#: Every string value of a member named ``namespace``, at any depth of a JSON document (PostgreSQL).
_NAMESPACES_PATH = 'lax $.**.namespace ? (@.type() == "string")'


def names_hidden_namespace(payload: Any, visible: Collection[str], dialect: str) -> ColumnElement[bool]:
    """Whether the JSON text ``payload`` has a member ``"namespace": "<a namespace not in visible>"`` anywhere.

    Anywhere: the job, inputs, outputs, a DatasetEvent's dataset, the parent facet's job and root job,
    column-lineage input fields, symlinks, and any other facet that names a namespace. Members that are not
    strings name no namespace and are ignored. SQLite reads the document with ``json_tree``, PostgreSQL
    with ``jsonb_path_query``; either parses every document it is asked about.
    """
    if dialect == "postgresql":
        path = cast(literal(_NAMESPACES_PATH), postgresql.JSONPATH)
        # jsonb refuses \u0000, which the stored text may hold in a facet (names never do): read it as U+FFFD.
        document = cast(func.replace(payload, "\\u0000", "\\ufffd"), postgresql.JSONB)
        named = func.jsonb_path_query(document, path).table_valued("named").render_derived()
        text = named.c.named.op("#>>")(cast(literal([], postgresql.ARRAY(Text)), postgresql.ARRAY(Text)))
        return exists(select(1).select_from(named).where(not_(namespace_in(text, visible, dialect))))
    tree = func.json_tree(payload).table_valued("key", "value", "type")
    return exists(
        select(1)
        .select_from(tree)
        .where(tree.c.key == "namespace", tree.c.type == "text", not_(namespace_in(tree.c.value, visible, dialect)))
    )


def event_names_hidden_namespace(visible: Collection[str], dialect: str) -> ColumnElement[bool]:
    """Whether a ``lineage_events`` row names a namespace not in ``visible`` anywhere (the rule of
    :func:`names_hidden_namespace`): read from the row's ``namespaces`` list, or, for an event stored before the
    store kept that list (schema version 18), from its text."""
    e = tables.events.c
    if dialect == "postgresql":
        listed = cast(func.replace(e.namespaces, "\\u0000", "\\ufffd"), postgresql.JSONB)  # as the text is read
        named = func.jsonb_array_elements_text(listed).table_valued("value").render_derived()
    else:
        named = func.json_each(e.namespaces).table_valued("value")
    in_list = exists(select(1).select_from(named).where(not_(namespace_in(named.c.value, visible, dialect))))
    return or_(
        and_(e.namespaces.is_(None), names_hidden_namespace(e.payload, visible, dialect)),
        and_(e.namespaces.is_not(None), in_list),
    )


def _hidden(value: Any, visible: Collection[str]) -> bool:
    return isinstance(value, dict) and isinstance(value.get("namespace"), str) and value["namespace"] not in visible


def scrub(value: Any, visible: Collection[str]) -> Any:
    """``value`` (decoded facets) without the objects that name a namespace outside ``visible``.

    An object with a ``"namespace"`` string member not in ``visible`` is dropped from the list or object
    holding it: a column-lineage input field, a symlink, a parent facet's ``job``. The same rule as
    :func:`names_hidden_namespace`, which hides a whole raw event instead. Free text (a SQL facet's query)
    is not read.
    """
    if isinstance(value, dict):
        return {key: scrub(item, visible) for key, item in value.items() if not _hidden(item, visible)}
    if isinstance(value, list):
        return [scrub(item, visible) for item in value if not _hidden(item, visible)]
    return value
