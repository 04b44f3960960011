"""Listings: namespaces, jobs, datasets, search by name, runs of a job, one run, and raw events.

Every function takes a :class:`~sqlalchemy.Connection` and returns JSON-ready values (camelCase keys,
ISO 8601 UTC times) with the total count for paging, so the routers only check parameters.

``visible`` — the namespaces a key limited to namespace patterns may see (see :mod:`.visibility`; None:
every namespace, with the statements unchanged) — filters in SQL wherever it changes what is counted, so
pages and totals agree: listings and search keep nodes in visible namespaces; a run of a hidden job is
None (the router's 404, as for a missing run) and a visible run leaves out hidden inputs and outputs;
facets lose the objects that name a hidden namespace.

Raw events with a limited key: an event is listed only when it names no hidden namespace anywhere — its
job, inputs, outputs, a DatasetEvent's dataset, the parent facet's job and root job, column-lineage
input fields, symlinks, any facet member ``"namespace"`` (:func:`.visibility.names_hidden_namespace`).
That is one condition on each row of ``lineage_events``, read by the database from the namespaces the row
lists (events stored before schema version 18: from the payload, with ``json_tree`` / ``jsonb_path_query``),
in the same ``WHERE`` for the page and its total, so paging and
totals stay exact. The table's ``job_namespace`` column alone would not do: it is NULL for DatasetEvents,
and a run's ``lineage_run_io`` rows miss JobEvents (no run), column-lineage sources, symlinks and parent
facets, and are per run, not per event. The cheap ``job_namespace`` test goes first, so events of hidden
jobs are dropped without parsing; the others cost one JSON parse each — for the total, every event in the
window (``runId``/``after``/``before`` narrow it). Unlimited keys read as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from weakref import WeakKeyDictionary

import msgspec
from sqlalchemy import Connection, Engine, LargeBinary, Row, and_, cast, func, not_, or_, select, true
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer import nodeids
from airflow_lineage_provider.consumer.store.graph import dataset_aliases, renderings
from airflow_lineage_provider.consumer.store.graph.nodes import node_details, run_data, visible_facets
from airflow_lineage_provider.consumer.store.graph.versioned_cache import VersionedCache
from airflow_lineage_provider.consumer.store.read import node_totals
from airflow_lineage_provider.consumer.store.read.text import iso
from airflow_lineage_provider.consumer.store.read.visibility import Visible, event_names_hidden_namespace, namespace_in
from airflow_lineage_provider.consumer.store.schema import payloads, tables


def _page(conn: Connection, query: Any, limit: int, offset: int) -> tuple[list[Any], int]:
    total = conn.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar() or 0
    return list(conn.execute(query.limit(limit).offset(offset))), total


#: Told the sizes of a page's stored values, item by item, before they are loaded; raises to refuse the page
#: (:meth:`..answer_limits.AnswerBound.admit`).
Admit = Callable[[Sequence[int]], None]


def stored_size(column: Any, dialect: str) -> ColumnElement[int]:
    """Bytes of a stored text value (0 for NULL), read without loading it where the database can: PostgreSQL's
    ``octet_length`` reads a (compressed, out-of-line) value's size from its header; SQLite's ``length`` counts
    characters, bytes for the ASCII JSON the store writes."""
    size = func.octet_length(column) if dialect == "postgresql" else func.length(column)
    return func.coalesce(size, 0)


def name_size(column: Any, dialect: str) -> ColumnElement[int]:
    """Bytes of a stored name (UTF-8; 0 for NULL): ``octet_length`` on PostgreSQL; on SQLite the length of the
    text as a blob (``length`` of the text counts characters, and names need not be ASCII)."""
    size = func.octet_length(column) if dialect == "postgresql" else func.length(cast(column, LargeBinary))
    return func.coalesce(size, 0)


def sized_page(
    conn: Connection,
    query: Any,
    size: ColumnElement[int],
    limit: int,
    offset: int,
    admit: Admit | None,
    total: int | None = None,
) -> tuple[list[Any], int]:
    """:func:`_page` with column ``size`` on the page's rows (not in the count), told to ``admit``; ``total``: the
    count of ``query``'s rows when known (else counted)."""
    if total is None:
        total = conn.execute(select(func.count()).select_from(query.order_by(None).subquery())).scalar() or 0
    rows = list(conn.execute(query.add_columns(size.label("size")).limit(limit).offset(offset)))
    if admit is not None:
        admit([row.size for row in rows])
    return rows, total


