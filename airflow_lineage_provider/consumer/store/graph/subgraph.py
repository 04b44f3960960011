"""A walk's subgraph in Marquez's shape: the picked nodes with their data and the edges among them.

One statement runs the walk and returns the picked nodes with their versions and the edges among them
(a depth-10 walk on the benchmark graph: ~3,000 nodes, ~4,400 edges). The nodes' data comes from the
store's graph cards (:mod:`.cards`); only nodes without a card at their current version are read,
by a second statement with times formatted by the database. Nodes and edges are ``msgspec`` structs,
cheaper to build, encode and free than dicts; a dataset's schema is spliced in as the stored JSON text.
A node's ``type`` is what its facets say (:mod:`.node_types`); the database reads only the facets that
decide it (``jobType``, ``datasetType``, ``dataSource``), not all of a node's facets.

**One node per dataset** (:func:`grouped_subgraph`, for a store with groups, see :mod:`.identity`): the walk's
rows are nodes as stored, every name of a group it reached being one, each with its group's canonical id. A
dataset known under several names is shown once, as its *representative* — the group's canonical name, or,
for a key that cannot see it, the first visible name in ``(namespace, name)`` order (the rule listings follow,
:mod:`.dataset_aliases`). Every edge among the rows is drawn between the nodes shown for its ends, once. The
shown node's data is its own (name, type) with, over its visible names, the latest ``updatedAt`` and the latest
schema any name received, plus ``aliases`` (each other visible name with ``via`` and ``producers``, as listings
show them) and its own ``producers``. That card is kept in the graph cards' group cache
(:attr:`.cards.GraphCards.groups`) with the names it was read over, keyed by the canonical name's
version and the sum of the names' versions: every change of a name bumps its version, and a change of the
group bumps every name's (:func:`.identity.regroup`), so the next walk finds it by the versions it read, without
reading the group. A key that cannot see every name of a group gets a card read for it, not kept.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from functools import cache, lru_cache
from operator import itemgetter
from typing import Any

import msgspec
from sqlalchemy import (
    BigInteger,
    Connection,
    String,
    any_,
    bindparam,
    case,
    func,
    literal,
    null,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.graph import dataset_aliases, renderings
from airflow_lineage_provider.consumer.store.graph.cards import GraphCard, GraphCards
from airflow_lineage_provider.consumer.store.graph.node_types import dataset_type, job_type
from airflow_lineage_provider.consumer.store.graph.nodes import representative
from airflow_lineage_provider.consumer.store.graph.walks import Declared, declared_filter
from airflow_lineage_provider.consumer.store.read.json_paths import json_member, member_value
from airflow_lineage_provider.consumer.store.read.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store.schema import tables


class Edge(msgspec.Struct):
    """An edge of the graph response, by node id: whether a JobEvent ``declared`` it and a run ``observed`` it."""

    origin: str
    destination: str
    declared: bool = False
    observed: bool = False


#: Bits of an edge row's flags (see :func:`_walk_rows`): declared by a JobEvent, observed by a RunEvent.
DECLARED, OBSERVED = 1, 2


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


class Alias(msgspec.Struct, gc=False):
    """Another name of a dataset shown as one node: how it joined the group, and who used it."""

    namespace: str
    name: str
    via: str
    producers: list[str]


class GroupedDatasetData(DatasetData, gc=False):
    """A dataset known under several names: its data over its names, its ``aliases`` and own ``producers``."""

    aliases: list[Alias]
    producers: list[str]


class JobData(msgspec.Struct, omit_defaults=True):
    """A job node's data; ``latestRun`` is left out for a job without runs (Marquez serializes without nulls)."""

    id: NodeName
    name: str
    namespace: str
    updatedAt: str
    type: str
    simpleName: str
    latestRun: LatestRun | None = None


class GraphNode(msgspec.Struct, omit_defaults=True, gc=False):
    """A node of Marquez's graph shape: ``dataset:<ns>:<name>`` or ``job:<ns>:<name>``; ``declaredOnly`` (left
    out when false) marks a node no RunEvent named, known only from JobEvents or DatasetEvents."""

    id: str
    type: str
    data: Any  # DatasetData | JobData, shared with the card
    inEdges: list[Edge]
    outEdges: list[Edge]
    declaredOnly: bool = False


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


