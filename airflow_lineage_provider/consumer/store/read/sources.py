"""Marquez's sources, derived from what the events say about datasets (nothing is stored for them).

The rule, one for a dataset's ``sourceName`` and for ``GET /api/v1/sources``: a dataset's source is the
``dataSource`` facet's ``name`` (as stored: the facets of the latest event that gave the dataset facets),
or, without one, the dataset's namespace (OpenLineage names a dataset's namespace after its data source:
``postgres://db:5432``, ``kafka://broker:9092``); every stored name of a dataset counts, an alias's too (see
:mod:`.dataset_aliases`: each is a connection some producer named). A source's ``connectionUrl`` is the
facet's ``uri``, or the namespace without one; its ``type`` is the URL's scheme in capitals (``POSTGRESQL`` for
``postgres`` and ``postgresql``, ``KAFKA``, ``S3``, ...; ``jdbc:`` is skipped), ``UNKNOWN`` when the URL has
none (Marquez's word for a value it does not know). ``createdAt`` / ``updatedAt``: when the first and the
latest dataset of the source were first and last seen; when datasets disagree on a source's URL, the most
recently updated one's wins.

:func:`source_of` says it in Python, :func:`_per_dataset` in SQL (SQLite ``json_extract``, PostgreSQL
``jsonb``), so that a listing reads only the two facet values per dataset from the database instead of
decoding every dataset's facets in Python.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection, Text, case, cast, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.read.text import iso
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables

#: URL schemes whose Marquez source type is not simply the scheme in capitals.
SCHEME_TYPES = {"postgres": "POSTGRESQL", "postgresql": "POSTGRESQL"}
#: Marquez's word for a value it does not know.
UNKNOWN = "UNKNOWN"
_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*$")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def source_of(facets: dict[str, Any] | None, namespace: str) -> tuple[str, str]:
    """``(name, connectionUrl)`` of the source of a dataset in ``namespace`` with these stored ``facets``."""
    facet = (facets or {}).get("dataSource")
    if not isinstance(facet, dict):
        return namespace, namespace
    return _text(facet.get("name")) or namespace, _text(facet.get("uri")) or namespace


def source_type(url: str) -> str:
    """Marquez's source ``type`` for a connection URL: its scheme in capitals, ``UNKNOWN`` without one."""
    if "://" not in url:
        return UNKNOWN
    scheme = url.split("://", 1)[0].lower().removeprefix("jdbc:")
    if not _SCHEME.match(scheme):
        return UNKNOWN
    return SCHEME_TYPES.get(scheme, scheme.upper())


def _facet_text(facets: Any, facet: str, key: str, dialect: str) -> ColumnElement[Any]:
    """``facets[facet][key]`` of the JSON text column ``facets`` when it is a non-empty string, else NULL."""
    if dialect == "postgresql":
        # jsonb refuses \u0000, which stored facets may hold: read it as U+FFFD (as visibility.py does).
        document = cast(func.replace(facets, "\\u0000", "\\ufffd"), postgresql.JSONB)
        value = document[facet][key]
        text: ColumnElement[Any] = case((func.jsonb_typeof(value) == "string", value.astext), else_=None)
    else:
        path = f'$."{facet}"."{key}"'
        text = case((func.json_type(facets, path) == "text", func.json_extract(facets, path)), else_=None)
    return func.nullif(cast(text, Text), "")


def _per_dataset(dialect: str, visible: Visible) -> Any:
    """Each dataset's source name and URL (the module's rule in SQL), with its first and last seen times."""
    n, d = tables.nodes.c, tables.datasets.c
    query = (
        select(
            func.coalesce(_facet_text(d.facets, "dataSource", "name", dialect), n.namespace).label("source"),
            func.coalesce(_facet_text(d.facets, "dataSource", "uri", dialect), n.namespace).label("url"),
            n.created_at,
            n.updated_at,
        )
        .select_from(tables.nodes)
        .outerjoin(tables.datasets, d.node_id == n.id)
        .where(n.kind == "dataset")
    )
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, dialect))
    return query.subquery("dataset_sources")


def _sources(conn: Connection, visible: Visible, name: str | None = None) -> list[dict[str, Any]]:
    each = _per_dataset(conn.dialect.name, visible)
    query = select(
        each.c.source,
        each.c.url,
        func.min(each.c.created_at).label("created"),
        func.max(each.c.updated_at).label("updated"),
    ).group_by(each.c.source, each.c.url)
    if name is not None:
        query = query.where(each.c.source == name)
    found: dict[str, dict[str, Any]] = {}
    for source, url, created, updated in conn.execute(query):
        known = found.get(source)
        if known is None:
            found[source] = {"created": created, "updated": updated, "url": url, "url_seen": updated}
            continue
        if (updated, url) > (known["url_seen"], known["url"]):
            known["url"], known["url_seen"] = url, updated
        known["created"] = min(known["created"], created)
        known["updated"] = max(known["updated"], updated)
    return [
        {
            "type": source_type(value["url"]),
            "name": source,
            "createdAt": iso(value["created"]),
            "updatedAt": iso(value["updated"]),
            "connectionUrl": value["url"],
        }
        for source, value in sorted(found.items())
    ]


def list_sources(
    conn: Connection, limit: int, offset: int, visible: Visible = None
) -> tuple[list[dict[str, Any]], int]:
    """Sources by name, a page of them, and how many there are (of the datasets ``visible`` shows)."""
    every = _sources(conn, visible)
    return every[offset : offset + limit], len(every)


def get_source(conn: Connection, name: str, visible: Visible = None) -> dict[str, Any] | None:
    """The source ``name`` (Marquez's ``Source``), or None when no (visible) dataset has it."""
    found = _sources(conn, visible, name)
    return found[0] if found else None