def dataset_size(node_id: Any, dialect: str) -> ColumnElement[int]:
    """What a dataset's listing shows of its stored values: its schema and facets, in bytes."""
    d = tables.datasets.c
    both = stored_size(d.fields, dialect) + stored_size(d.facets, dialect)
    return func.coalesce(select(both).where(d.node_id == node_id).scalar_subquery(), 0)


#: Marquez's owner of a namespace nobody created by hand: what it answers for namespaces made by OpenLineage
#: events (the events name no owner, so neither can the store).
NAMESPACE_OWNER = "anonymous"


def _namespace(name: str, created: datetime, updated: datetime) -> dict[str, Any]:
    """Marquez's ``Namespace`` (no description: the events give none, and Marquez leaves out null fields)."""
    return {
        "name": name,
        "createdAt": iso(created),
        "updatedAt": iso(updated),
        "ownerName": NAMESPACE_OWNER,
        "isHidden": False,
    }


def list_namespaces(
    conn: Connection, limit: int, offset: int, visible: Visible = None
) -> tuple[list[dict[str, Any]], int]:
    """Namespaces of jobs and datasets as Marquez's ``Namespace``: created when their first node was, updated
    when their latest node was (within :data:`.write.namespaces.UPDATED_PRECISION`); read from the namespaces
    table the writer keeps, one row per namespace shown."""
    ns = tables.namespaces.c
    query = select(ns.namespace, ns.created_at, ns.updated_at).order_by(ns.namespace)
    if visible is not None:
        query = query.where(namespace_in(ns.namespace, visible, conn.dialect.name))
    rows, total = _page(conn, query, limit, offset)
    return [_namespace(r.namespace, r.created_at, r.updated_at) for r in rows], total


def get_namespace(conn: Connection, name: str, visible: Visible = None) -> dict[str, Any] | None:
    """Namespace ``name`` as Marquez's ``Namespace``, or None when no node lives in it (or it is hidden)."""
    if visible is not None and name not in visible:
        return None
    ns = tables.namespaces.c
    row = conn.execute(select(ns.created_at, ns.updated_at).where(ns.namespace == name)).first()
    return None if row is None else _namespace(name, row.created_at, row.updated_at)


def namespace_exists(conn: Connection, name: str, visible: Visible = None) -> bool:
    """Whether some job or dataset lives in namespace ``name`` (False when it is hidden): one key probe."""
    if visible is not None and name not in visible:
        return False
    ns = tables.namespaces.c
    return conn.execute(select(ns.namespace).where(ns.namespace == name)).first() is not None


def _node_ids(
    kind: str,
    namespace: str | None,
    name_contains: str | None,
    visible: Visible,
    dialect: str,
    grouped: bool,
    without_renderings: bool = False,
) -> Any:
    """The ids of the listed nodes in listing order; ``grouped``: the datasets' groups are read (see
    :func:`list_nodes`); ``without_renderings``: see :func:`list_nodes`."""
    n = tables.nodes.c
    ids_query = select(n.id).where(n.kind == kind).order_by(n.namespace, n.name)
    if namespace is not None:
        ids_query = ids_query.where(n.namespace == namespace)
    if name_contains:

        def contains(columns: Any) -> ColumnElement[bool]:
            return columns.name.contains(name_contains, autoescape=True)

        matches = n.id.in_(dataset_aliases.with_matching_member(contains, visible, dialect)) if grouped else contains(n)
        ids_query = ids_query.where(matches)
    if visible is not None:
        ids_query = ids_query.where(namespace_in(n.namespace, visible, dialect))
    if grouped:
        ids_query = ids_query.where(dataset_aliases.listed(n, visible, dialect))
    if without_renderings:
        ids_query = ids_query.where(renderings.not_a_rendering(n.id, visible, dialect))
    return ids_query