#: The type of a job whose facets say nothing of it.
_PLAIN_JOB_TYPE = job_type(None)


@lru_cache(maxsize=1024)
def _namespace_dataset_type(namespace: str) -> str:
    """The type of a dataset whose facets say nothing of it: its namespace's (a stream's scheme or not)."""
    return dataset_type(None, namespace)


#: Stored schema texts → their JSON to splice in, for the cards built from one statement's rows (see :func:`_card`).
Schemas = dict[str, msgspec.Raw]


#: The facets that decide a node's type (see :mod:`.node_types`), read by the database.
TYPE_FACETS = (("job", "jobType"), ("dataset", "datasetType"), ("dataset", "dataSource"))


def _card_columns(dialect: str) -> list[Any]:
    """What a card is read from: ``kind, namespace, name, updatedAt, fields, run id, state, started, ended``,
    1 when no RunEvent named the node (declared only) and the JSON text of each of :data:`TYPE_FACETS`."""
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
        case((n.observed_at.is_(None), 1), else_=0),
        *(_type_facet(facets[kind], name, dialect) for kind, name in TYPE_FACETS),
    ]


def _type_facet(facets: Any, name: str, dialect: str) -> Any:
    """SQL: the facet ``name`` of the JSON text ``facets`` (:func:`.json_member`). On PostgreSQL, which parses the
    text again for every member read, only a text that may hold it is parsed: one with the key as written, or
    with a ``\\u`` escape (the only way to write one of its letters otherwise). SQLite keeps a statement's
    parsed texts, so there the member is read as is."""
    member = json_member(facets, (name,), dialect)
    if dialect != "postgresql":
        return member
    may_hold = or_(func.strpos(facets, f'"{name}"') > 0, func.strpos(facets, "\\u") > 0)
    return case((may_hold, member), else_=null())


def _with_card_tables(query: Any) -> Any:
    n, d, j, r = tables.nodes.c, tables.datasets.c, tables.jobs.c, tables.runs.c
    return (
        query.outerjoin(tables.datasets, d.node_id == n.id)
        .outerjoin(tables.jobs, j.node_id == n.id)
        .outerjoin(tables.runs, r.run_uuid == j.latest_run_uuid)
    )


def _card(row: Any, schemas: Schemas | None = None) -> GraphCard:
    """A card from the columns of :func:`_card_columns`; ``schemas``: the schema texts already turned into JSON
    for the cards of the same rows (the datasets of one producer often share a schema, and decoding one to drop
    its nulls costs more than the rest of a card), filled here."""
    kind, namespace, name, updated_at, fields, run_uuid, state, started, ended, declared_only, *said = row
    node_name = NodeName(namespace, name)
    facets = None
    if any(said):
        said_facets = zip(TYPE_FACETS, said, strict=True)
        facets = {facet: member_value(text) for (of, facet), text in said_facets if of == kind and text}
    if kind == "dataset":
        shown_type = dataset_type(facets, namespace) if facets else _namespace_dataset_type(namespace)
        schema = _NO_FIELDS
        if fields:
            known = schemas.get(fields) if schemas is not None else None
            if known is None:
                known = _schema_fields(fields)
                if schemas is not None:
                    schemas[fields] = known
            schema = known
        data = DatasetData(node_name, name, namespace, updated_at, shown_type, schema)
        return GraphCard(f"dataset:{namespace}:{name}", "DATASET", data, bool(declared_only))
    run = LatestRun(run_uuid, state, started, ended) if run_uuid else None
    job = JobData(node_name, name, namespace, updated_at, job_type(facets) if facets else _PLAIN_JOB_TYPE, name, run)
    return GraphCard(f"job:{namespace}:{name}", "JOB", job, bool(declared_only))


#: Sort key of a walk's node rows (``n``: kind, id, depth, ...): nearest first, then by id.
_NEAREST = itemgetter(2, 1)


