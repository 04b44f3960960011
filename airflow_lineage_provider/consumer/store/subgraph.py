"""A walk's subgraph in Marquez's shape: the picked nodes with their data and the edges among them.

One statement runs the walk and returns the picked nodes with their versions and the edges among them
(a depth-10 walk on the benchmark graph: ~3,000 nodes, ~4,400 edges). The nodes' data comes from the
store's graph cards (:mod:`.graph_cards`); only nodes without a card at their current version are read,
by a second statement with times formatted by the database. Nodes and edges are ``msgspec`` structs,
cheaper to build, encode and free than dicts; a dataset's schema is spliced in as the stored JSON text.
A node's ``type`` is what its facets say (:mod:`..marquez_values`); the database reads only the facets that
decide it (``jobType``, ``datasetType``, ``dataSource``), not all of a node's facets.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from sqlalchemy import BigInteger, Connection, String, any_, bindparam, func, literal, null, select, union_all
from sqlalchemy.dialects import postgresql

from airflow_lineage_provider.consumer.marquez_values import dataset_type, job_type
from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.graph_cards import GraphCard, GraphCards
from airflow_lineage_provider.consumer.store.json_paths import json_member, member_value
from airflow_lineage_provider.consumer.store.sqltime import iso_utc


class Edge(msgspec.Struct):
    """An edge of the graph response, by node id."""

    origin: str
    destination: str


class NodeName(msgspec.Struct):
    namespace: str
    name: str


class LatestRun(msgspec.Struct, omit_defaults=True):
    """A job's latest run; a time it does not have is left out (Marquez serializes without nulls)."""

    id: str
    state: str
    startedAt: str | None = None
    endedAt: str | None = None


class DatasetData(msgspec.Struct):
    id: NodeName
    name: str
    namespace: str
    updatedAt: str
    type: str
    fields: msgspec.Raw  # the stored JSON text, spliced into the response as it is


class JobData(msgspec.Struct, omit_defaults=True):
    """A job node's data; ``latestRun`` is left out for a job without runs (Marquez serializes without nulls)."""

    id: NodeName
    name: str
    namespace: str
    updatedAt: str
    type: str
    simpleName: str
    latestRun: LatestRun | None = None


class GraphNode(msgspec.Struct):
    """A node of Marquez's graph shape: ``dataset:<ns>:<name>`` or ``job:<ns>:<name>``."""

    id: str
    type: str
    data: Any  # DatasetData | JobData, shared with the card
    inEdges: list[Edge]
    outEdges: list[Edge]


_NO_FIELDS = msgspec.Raw(b"[]")


def _schema_fields(text: str) -> msgspec.Raw:
    """A dataset's stored fields as JSON to splice in, without members that are null (``"description":
    null``): Marquez leaves out what it does not know. Decoded only when the text holds a null."""
    if "null" not in text:
        return msgspec.Raw(text)
    fields = msgspec.json.decode(text)
    if isinstance(fields, list):
        fields = [
            {k: v for k, v in field.items() if v is not None} if isinstance(field, dict) else field for field in fields
        ]
    return msgspec.Raw(msgspec.json.encode(fields))


#: The facets that decide a node's type (see :mod:`..marquez_values`), read by the database.
TYPE_FACETS = (("job", "jobType"), ("dataset", "datasetType"), ("dataset", "dataSource"))


def _card_columns(dialect: str) -> list[Any]:
    """What a card is read from: ``kind, namespace, name, updatedAt, fields, run id, state, started, ended``
    and the JSON text of each of :data:`TYPE_FACETS`."""
    n, d, j, r = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c
    facets = {"job": j.facets, "dataset": d.facets}
    return [
        n.kind,
        n.namespace,
        n.name,
        iso_utc(n.updated_at),
        d.fields,
        r.run_uuid,
        r.state,
        iso_utc(r.started_at),
        iso_utc(r.ended_at),
        *(json_member(facets[kind], (name,), dialect) for kind, name in TYPE_FACETS),
    ]


def _with_card_tables(query: Any) -> Any:
    n, d, j, r = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c
    return (
        query.outerjoin(tables.datasets, d.node_id == n.id)
        .outerjoin(tables.jobs, j.node_id == n.id)
        .outerjoin(tables.runs, r.run_uuid == j.latest_run_uuid)
    )