def list_nodes(
    conn: Connection,
    kind: str,
    namespace: str | None,
    limit: int,
    offset: int,
    name_contains: str | None = None,
    visible: Visible = None,
    admit: Admit | None = None,
    without_renderings: bool = False,
) -> tuple[list[dict[str, Any]], int]:
    """Jobs or datasets (with schema, facets and latest run), by namespace and name, paged; ``admit`` is told the
    sizes of the page's stored facets and schemas before they are read; ``without_renderings``: datasets that
    render a (visible) templated name are left out (:func:`.renderings.not_a_rendering`).

    A dataset known under several names is listed once, under its representative's name, and counted once
    (:mod:`.dataset_aliases`); ``name_contains`` matches any of its visible names, ``namespace`` the
    representative's. Datasets carry ``aliases`` and ``aliasConflicts``. Whether any dataset has several
    names, or claims a name, rides along with the count, so a store without either pays no statement more.
    """
    dialect = conn.dialect.name
    n = tables.nodes.c
    # Without a filter on names, the total is the namespaces' kept counts (.schema.node_counts), not a count of
    # every node.
    kept = not name_contains and not without_renderings
    if kind != "dataset":
        query = _node_ids(kind, namespace, name_contains, visible, dialect, False)
        total = node_totals.total(conn, kind, namespace, visible) if kept else None
        rows, total = sized_page(conn, query, _job_size(n.id, dialect), limit, offset, admit, total)
        details = node_details(conn, [row.id for row in rows], visible)
        # A node gone since the page was chosen (a prune or reset committed in between) is left out.
        return [details[row.id] for row in rows if row.id in details], total - (len(rows) - len(details))
    expected = dataset_aliases.expect_groups(conn)
    ids_query = _node_ids(kind, namespace, name_contains, visible, dialect, expected, without_renderings)
    if kept:  # the counts hold unless a dataset has several names (counted once: see below)
        groups, claims = conn.execute(select(*dataset_aliases.probes())).one()
        total = None if groups else node_totals.total(conn, kind, namespace, visible)
    else:
        counted = select(func.count(), *dataset_aliases.probes()).select_from(ids_query.order_by(None).subquery())
        total, groups, claims = conn.execute(counted).one()
    aliasing = dataset_aliases.Aliasing(bool(groups), bool(claims))
    dataset_aliases.note_groups(conn, aliasing.groups)
    if aliasing.groups and not expected:
        ids_query = _node_ids(kind, namespace, name_contains, visible, dialect, True, without_renderings)
        total = None
    if total is None:
        total = conn.execute(select(func.count()).select_from(ids_query.order_by(None).subquery())).scalar() or 0
    page = ids_query.add_columns(dataset_size(n.id, dialect), n.version).limit(limit).offset(offset)
    sized = conn.execute(page).all()
    if admit is not None:
        admit([size for _, size, _ in sized])
    details = _dataset_details(conn, {node: version for node, _, version in sized}, visible)
    ids = [node for node, _, _ in sized if node in details]  # the others gone since the page was chosen
    _with_aliases(conn, ids, details, visible, aliasing)
    return [details[node] for node in ids], total - (len(sized) - len(ids))


#: How many listed datasets each store keeps decoded in memory (:func:`_dataset_details`): a few pages.
LISTED_DATASETS_KEPT = 1000
_listed_datasets: WeakKeyDictionary[Engine, VersionedCache[dict[str, Any]]] = WeakKeyDictionary()
_listed_datasets_lock = threading.Lock()