def subgraph(
    conn: Connection,
    picked: Any,
    cards: GraphCards | None = None,
    declared: Declared = "include",
    declarations: bool = False,
    collapse: renderings.Collapse | None = None,
) -> tuple[dict[int, GraphNode], list[tuple[int, int, int]]]:
    """The nodes a walk picked, with their data, and every edge among them that ``declared`` keeps.

    ``picked`` selects ``(node_id, depth)`` (see :func:`..graph.nearest_nodes`). Returns ``id → node`` in
    Marquez's graph shape (empty ``inEdges``/``outEdges``), nearest first, and the ``(origin,
    destination, flags)`` edges (flags: :data:`DECLARED` | :data:`OBSERVED`), for ``msgspec.json.encode``;
    ``declarations``: the store may hold declared edges (:func:`..graph.walk_probe`) — without, every edge
    reads as observed, unread; ``collapse``: the store holds templated names, drawn as :mod:`.renderings` says
    (None: each node as itself, without looking).

    ``cards`` is the store's cache. When the previous walk found most of its nodes' cards there, the walk
    statement reads versions only and the missing cards are read after; otherwise (and without a cache)
    it reads every node's data along, in the same statement.
    """
    cards = cards if cards is not None else GraphCards(0)
    along = not cards.mostly_hits()
    rows = _walk_rows(conn, picked, along, declared=declared, declarations=declarations, collapse=collapse)
    picked_rows = sorted((row for row in rows if row[0] == "n"), key=_NEAREST)
    found, missing = cards.lookup({row[1]: row[3] for row in picked_rows})
    hits = len(found)
    if along:  # the data came with the walk: cards for what the cache did not hold
        wanted = set(missing)
        schemas: Schemas = {}
        read = [(row[1], row[3], _card(row[4:], schemas)) for row in picked_rows if row[1] in wanted]
    else:
        read = _read_cards(conn, missing) if missing else []
    found.update((node_id, card) for node_id, _version, card in read)
    cards.store(read, hits=hits)
    nodes = {}
    for row in picked_rows:
        card = found.get(row[1])
        if card is not None:  # None: gone since the walk read it (a prune or reset committed in between)
            nodes[row[1]] = GraphNode(card.id, card.type, card.data, [], [], card.declared_only)
    if declarations:
        declared_edges = {(row[1], row[2]): row[3] for row in rows if row[0] == "d"}
        edges = [(row[1], row[2], declared_edges.get((row[1], row[2]), OBSERVED)) for row in rows if row[0] == "e"]
    else:  # no ``d`` rows: every edge observed
        edges = [(row[1], row[2], OBSERVED) for row in rows if row[0] == "e"]
    if len(nodes) < len(picked_rows):
        edges = [edge for edge in edges if edge[0] in nodes and edge[1] in nodes]
    if collapse is not None:
        return _collapsed(conn, nodes, edges, rows, collapse)
    return nodes, edges


def _collapsed(
    conn: Connection,
    nodes: dict[int, GraphNode],
    edges: list[tuple[int, int, int]],
    rows: list[Any],
    collapse: renderings.Collapse,
) -> tuple[dict[int, GraphNode], list[tuple[int, int, int]]]:
    """``nodes`` and ``edges`` with the renderings ``collapse`` collapses drawn as their patterns (see
    :mod:`.renderings`; ``rows``: the walk's, its ``r`` rows read): a pattern node stands where its nearest
    rendering or itself stood, declared only when it and every rendering it stands for are, with
    ``data.renderings``."""
    lowest, picked_patterns = renderings.lowest_patterns(row for row in rows if row[0] == "r")
    of = {
        rendering: pattern
        for rendering, pattern in lowest.items()
        if rendering in nodes and rendering != collapse.kept and collapse.collapses(pattern)
    }
    shown = {pattern for pattern in picked_patterns if pattern in nodes} | set(of.values())
    if not shown:
        return nodes, edges
    read = {node: card for node, _version, card in _read_cards(conn, [p for p in shown if p not in nodes])}
    gone = {pattern for pattern in shown if pattern not in nodes and pattern not in read}  # since the walk
    if gone:
        of = {rendering: pattern for rendering, pattern in of.items() if pattern not in gone}
        shown -= gone
    observed = {pattern for rendering, pattern in of.items() if not nodes[rendering].declaredOnly}
    summaries = renderings.summaries(conn, shown, collapse.visible, collapse.expanded)
    drawn: dict[int, GraphNode] = {}
    for node_id, node in nodes.items():
        pattern = of.get(node_id, node_id if node_id in shown else None)
        if pattern is None:
            drawn[node_id] = node
            continue
        if pattern in drawn:
            continue
        base = nodes.get(pattern)
        card = read[pattern] if base is None else GraphCard(base.id, base.type, base.data, base.declaredOnly)
        data = renderings.pattern_data(card.data, summaries[pattern])
        declared_only = card.declared_only and pattern not in observed
        drawn[pattern] = GraphNode(card.id, card.type, data, [], [], declared_only)
    return drawn, renderings.collapsed_edges(edges, of, shown)