def _card(row: Any) -> GraphCard:
    """A card from the columns of :func:`_card_columns`."""
    kind, namespace, name, updated_at, fields, run_uuid, state, started, ended, *said = row
    node_name = NodeName(namespace, name)
    said_facets = zip(TYPE_FACETS, said, strict=True)
    facets = {facet: member_value(text) for (of, facet), text in said_facets if of == kind and text}
    if kind == "dataset":
        schema = _schema_fields(fields) if fields else _NO_FIELDS
        data = DatasetData(node_name, name, namespace, updated_at, dataset_type(facets, namespace), schema)
        return GraphCard(f"dataset:{namespace}:{name}", "DATASET", data)
    run = LatestRun(run_uuid, state, started, ended) if run_uuid else None
    data = JobData(node_name, name, namespace, updated_at, job_type(facets), name, run)
    return GraphCard(f"job:{namespace}:{name}", "JOB", data)


def subgraph(
    conn: Connection, picked: Any, cards: GraphCards | None = None
) -> tuple[dict[int, GraphNode], list[tuple[int, int]]]:
    """The nodes a walk picked, with their data, and every edge among them.

    ``picked`` selects ``(node_id, depth)`` (see :func:`..graph.nearest_nodes`). Returns ``id → node`` in
    Marquez's graph shape (empty ``inEdges``/``outEdges``), nearest first, and the ``(origin,
    destination)`` edges, for ``msgspec.json.encode``.

    ``cards`` is the store's cache. When the previous walk found most of its nodes' cards there, the walk
    statement reads versions only and the missing cards are read after; otherwise (and without a cache)
    it reads every node's data along, in the same statement.
    """
    cards = cards if cards is not None else GraphCards(0)
    along = not cards.mostly_hits()
    n, e = tables.nodes.c, tables.edges.c
    chosen = picked.cte("picked")
    columns = _card_columns(conn.dialect.name) if along else []
    node_rows = select(literal("n").label("row"), chosen.c.node_id, chosen.c.depth, n.version, *columns)
    node_rows = node_rows.join_from(chosen, tables.nodes, n.id == chosen.c.node_id)
    if along:
        node_rows = _with_card_tables(node_rows)
    origin, destination = chosen.alias("origin"), chosen.alias("destination")
    edge_rows = (
        select(literal("e"), e.origin_id, e.destination_id, *(null() for _ in range(len(columns) + 1)))
        .join_from(tables.edges, origin, origin.c.node_id == e.origin_id)
        .join(destination, destination.c.node_id == e.destination_id)
    )
    # Every column is an int or text: read the driver's tuples as they are (thousands of rows).
    result = conn.execute(union_all(node_rows, edge_rows))
    rows = result.cursor.fetchall()
    result.close()
    picked_rows = sorted((row for row in rows if row[0] == "n"), key=lambda row: (row[2], row[1]))
    found, missing = cards.lookup({row[1]: row[3] for row in picked_rows})
    hits = len(found)
    if along:  # the data came with the walk: cards for what the cache did not hold
        wanted = set(missing)
        read = [(row[1], row[3], _card(row[4:])) for row in picked_rows if row[1] in wanted]
    else:
        read = _read_cards(conn, missing) if missing else []
    found.update((node_id, card) for node_id, _version, card in read)
    cards.store(read, hits=hits)
    nodes = {}
    for row in picked_rows:
        card = found[row[1]]
        nodes[row[1]] = GraphNode(card.id, card.type, card.data, [], [])
    return nodes, [(row[1], row[2]) for row in rows if row[0] == "e"]


@cache
def _card_query(dialect: str) -> Any:
    """``id, version`` and card columns of the nodes whose ids ``ids`` holds, in one statement.

    ``ids`` is an array on PostgreSQL and JSON text on SQLite (read with ``json_each``).
    """
    n = tables.nodes.c
    if dialect == "postgresql":
        wanted = n.id == any_(bindparam("ids", type_=postgresql.ARRAY(BigInteger)))
    else:
        listed = func.json_each(bindparam("ids", type_=String)).table_valued("value")
        wanted = n.id.in_(select(listed.c.value))
    return _with_card_tables(select(n.id, n.version, *_card_columns(dialect))).where(wanted)


def _read_cards(conn: Connection, ids: list[int]) -> list[tuple[int, int, GraphCard]]:
    """``(node id, version, card)`` of ``ids``, read now (possibly at a newer version than the walk saw)."""
    dialect = conn.dialect.name
    parameter = ids if dialect == "postgresql" else msgspec.json.encode(ids).decode()
    result = conn.execute(_card_query(dialect), {"ids": parameter})
    rows = result.cursor.fetchall()
    result.close()
    return [(row[0], row[1], _card(row[2:])) for row in rows]