def _dataset_details(conn: Connection, versions: dict[int, int], visible: Visible) -> dict[int, dict[str, Any]]:
    """:func:`.nodes.node_details` of the listed datasets (``node id → version``), each a copy of its own.

    For a key that sees every namespace, the details are kept in memory by node version (the graph cards' rule,
    :mod:`.versioned_cache`: a dataset's version moves with anything its details show — times, schema, facets,
    names it claims), so a page read again decodes only the datasets that changed: decoding stored schemas and
    facets is most of a page's time. The listing adds aliases to the copies, never to what is kept."""
    if visible is not None:
        return node_details(conn, list(versions), visible)
    with _listed_datasets_lock:
        kept = _listed_datasets.setdefault(conn.engine, VersionedCache(LISTED_DATASETS_KEPT))
    found, missing = kept.lookup(versions)
    read = node_details(conn, missing) if missing else {}
    kept.keep([(node, versions[node], data) for node, data in read.items()])
    return {node: dict(data) for node, data in (found | read).items()}


def _job_size(node_id: Any, dialect: str) -> ColumnElement[int]:
    """What a job's listing shows of its stored values: its facets and its latest run's, in bytes."""
    j, r = tables.jobs.c, tables.runs.c
    run = select(stored_size(r.facets, dialect)).where(r.run_uuid == j.latest_run_uuid).scalar_subquery()
    both = stored_size(j.facets, dialect) + func.coalesce(run, 0)
    return func.coalesce(select(both).where(j.node_id == node_id).scalar_subquery(), 0)


def _with_aliases(
    conn: Connection,
    ids: list[int],
    details: dict[int, dict[str, Any]],
    visible: Visible,
    aliasing: dataset_aliases.Aliasing,
) -> None:
    """Add ``aliases`` and ``aliasConflicts`` to the listed datasets ``details``, and show each grouped one as its
    group (see :mod:`.dataset_aliases`)."""
    if not (aliasing.groups or aliasing.claims):  # no dataset of the store has or claims another name
        for node in ids:
            details[node].update(aliases=[], aliasConflicts=[])
        return
    shown = dataset_aliases.visible_set(visible)
    groups = dataset_aliases.groups(conn, ids) if aliasing.groups else {}
    names = {node: [name.id for name in groups[node].shown(shown)] if node in groups else [node] for node in ids}
    every = {member.id for group in groups.values() for member in group.members} | set(ids)
    said = dataset_aliases.claims(conn, every) if aliasing.claims else []
    aliases = dataset_aliases.aliases(conn, groups, shown, said)
    conflicts = dataset_aliases.alias_conflicts(conn, names, shown, said) if said else {}
    if groups:
        _merge_names(conn, names, details, visible)
    for node in ids:
        details[node]["aliases"] = aliases.get(node, [])
        details[node]["aliasConflicts"] = conflicts.get(node, [])


def _merge_names(
    conn: Connection, names: dict[int, list[int]], details: dict[int, dict[str, Any]], visible: Visible
) -> None:
    """Show each listed dataset as its group: times over its names, the latest schema and facets any of them
    received, the symlinks of all of them but those naming the group's own names (``names``: listed id → its
    visible names, itself first)."""
    others = sorted({member for members in names.values() for member in members} - details.keys())
    every = {**node_details(conn, others, visible), **details}
    d = tables.datasets.c
    times: dict[int, tuple[Any, Any]] = {}
    for start in range(0, len(every), 900):
        chunk = list(every)[start : start + 900]
        query = select(d.node_id, d.schema_time, d.facets_time).where(d.node_id.in_(chunk))
        times.update((node, (schema_time, facets_time)) for node, schema_time, facets_time in conn.execute(query))
    for node, members in names.items():
        if len(members) < 2:
            continue
        parts = [(every[member], times.get(member, (None, None)), rank) for rank, member in enumerate(members)]
        data = details[node]
        data["createdAt"] = min(part["createdAt"] for part, _, _ in parts)  # one ISO format: text order is time order
        data["updatedAt"] = max(part["updatedAt"] for part, _, _ in parts)
        with_schema = dataset_aliases.latest((part, when[0], rank) for part, when, rank in parts)
        if with_schema is not None:
            data.update(fields=with_schema["fields"], lastModifiedAt=with_schema["lastModifiedAt"])
        with_facets = dataset_aliases.latest((part, when[1], rank) for part, when, rank in parts)
        if with_facets is not None:
            data.update(facets=with_facets["facets"], type=with_facets["type"])
        own = {(part["namespace"], part["name"]) for part, _, _ in parts}  # the group's names are its aliases
        symlinks = {
            (s["namespace"], s["name"], s["type"] or ""): s
            for part, _, _ in parts
            for s in part["symlinks"]
            if (s["namespace"], s["name"]) not in own
        }
        data["symlinks"] = [symlinks[key] for key in sorted(symlinks)]