def _declared_flags() -> Any:
    """SQL: a declared edge row's :data:`DECLARED` | :data:`OBSERVED` bits."""
    return case((tables.edges.c.observed_at.is_(None), DECLARED), else_=DECLARED | OBSERVED)


def _walk_rows(
    conn: Connection,
    picked: Any,
    along: bool,
    grouped: bool = False,
    declared: Declared = "include",
    declarations: bool = False,
    collapse: renderings.Collapse | None = None,
) -> list[Any]:
    """The walk's nodes (``n``: id, depth, version [, canonical id of its group] [, card columns]), the
    edges among them that ``declared`` keeps (``e``: origin, destination [, group mark]) and, of those, the
    ones a JobEvent declared (``d``: the same columns, then their flags; only with ``declarations``), and with
    ``collapse`` the picked renderings and patterns (``r``: pattern, rendering or NULL, see
    :func:`.renderings.walk_parts`), in one statement; ``along``: with every node's card columns.

    Flags are read only for declared edges (``d``), through the partial index ``ix_lineage_edges_declared``
    (empty in a store without JobEvents): reading them for every edge (``e``) would lose the covering index the
    edges are read from. An ``e`` row without a ``d`` row is observed only.

    ``grouped``: ``picked`` carries each node's group (``canonical``, see :func:`..graph.nearest_nodes`), and
    an edge's ends are read as their groups' canonical ids, with a third column non-NULL when either end is
    in a group (such edges may be the same as another). SQLite plans the picked nodes as a small table and
    paired every two of them before probing the edges' key: the origin is matched by an expression, which
    leaves it one probe of the destination index per picked node and an automatic index on the origins.
    """
    n, e = tables.nodes.c, tables.edges.c
    chosen = picked.cte("picked")
    columns = _card_columns(conn.dialect.name) if along else []
    group = [chosen.c.canonical] if grouped else []
    node_rows = select(literal("n").label("row"), chosen.c.node_id, chosen.c.depth, n.version, *group, *columns)
    node_rows = node_rows.join_from(chosen, tables.nodes, n.id == chosen.c.node_id)
    if along:
        node_rows = _with_card_tables(node_rows)
    origin, destination = chosen.alias("origin"), chosen.alias("destination")
    if grouped:
        ends: tuple[ColumnElement[Any], ...] = (
            func.coalesce(origin.c.canonical, e.origin_id),
            func.coalesce(destination.c.canonical, e.destination_id),
            func.coalesce(origin.c.canonical, destination.c.canonical),
        )
        from_origin = e.origin_id + 0 if conn.dialect.name == "sqlite" else e.origin_id
        edge_rows = select(literal("e"), *ends, *(null() for _ in range(len(columns) + 1)))
        edge_rows = edge_rows.join_from(destination, tables.edges, e.destination_id == destination.c.node_id)
        edge_rows = edge_rows.join(origin, origin.c.node_id == from_origin)
    else:
        ends = (e.origin_id, e.destination_id)
        edge_rows = (
            select(literal("e"), *ends, *(null() for _ in range(len(columns) + 1)))
            .join_from(tables.edges, origin, origin.c.node_id == e.origin_id)
            .join(destination, destination.c.node_id == e.destination_id)
        )
    declared_rows = (
        select(literal("d"), *ends, _declared_flags(), *(null() for _ in range(len(columns))))
        .join_from(origin, tables.edges, e.origin_id == origin.c.node_id)
        .join(destination, destination.c.node_id == e.destination_id)
        .where(e.declared_at.is_not(None))
    )
    kept = declared_filter(tables.edges, declared)
    if kept is not None:
        edge_rows, declared_rows = edge_rows.where(kept), declared_rows.where(kept)
    # Every column is an int or text: read the driver's tuples as they are (thousands of rows).
    parts: tuple[Any, ...] = (node_rows, edge_rows, declared_rows) if declarations else (node_rows, edge_rows)
    if collapse is not None:
        width = 4 + len(group) + len(columns)
        parts += renderings.walk_parts(chosen, width, collapse.visible, conn.dialect.name)
    result = conn.execute(union_all(*parts))
    rows = list(result.cursor.fetchall())
    result.close()
    return rows