#: Search orders: Marquez's ``NAME`` (name A-Z) and ``UPDATE_AT`` (most recently updated first).
SEARCH_ORDERS = ("name", "updated_at")
#: How many matches a search in name order counts for its total (at least; more when the page ends further on): a
#: common word in a large store matches tens of thousands of names, and counting them all cost more than the page.
#: Most recently updated first reads every match anyway, and counts them all.
SEARCH_TOTAL_BOUND = 1000


class Total(NamedTuple):
    """How many results a search has: ``matches`` exactly, or (``at_least``) at least ``matches`` — counting stopped
    at :data:`SEARCH_TOTAL_BOUND` or at the page's end, whichever is further."""

    matches: int
    at_least: bool = False


def search(
    conn: Connection,
    text: str,
    kind: str | None,
    namespace: str | None,
    limit: int,
    offset: int,
    visible: Visible = None,
    *,
    sort: str = "name",
    before: datetime | None = None,
    after: datetime | None = None,
    admit: Admit | None = None,
    without_renderings: bool = False,
) -> tuple[list[dict[str, Any]], Total]:
    """Jobs and datasets whose name matches ``text`` as Marquez matches it, with how many match — in name order
    exactly up to :data:`SEARCH_TOTAL_BOUND` (or the page's end), else at least that many; most recently updated
    first, exactly (``without_renderings``: datasets rendering a visible templated name left out).

    Marquez's semantics: ``name ILIKE '%' || text || '%'`` — case-insensitive, ``%`` in ``text`` matches any
    run of characters and ``_`` any one character, and a backslash makes the next character literal (``\\%``
    is a percent sign). ``kind`` (``job``/``dataset``) and ``namespace`` narrow it; ``before``/``after`` keep
    the nodes updated strictly before / strictly after those instants. ``sort`` is ``name`` (name, then
    namespace, in code point order on both stores) or ``updated_at`` (most recently updated first). Case
    folding of non-ASCII letters is PostgreSQL's; SQLite folds ASCII only. ``admit`` is told the size of each
    result's names.
    """
    if sort not in SEARCH_ORDERS:
        raise ValueError(f"sort must be one of {SEARCH_ORDERS}, got {sort!r}")
    dialect = conn.dialect.name
    pattern = f"%{text}%"

    # ILIKE's meaning: SQLite's LIKE already ignores ASCII case (its lower() folds no more); on PostgreSQL
    # lower(name) LIKE lower(pattern), the expression the trigram index of names (tables.NAME_SEARCH_INDEX) is
    # built on, so that the index answers it instead of every name being read: the two must stay the same.
    def like(columns: Any) -> ColumnElement[bool]:
        if dialect == "postgresql":
            return func.lower(columns.name).like(func.lower(pattern), escape="\\")
        return columns.name.like(pattern, escape="\\")

    asked = _Search(like, kind, namespace, limit, offset, visible, sort, before, after, without_renderings)
    expected = kind != "job" and dataset_aliases.expect_groups(conn)
    rows, total, present = _search_rows(conn, asked, grouped=expected)
    if rows:
        dataset_aliases.note_groups(conn, present)
    if kind != "job" and not expected and (present or (not rows and dataset_aliases.has_groups(conn))):
        rows, total, _ = _search_rows(conn, asked, grouped=True)
    if admit is not None:  # names only, read already: what each result shows of them (twice, in nodeId too)
        admit([2 * (len(r.namespace) + len(r.name)) for r in rows])
    results = [
        {
            "type": r.kind.upper(),
            "name": r.name,
            "updatedAt": iso(r.updated_at),
            "namespace": r.namespace,
            "nodeId": nodeids.node_id(r.kind, r.namespace, r.name),
        }
        for r in rows
    ]
    return results, total


@dataclass(frozen=True)
class _Search:
    """What a search asks (see :func:`search`); ``like`` is the name condition on some ``lineage_nodes`` columns."""

    like: Callable[[Any], ColumnElement[bool]]
    kind: str | None
    namespace: str | None
    limit: int
    offset: int
    visible: Visible
    sort: str
    before: datetime | None
    after: datetime | None
    without_renderings: bool = False


def _search_conditions(asked: _Search, grouped: bool, updated: Any, dialect: str) -> list[ColumnElement[bool]]:
    """The conditions of a search on ``lineage_nodes`` (``updated``: the time ``before``/``after`` compare)."""
    n = tables.nodes.c
    conditions: list[ColumnElement[bool]]
    if grouped:
        conditions = [n.id.in_(dataset_aliases.with_matching_member(asked.like, asked.visible, dialect))]
        conditions.append(dataset_aliases.listed(n, asked.visible, dialect))
    else:
        conditions = [asked.like(n)]
    if asked.kind is not None:
        conditions.append(n.kind == asked.kind)
    if asked.namespace is not None:
        conditions.append(n.namespace == asked.namespace)
    if asked.before is not None:
        conditions.append(updated < asked.before)
    if asked.after is not None:
        conditions.append(updated > asked.after)
    if asked.visible is not None:
        conditions.append(namespace_in(n.namespace, asked.visible, dialect))
    if asked.without_renderings:
        conditions.append(renderings.not_a_rendering(n.id, asked.visible, dialect))
    return conditions


def _search_rows(conn: Connection, asked: _Search, grouped: bool) -> tuple[Sequence[Row[Any]], Total, bool]:
    """A page of search rows, its total, and whether the store has groups (asked along with the page: a
    store without any answers with one statement). ``grouped``: a dataset known under several names is found by
    any visible name and shown once, as its group (:mod:`.dataset_aliases`)."""
    n, dialect = tables.nodes.c, conn.dialect.name
    updated = dataset_aliases.group_updated(n, asked.visible, dialect) if grouped else n.updated_at
    conditions = _search_conditions(asked, grouped, updated, dialect)
    # Names in byte (code point) order on both stores: SQLite's binary collation, PostgreSQL's "C" — the order of
    # tables.NAME_ORDER_INDEX, which holds the ids: the page's ids are chosen reading the index in order until the
    # page is full (a common word), or from the matches the trigram index finds, sorted (a rare one); the planner
    # weighs the two. Only the page's nodes are then read.
    name: ColumnElement[str] = n.name
    space: ColumnElement[str] = n.namespace
    if dialect == "postgresql":
        name, space = name.collate("C"), space.collate("C")
    if asked.sort != "name":
        return _recent_rows(conn, asked, conditions, (updated.desc(), name, space, n.kind), updated)
    order = (name, space, n.kind)
    page = select(n.id).where(*conditions).order_by(*order).limit(asked.limit).offset(asked.offset)
    # The total, counted up to a bound (beyond the page and beyond SEARCH_TOTAL_BOUND a common word's matches are not
    # all read), rides along on the page's rows: one statement, evaluated once.
    bound = max(SEARCH_TOTAL_BOUND, asked.offset + asked.limit + 1)
    matches = select(n.id).where(*conditions).limit(bound).subquery()
    counted = select(func.count()).select_from(matches).correlate(None).scalar_subquery().label("total")
    columns = (n.kind, n.namespace, n.name, updated.label("updated_at"), counted, dataset_aliases.HAS_GROUPS)
    shown = n.id.in_(page.correlate(None).scalar_subquery())  # the page's own lineage_nodes, not the outer one
    rows = conn.execute(select(*columns).where(shown).order_by(*order)).all()
    if not rows:
        if asked.offset == 0:
            return rows, Total(0), False
        # a page past the end carries no count: count apart
        total = conn.execute(select(func.count()).select_from(matches)).scalar_one()
        return rows, Total(total, at_least=total >= bound), False
    present = bool(rows[0].has_groups)
    if len(rows) < asked.limit:  # the last page: the total is known
        return rows, Total(asked.offset + len(rows)), present
    return rows, Total(rows[0].total, at_least=rows[0].total >= bound), present