def _ids_parameter(column: Any, dialect: str) -> Any:
    """``column`` is one of the ids of the parameter ``ids`` (an array on PostgreSQL, JSON text on SQLite)."""
    if dialect == "postgresql":
        return column == any_(bindparam("ids", type_=postgresql.ARRAY(BigInteger)))
    return column.in_(select(func.json_each(bindparam("ids", type_=String)).table_valued("value").c.value))


@cache
def _card_query(dialect: str, schema_time: bool = False) -> Any:
    """``id, version`` [, the schema's time as ISO text] and card columns of the nodes whose ids ``ids`` holds,
    in one statement.

    ``ids`` is an array on PostgreSQL and JSON text on SQLite (read with ``json_each``).
    """
    n = tables.nodes.c
    timed = [iso_utc(tables.datasets.c.schema_time)] if schema_time else []
    query = _with_card_tables(select(n.id, n.version, *timed, *_card_columns(dialect)))
    return query.where(_ids_parameter(n.id, dialect))


def _read_cards(conn: Connection, ids: list[int]) -> list[tuple[int, int, GraphCard]]:
    """``(node id, version, card)`` of ``ids``, read now (possibly at a newer version than the walk saw)."""
    dialect = conn.dialect.name
    parameter = ids if dialect == "postgresql" else msgspec.json.encode(ids).decode()
    result = conn.execute(_card_query(dialect), {"ids": parameter})
    rows = result.cursor.fetchall()
    result.close()
    schemas: Schemas = {}
    return [(row[0], row[1], _card(row[2:], schemas)) for row in rows]


#: A group card's key: the representative's version above these bits, the sum of its members' versions below.
GROUP_KEY_SHIFT = 40


def group_key(version: int, members_version: int) -> int:
    """The key of a group card (see the module): it grows with every bump of the node or of a member."""
    return (version << GROUP_KEY_SHIFT) + members_version


def _listed_ids(dialect: str) -> Any:
    """The ids of the parameter ``ids`` as a table with a column ``id`` (``unnest`` of an array on PostgreSQL,
    ``json_each`` of JSON text on SQLite)."""
    if dialect == "postgresql":
        return func.unnest(bindparam("ids", type_=postgresql.ARRAY(BigInteger))).table_valued("id").render_derived()
    listed = func.json_each(bindparam("ids", type_=String)).table_valued("value")
    return select(listed.c.value.label("id")).subquery("listed")


@cache
def _group_query(dialect: str) -> Any:
    """Every name of the groups whose canonical ids are ``ids``: ``(name, canonical id, the name's version)``.

    On PostgreSQL each is a ``LATERAL`` lookup behind ``OFFSET 0``, an index probe per id whatever the
    estimates (a store as loaded has no statistics, and PostgreSQL then hashed whole tables here).
    """
    listed, member, named = _listed_ids(dialect), tables.dataset_members.alias("group_member"), tables.nodes
    if dialect != "postgresql":
        query = select(member.c.member_id, member.c.node_id, named.c.version)
        query = query.join_from(listed, member, member.c.node_id == listed.c.id)
        return query.join(named, named.c.id == member.c.member_id)
    of_listed = select(member.c.member_id, member.c.node_id).where(member.c.node_id == listed.c.id)
    names = of_listed.offset(0).lateral("group_names")
    version = select(named.c.version).where(named.c.id == names.c.member_id).offset(0).lateral("group_version")
    query = select(names.c.member_id, names.c.node_id, version.c.version)
    return query.select_from(listed.join(names, true()).join(version, true()))