def _recent_rows(
    conn: Connection, asked: _Search, conditions: list[ColumnElement[bool]], order: tuple[Any, ...], updated: Any
) -> tuple[Sequence[Row[Any]], Total, bool]:
    """:func:`_search_rows` most recently updated first. No index yields that order (one of ``updated_at`` would
    cost every update of a node its in-place update), so every match is read and the exact total rides along on
    the page's rows, in one pass."""
    n = tables.nodes.c
    total_column = func.count().over().label("total")
    columns = (n.kind, n.namespace, n.name, updated.label("updated_at"), total_column, dataset_aliases.HAS_GROUPS)
    query = select(*columns).where(*conditions).order_by(*order)
    rows = conn.execute(query.limit(asked.limit).offset(asked.offset)).all()
    if rows:
        return rows, Total(rows[0].total), bool(rows[0].has_groups)
    if asked.offset == 0:
        return rows, Total(0), False
    # a page past the end carries no count: count apart
    total = conn.execute(select(func.count()).select_from(tables.nodes).where(*conditions)).scalar() or 0
    return rows, Total(total), False


def _run_dict(row: Any, facets: str | None, visible: Visible = None) -> dict[str, Any]:
    data = run_data(row, row.created_at, row.updated_at)
    assert data is not None
    data.update(jobNamespace=row.namespace, jobName=row.name, facets=visible_facets(facets, visible))
    return data


def _runs_query(*facets: Any) -> Any:
    """The runs with their jobs' names, and ``facets`` (the ``lineage_runs.facets`` column, or none)."""
    r, n = tables.runs.c, tables.nodes.c
    return select(
        r.run_uuid,
        r.state,
        r.created_at,
        r.updated_at,
        r.started_at,
        r.ended_at,
        r.nominal_start_time,
        r.nominal_end_time,
        r.parent_run_uuid,
        *facets,
        n.namespace,
        n.name,
    ).join_from(tables.runs, tables.nodes, n.id == r.job_id)