def _group_rows(conn: Connection, canonical: list[int]) -> list[Any]:
    """The rows of :func:`_group_query` for the groups with these ``canonical`` ids."""
    if not canonical:
        return []
    dialect = conn.dialect.name
    parameter = canonical if dialect == "postgresql" else msgspec.json.encode(canonical).decode()
    result = conn.execute(_group_query(dialect), {"ids": parameter})
    rows = list(result.cursor.fetchall())
    result.close()
    return rows


def _group_versions(conn: Connection, canonical: Iterable[int]) -> dict[int, dict[int, int]]:
    """``canonical id → {name: version}`` of every name of these groups."""
    versions: dict[int, dict[int, int]] = {}
    for name, group, version in _group_rows(conn, list(canonical)):
        versions.setdefault(group, {})[name] = version
    return versions


def _key(canonical: int, versions: Mapping[int, int], names: Iterable[int]) -> int:
    """The card key of the group ``canonical`` over its ``names``, from their ``versions``."""
    return group_key(versions.get(canonical, 0), sum(versions[name] for name in names))


def _keep(conn: Connection, cards: GraphCards, exact: dict[int, dict[int, int]]) -> dict[int, GraphCard]:
    """Read the cards of the groups ``exact`` (``canonical id → {name: version}``) and keep them, each with
    its key and names."""
    read = _group_cards(conn, dict.fromkeys(exact), None)
    kept = [(node, _key(node, exact[node], exact[node]), (card, frozenset(exact[node]))) for node, card in read.items()]
    cards.groups.keep(kept)
    return read


def _unlimited_groups(conn: Connection, picked_rows: list[Any], cards: GraphCards) -> dict[int, GraphCard]:
    """For a key that sees every name: the cards of the groups the walk reached (each shown as its canonical
    name).

    A kept card is found without reading the group again: its key is computed from the names it was read
    over (kept with it) and their versions in the walk's rows — every name of a group the walk reached is a
    row, the canonical's version changes with the group. The groups of cards not found (or whose names the
    walk did not all reach) are read, their cards too.
    """
    versions = {row[1]: row[3] for row in picked_rows if row[4] is not None}
    shown = {row[4] for row in picked_rows if row[4] is not None}
    tentative = {}
    for canonical in shown:
        names = cards.groups.names(canonical)
        if names is not None and names <= versions.keys():
            tentative[canonical] = _key(canonical, versions, names)
    found = {node: value[0] for node, value in cards.groups.lookup(tentative)[0].items()}
    missing = shown - found.keys()
    if missing:
        found.update(_keep(conn, cards, _group_versions(conn, missing)))
        found.update(_group_cards(conn, dict.fromkeys(missing - found.keys()), None))  # regrouped since the walk
    return found


def _limited_groups(
    conn: Connection, picked_rows: list[Any], cards: GraphCards, visible: Collection[str]
) -> tuple[dict[int, int], dict[int, GraphCard]]:
    """For a key that sees ``visible`` namespaces only: ``name → shown node`` of the picked names in a group
    and of each group's canonical id (its representative, :func:`.nodes.representative`), and the shown
    groups' cards — kept ones only for groups whose every name the key sees, the others read over the visible
    names for this key."""
    exact = _group_versions(conn, {row[4] for row in picked_rows if row[4] is not None})
    groups = dataset_aliases.groups(conn, list(exact))
    seen = frozenset(visible)
    of: dict[int, int] = {}
    keys: dict[int, int] = {}
    unkept: dict[int, dataset_aliases.Group | None] = {}
    for canonical, named in exact.items():
        group = groups.get(canonical)
        shown = representative(group, seen) if group is not None else None
        if group is None or shown is None:  # regrouped since the walk read it: each name as itself
            continue
        of.update((name.id, shown) for name in group.members if name.namespace in seen)
        of[canonical] = shown
        if shown == canonical and all(name.namespace in seen for name in group.members):
            keys[shown] = _key(canonical, named, named)
        else:
            unkept[shown] = group
    found = {node: value[0] for node, value in cards.groups.lookup(keys)[0].items()}
    missing = {node: exact[node] for node in keys if node not in found}
    if missing:
        found.update(_keep(conn, cards, missing))
    found.update(_group_cards(conn, unkept, visible))
    return of, found