def list_runs(
    conn: Connection, job_id: int, limit: int, offset: int, visible: Visible = None, admit: Admit | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Runs of one job, newest first (the caller checks that the job is visible); ``admit`` is told the sizes of
    the page's stored facets, which are read after it."""
    r = tables.runs.c
    query = _runs_query().where(r.job_id == job_id).order_by(r.created_at.desc(), r.run_uuid)
    rows, total = sized_page(conn, query, stored_size(r.facets, conn.dialect.name), limit, offset, admit)
    wanted = [row.run_uuid for row in rows if row.size]
    facets = dict(conn.execute(select(r.run_uuid, r.facets).where(r.run_uuid.in_(wanted))).all()) if wanted else {}
    visible = None if visible is None else frozenset(visible)
    return [_run_dict(row, facets.get(row.run_uuid), visible) for row in rows], total


def get_run(conn: Connection, run_uuid: str, visible: Visible = None) -> dict[str, Any] | None:
    """One run with the datasets it read and wrote, or None (also when its job is hidden)."""
    row = conn.execute(_runs_query(tables.runs.c.facets).where(tables.runs.c.run_uuid == run_uuid.lower())).first()
    if row is None or (visible is not None and row.namespace not in visible):
        return None
    data = _run_dict(row, row.facets, None if visible is None else frozenset(visible))
    io, n = tables.run_io.c, tables.nodes.c
    query = (
        select(io.direction, n.namespace, n.name)
        .join_from(tables.run_io, tables.nodes, n.id == io.dataset_id)
        .where(io.run_uuid == row.run_uuid)
        .order_by(n.namespace, n.name)
    )
    if visible is not None:
        query = query.where(namespace_in(n.namespace, visible, conn.dialect.name))
    data["inputs"], data["outputs"] = [], []
    for direction, namespace, name in conn.execute(query):
        data[f"{direction}s"].append({"namespace": namespace, "name": name})
    return data


def list_events(
    conn: Connection,
    limit: int,
    offset: int,
    run_uuid: str | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    visible: Visible = None,
    *,
    kind: str | None = None,
    ascending: bool = False,
    job_namespace: str | None = None,
    job_name: str | None = None,
    admit: Admit | None = None,
) -> tuple[list[Any], int]:
    """Raw events as received, optionally of one run, one kind (``run``, ``job``, ``dataset``), one job
    namespace (the events of its jobs), one job name (in any namespace unless ``job_namespace`` is given too)
    or a time window.

    ``after`` is inclusive and ``before`` exclusive (``after <= eventTime < before``), so consecutive windows
    never share an event. Newest event time first, or oldest first with ``ascending``; events at the same
    time keep the order they were stored in (ties broken by the stored row's id, in the same direction),
    so paging with ``offset`` never repeats or skips one. With ``visible``, only events that name no hidden
    namespace (see the module docstring); the total is counted under the same conditions.

    ``admit`` is told the page's payload sizes before the payloads are read. Each event is answered as stored
    (:class:`msgspec.Raw`): the stored text is the event's canonical JSON, so it is not decoded and encoded again.
    """
    e = tables.events.c
    order = (e.event_time.asc(), e.id.asc()) if ascending else (e.event_time.desc(), e.id.desc())
    query = select(e.id).order_by(*order)
    conditions = []
    if run_uuid is not None:
        conditions.append(e.run_uuid == run_uuid.lower())
    if kind is not None:
        conditions.append(e.kind == kind)
    if job_namespace is not None:
        conditions.append(e.job_namespace == job_namespace)
    if job_name is not None:
        conditions.append(e.job_name == job_name)
    if after is not None:
        conditions.append(e.event_time >= after)
    if before is not None:
        conditions.append(e.event_time < before)
    if visible is not None:
        conditions.append(events_visible(conn, visible))
    if conditions:
        query = query.where(and_(*conditions))
    rows, total = sized_page(conn, query, payloads.size_of(conn.dialect.name), limit, offset, admit)
    ids = [row.id for row in rows]
    stored = conn.execute(select(e.id, *payloads.payload_columns()).where(e.id.in_(ids))) if ids else ()
    texts = {event_id: payloads.text_of(conn, *columns) for event_id, *columns in stored}
    # An event gone since the page was sized (a prune or reset committed in between: a read transaction on
    # PostgreSQL sees each statement's committed state) is left out, and out of the count.
    shown = [msgspec.Raw(texts[row.id]) for row in rows if row.id in texts]
    return shown, total - (len(rows) - len(shown))


def events_visible(conn: Connection, visible: Collection[str]) -> ColumnElement[bool]:
    """The condition on ``lineage_events`` rows a namespace-limited key may read (see the module docstring).

    The cheap ``job_namespace`` test goes first, so events of hidden jobs are dropped without parsing.
    """
    e, dialect = tables.events.c, conn.dialect.name
    return and_(
        or_(e.job_namespace.is_(None), namespace_in(e.job_namespace, visible, dialect)),
        not_(event_names_hidden_namespace(visible, dialect)),
    )


def named(dialect: str, link: Any, rows: Any, alias: str) -> tuple[Any, Any]:
    """``(from clause, dataset)``: ``rows`` joined to the node ``link`` names, looked up by its key.

    On PostgreSQL through a ``LATERAL`` subquery (``OFFSET 0`` keeps it one): without statistics (a store
    just loaded, before autovacuum analyzes it) the planner would hash every node of the store for each
    row, 150 ms for a page of jobs instead of 1 ms.
    """
    dataset = tables.nodes.alias(alias)
    if dialect != "postgresql":
        return rows.join(dataset, dataset.c.id == link), dataset
    found = select(dataset.c.namespace, dataset.c.name).where(dataset.c.id == link).offset(0).lateral(f"{alias}_named")
    return rows.join(found, true()), found