def grouped_subgraph(
    conn: Connection,
    picked: Any,
    cards: GraphCards | None = None,
    visible: Visible = None,
    declared: Declared = "include",
    declarations: bool = False,
    collapse: renderings.Collapse | None = None,
) -> tuple[dict[int, GraphNode], list[tuple[int, int, int]]]:
    """:func:`subgraph` for a store with groups: every dataset once, edges between the shown nodes, each once.

    ``picked`` as for :func:`subgraph`, from a walk through the groups (``WalkBounds.grouped``: it carries each
    node's group, and every name of a group it reaches is a row); ``visible`` the key's visible namespaces
    (None: every one); ``declared`` which edges are drawn, ``declarations`` as for :func:`subgraph`. Returns
    ``shown id → node``, nearest first, and the ``(origin, destination, flags)`` edges by shown id (see the
    module; an edge drawn for several stored ones has the flags of any). One statement, the walk's (as
    :func:`subgraph`'s, with each node's group), when the groups' cards are kept; the names of the other
    groups after.
    """
    cards = cards if cards is not None else GraphCards(0)
    along = not cards.mostly_hits()
    rows = _walk_rows(
        conn, picked, along, grouped=True, declared=declared, declarations=declarations, collapse=collapse
    )
    picked_rows = sorted((row for row in rows if row[0] == "n"), key=_NEAREST)
    first: dict[int, Any] = {}
    if visible is None:  # each name shown as its canonical name
        of: dict[int, int] = {}
        found = _unlimited_groups(conn, picked_rows, cards)
        for row in picked_rows:
            first.setdefault(row[4] or row[1], row)
    else:
        of, found = _limited_groups(conn, picked_rows, cards, visible)
        for row in picked_rows:
            first.setdefault(of.get(row[1], row[1]), row)
    found.update(_plain_cards(conn, {node: row for node, row in first.items() if node not in found}, along, cards))
    nodes = {}
    for node in first:
        card = found.get(node)
        if card is not None:  # None: gone since the walk read it (a prune or reset committed in between)
            nodes[node] = GraphNode(card.id, card.type, card.data, [], [], card.declared_only)
    edges = _shown_edges(rows, of)
    if len(nodes) < len(first):
        edges = [edge for edge in edges if edge[0] in nodes and edge[1] in nodes]
    if collapse is not None:
        return _collapsed(conn, nodes, edges, rows, collapse)
    return nodes, edges


def _shown_edges(rows: list[Any], of: dict[int, int]) -> list[tuple[int, int, int]]:
    """The edges of the walk's rows (ends by canonical id), between the shown nodes (``of``: the canonical
    ids and names shown as another node), each once, with its flags (of an edge drawn for several: any's).
    Only an edge with an end in a group can be the same as another."""
    declared: dict[tuple[int, int], int] = {}  # shown edge → its stored edges' DECLARED | OBSERVED bits (``d``)
    declared_only: dict[tuple[int, int], int] = {}  # shown edge → how many of its stored edges no run observed
    for row in rows:
        if row[0] == "d":
            ends = (of.get(row[1], row[1]), of.get(row[2], row[2])) if of and row[3] is not None else row[1:3]
            declared[ends] = declared.get(ends, 0) | row[4]
            if not row[4] & OBSERVED:
                declared_only[ends] = declared_only.get(ends, 0) + 1
    edges: list[tuple[int, int, int]] = []
    grouped: dict[tuple[int, int], int] = {}  # shown edge → how many stored edges it is drawn for
    for row in rows:
        if row[0] != "e":
            continue
        if row[3] is None:
            edges.append((row[1], row[2], declared.get(row[1:3], OBSERVED)))
            continue
        ends = (of.get(row[1], row[1]), of.get(row[2], row[2])) if of else (row[1], row[2])
        grouped[ends] = grouped.get(ends, 0) + 1
    for ends, count in grouped.items():
        # Observed when one of its stored edges is (every stored edge is observed, declared-only or both).
        observed = OBSERVED if count > declared_only.get(ends, 0) else 0
        edges.append((ends[0], ends[1], (declared.get(ends, 0) & DECLARED) | observed))
    return edges


def _plain_cards(conn: Connection, picked: dict[int, Any], along: bool, cards: GraphCards) -> dict[int, GraphCard]:
    """Cards of the shown nodes that are in no group (``node → its row``), from the cache or read."""
    found, missing = cards.lookup({node: row[3] for node, row in picked.items()})
    hits = len(found)
    if along:  # the data came with the walk
        schemas: Schemas = {}
        read = [(node, picked[node][3], _card(picked[node][5:], schemas)) for node in missing]
    else:
        read = _read_cards(conn, missing) if missing else []
    found.update((node_id, card) for node_id, _version, card in read)
    cards.store(read, hits=hits)
    return found


def _group_cards(
    conn: Connection, shown: dict[int, dataset_aliases.Group | None], visible: Visible
) -> dict[int, GraphCard]:
    """Cards of shown groups (``node → its group``, None: read here) over their ``visible`` names."""
    if not shown:
        return {}
    unknown = [node for node, group in shown.items() if group is None]
    read = dataset_aliases.groups(conn, unknown) if unknown else {}
    groups = {node: group if group is not None else read.get(node) for node, group in shown.items()}
    found = {node: card for node, _version, card in _read_cards(conn, [n for n, g in groups.items() if g is None])}
    grouped = {node: group for node, group in groups.items() if group is not None}
    if not grouped:
        return found
    seen = None if visible is None else frozenset(visible)
    members = _member_cards(conn, list({name.id for group in grouped.values() for name in group.shown(seen)}))
    aliases = dataset_aliases.aliases(conn, grouped, seen)
    producers = dataset_aliases.producers(conn, list(grouped))
    for node, group in grouped.items():
        names = [name.id for name in group.shown(seen) if name.id in members]
        found[node] = _group_card(node, names, members, aliases.get(node, []), producers.get(node, []))
    return found


def _group_card(
    node: int,
    names: list[int],
    members: dict[int, tuple[Any, GraphCard]],
    aliases: list[dict[str, Any]],
    producers: list[str],
) -> GraphCard:
    """The card of ``node`` shown for its group's ``names``: its own name and type, the latest ``updatedAt``
    and schema of any name, its aliases and producers."""
    card = members[node][1]
    data = card.data
    declared_only = all(members[name][1].declared_only for name in names)
    updated = max(members[name][1].data.updatedAt for name in names)
    schemas = [(members[name][0], name == node, members[name][1].data.fields) for name in names if members[name][0]]
    fields = max(schemas, key=lambda schema: schema[:2])[2] if schemas else data.fields
    alias_list = [Alias(a["namespace"], a["name"], a["via"], list(a["producers"])) for a in aliases]
    grouped = GroupedDatasetData(data.id, data.name, data.namespace, updated, data.type, fields, alias_list, producers)
    return GraphCard(card.id, card.type, grouped, declared_only)


def _member_cards(conn: Connection, ids: list[int]) -> dict[int, tuple[Any, GraphCard]]:
    """``id → (schema time as ISO text or None, card)`` of the datasets ``ids``."""
    dialect = conn.dialect.name
    parameter = ids if dialect == "postgresql" else msgspec.json.encode(ids).decode()
    result = conn.execute(_card_query(dialect, schema_time=True), {"ids": parameter})
    rows = result.cursor.fetchall()
    result.close()
    schemas: Schemas = {}
    return {row[0]: (row[2], _card(row[3:], schemas)) for row in rows}
