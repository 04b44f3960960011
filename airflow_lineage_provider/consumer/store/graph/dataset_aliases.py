"""Listings and search show a dataset known under several names once (the groups of :mod:`.identity`).

A dataset in a group (``lineage_dataset_members``) is *listed* under one of its names, its **representative**:
the group's canonical name, or — for a key limited to namespace patterns that cannot see the canonical name —
the first of the group's visible names in code-point order of ``(namespace, name)``. The other names are left
out of listings and search, and appear in the listed dataset's ``aliases``; a name in a hidden namespace is
never shown, so a group none of whose names is visible is not listed at all.

What a listed group shows, read over its visible names (:func:`merge_times` and the callers):
``createdAt`` the earliest and ``updatedAt`` the latest of its names'; the schema and the facets the latest
(by event time) any of its names received; tags the union of its names' tags; the runs that wrote any of them.

``aliases``: one ``{namespace, name, via, producers}`` per other visible name, by namespace and name. ``via``
says how that name joined the group: ``symlink`` or ``dataSource`` when a claim (``lineage_symlinks``) links
it to the representative, or else to another name of the group; ``namespaceAlias`` when only the configured
namespace aliases make it the same dataset. ``producers``: the producers whose events named the dataset by
that name (``lineage_node_producers``, first seen first).

``aliasConflicts`` (our listing): the names the dataset (any of its visible names) claims that other datasets
claim too (a conflict, :func:`.identity.conflicts`: such a name links nothing). A limited key sees a conflict
only when the name's namespace and at least two of its claimants are visible.

Cost: every function here is index lookups by node id or key, run for the page only. A store without groups
lists, pages and searches with the statements it used before: whether it has any rides along with a
statement the listing runs anyway (:func:`probes`; :func:`has_groups` alone where none does), and a store where
no dataset claims a name reads no claim either.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, exists, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.graph import identity
from airflow_lineage_provider.consumer.store.graph.identity import chunks
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables

#: How a name joined its group, best first (a claim beats the namespace aliases).
VIA_ORDER = ("symlink", "dataSource", "namespaceAlias")

_m, _n, _s, _p = tables.dataset_members.c, tables.nodes.c, tables.symlinks.c, tables.node_producers.c


@dataclass(frozen=True)
class Aliasing:
    """What a listing must look at: whether some dataset has several names, and whether some claims a name."""

    groups: bool
    claims: bool


#: Whether some dataset has several names, and whether some dataset claims a name: columns to add to a
#: statement a listing runs anyway (each an index probe, evaluated once per statement; built once).
HAS_GROUPS = exists(select(_m.node_id)).label("has_groups")
HAS_CLAIMS = exists(select(_s.alias_key).where(_s.alias_key.is_not(None))).label("has_claims")


def probes() -> tuple[Any, Any]:
    """:data:`HAS_GROUPS` and :data:`HAS_CLAIMS`: the two questions of :class:`Aliasing` as columns."""
    return HAS_GROUPS, HAS_CLAIMS


def grouped_probe(node: Any) -> Any:
    """A column saying whether the dataset row ``node`` has a group (one index probe per row)."""
    return exists(select(_m.node_id).where(_m.node_id == node.id)).label("grouped")


def has_groups(conn: Connection) -> bool:
    """Whether any dataset of the store is known under several names (one index probe)."""
    return bool(conn.execute(select(exists(select(_m.node_id)))).scalar())


#: Where a connection remembers whether the store had groups when it last looked (see :func:`expect_groups`).
_EXPECT_GROUPS = "lineage_expect_dataset_groups"


def expect_groups(conn: Connection) -> bool:
    """Whether the store had groups when this (pooled) connection last looked: a listing then builds its
    grouped statements at once instead of first asking. Only a hint — the grouped statements answer rightly
    on any store, the plain ones only on a store without groups, so a stale hint costs time, never truth."""
    return bool(conn.info.get(_EXPECT_GROUPS, False))


def note_groups(conn: Connection, present: bool) -> None:
    """Remember for :func:`expect_groups` whether the store has groups."""
    conn.info[_EXPECT_GROUPS] = present


def _collated(column: Any, dialect: str) -> Any:
    """``column`` compared in code-point order on both stores (PostgreSQL's ``C`` collation)."""
    return column.collate("C") if dialect == "postgresql" else column


def _before(first: Any, second: Any, dialect: str) -> ColumnElement[bool]:
    """``(first.namespace, first.name) < (second.namespace, second.name)`` in code-point order."""
    a_ns, a_name = _collated(first.namespace, dialect), _collated(first.name, dialect)
    b_ns, b_name = _collated(second.namespace, dialect), _collated(second.name, dialect)
    return or_(a_ns < b_ns, and_(a_ns == b_ns, a_name < b_name))


def listed(node: Any, visible: Visible, dialect: str) -> ColumnElement[bool]:
    """Whether the dataset row ``node`` (columns of ``lineage_nodes``) is its group's representative, or in no
    group. With ``visible``, the caller keeps ``node`` to visible namespaces itself."""
    grouped = tables.dataset_members.alias("grouped")
    g = grouped.c
    if visible is None:
        other = select(g.node_id).where(g.node_id == node.id, g.member_id == node.id, g.canonical_id != node.id)
        return ~exists(other)
    member = tables.nodes.alias("member")
    beats = or_(g.canonical_id == member.c.id, and_(g.canonical_id != node.id, _before(member.c, node, dialect)))
    better = (
        select(g.member_id)
        .join_from(grouped, member, member.c.id == g.member_id)
        .where(g.node_id == node.id, g.member_id != node.id, namespace_in(member.c.namespace, visible, dialect), beats)
    )
    return ~exists(better)


def with_matching_member(match: Any, visible: Visible, dialect: str) -> Any:
    """The ids of the nodes whose own name satisfies ``match(columns)``, and of every dataset grouped with a
    (visible) dataset whose name does: what a listing or search by name keeps before :func:`listed`. One scan of
    the names (each match steps to its group's members by the members' key; duplicates are for ``IN``)."""
    named, grouped = tables.nodes.alias("named"), tables.dataset_members.alias("by_name")
    conditions = [match(named.c)]
    if visible is not None:
        conditions.append(namespace_in(named.c.namespace, visible, dialect))
    member = func.coalesce(grouped.c.member_id, named.c.id)
    return select(member).outerjoin_from(named, grouped, grouped.c.node_id == named.c.id).where(*conditions)


def group_updated(node: Any, visible: Visible, dialect: str) -> Any:
    """The latest ``updated_at`` of the (visible) names of ``node``'s group, ``node``'s own without a group."""
    grouped, member = tables.dataset_members.alias("updated_group"), tables.nodes.alias("updated_member")
    query = select(func.max(member.c.updated_at)).join_from(grouped, member, member.c.id == grouped.c.member_id)
    query = query.where(grouped.c.node_id == node.id)
    if visible is not None:
        query = query.where(namespace_in(member.c.namespace, visible, dialect))
    return func.coalesce(query.scalar_subquery(), node.updated_at)


@dataclass(frozen=True)
class Name:
    """One name of a dataset: its node."""

    id: int
    key: str
    namespace: str
    name: str


@dataclass(frozen=True)
class Group:
    """The names of one dataset: every member (hidden ones included) and its canonical node id."""

    canonical: int
    members: tuple[Name, ...]

    def shown(self, visible: Visible) -> list[Name]:
        """The members a key seeing ``visible`` may see, the representative first, then by namespace and name."""
        names = [name for name in self.members if visible is None or name.namespace in visible]
        names.sort(key=lambda name: (name.id != self.canonical, name.namespace, name.name))
        return names


def groups(conn: Connection, ids: Iterable[int]) -> dict[int, Group]:
    """``id → Group`` for each of the datasets ``ids`` that has one."""
    rows: dict[int, tuple[int, list[Name]]] = {}
    for chunk in chunks(set(ids)):
        query = (
            select(_m.node_id, _m.canonical_id, _n.id, _n.node_key, _n.namespace, _n.name)
            .join_from(tables.dataset_members, tables.nodes, _n.id == _m.member_id)
            .where(_m.node_id.in_(chunk))
        )
        for node, canonical, *member in conn.execute(query):
            rows.setdefault(node, (canonical, []))[1].append(Name(*member))
    return {node: Group(canonical, tuple(members)) for node, (canonical, members) in rows.items()}


def producers(conn: Connection, ids: Iterable[int]) -> dict[int, list[str]]:
    """``node → producers`` whose events named it by its own name, first seen first."""
    found: dict[int, list[str]] = {}
    for chunk in chunks(ids):
        query = select(_p.node_id, _p.producer).where(_p.node_id.in_(chunk)).order_by(_p.first_seen, _p.producer)
        for node, producer in conn.execute(query):
            found.setdefault(node, []).append(producer)
    return found


@dataclass(frozen=True)
class Claim:
    """A name a dataset claims (``lineage_symlinks``): the claimant's node id, the named dataset's node key."""

    claimant: int
    key: str
    namespace: str
    name: str
    via: str


def claims(conn: Connection, ids: Iterable[int]) -> list[Claim]:
    """The names the datasets ``ids`` claim (one statement per :data:`.identity.CHUNK` ids, by the table's key)."""
    found: list[Claim] = []
    for chunk in chunks(set(ids)):
        query = select(_s.dataset_id, _s.alias_key, _s.namespace, _s.name, _s.via).where(
            _s.dataset_id.in_(chunk), _s.alias_key.is_not(None)
        )
        found += [Claim(*row) for row in conn.execute(query)]
    return found


def _links(said: Iterable[Claim], members: dict[str, int]) -> dict[tuple[int, int], set[str]]:
    """``(a, b) → vias`` of the claims between two of the datasets ``members`` (``key → id``), both ways."""
    links: dict[tuple[int, int], set[str]] = {}
    for claim in said:
        target = members.get(claim.key)
        if target is not None and target != claim.claimant:
            links.setdefault((claim.claimant, target), set()).add(claim.via)
            links.setdefault((target, claim.claimant), set()).add(claim.via)
    return links


def _via(links: dict[tuple[int, int], set[str]], name: int, representative: int, group: Group) -> str:
    """How ``name`` joined the group of ``representative`` (see the module docstring)."""
    for others in ([representative], [member.id for member in group.members]):
        vias = set().union(*(links.get((name, other), set()) for other in others))
        if vias:
            return min(vias, key=lambda via: VIA_ORDER.index(via) if via in VIA_ORDER else len(VIA_ORDER))
    return "namespaceAlias"


def aliases(
    conn: Connection, shown: dict[int, Group], visible: Visible, said: list[Claim] | None = None
) -> dict[int, list[dict[str, Any]]]:
    """``representative → aliases`` (``{namespace, name, via, producers}``, see the module docstring) for the
    listed datasets ``shown`` (``representative → its group``); ``said``: the groups' claims when read already
    (:func:`claims` of every member)."""
    if not shown:
        return {}
    every = {member.id: member for group in shown.values() for member in group.members}
    links = _links(claims(conn, every) if said is None else said, {member.key: member.id for member in every.values()})
    producing = producers(conn, every)
    found: dict[int, list[dict[str, Any]]] = {}
    for node, group in shown.items():
        found[node] = [
            {
                "namespace": name.namespace,
                "name": name.name,
                "via": _via(links, name.id, node, group),
                "producers": producing.get(name.id, []),
            }
            for name in group.shown(visible)
            if name.id != node
        ]
    return found


def _claimants(conn: Connection, keys: Iterable[str], visible: Visible) -> dict[str, set[tuple[str, str]]]:
    """``key → (namespace, name)`` of every (visible) dataset claiming the name of node key ``key``."""
    found: dict[str, set[tuple[str, str]]] = {}
    for chunk in chunks(keys):
        query = (
            select(_s.alias_key, _n.namespace, _n.name)
            .join_from(tables.symlinks, tables.nodes, _n.id == _s.dataset_id)
            .where(_s.alias_key.in_(chunk))
        )
        for key, namespace, name in conn.execute(query):
            if visible is None or namespace in visible:
                found.setdefault(key, set()).add((namespace, name))
    return found


def alias_conflicts(
    conn: Connection, names: dict[int, list[int]], visible: Visible, said: list[Claim] | None = None
) -> dict[int, list[dict[str, str]]]:
    """``listed dataset → [{namespace, name}]``: the names its ``names`` (node ids) claim that datasets which are
    not the same claim too (see the module docstring); datasets without one are absent. ``said``: claims read
    already (:func:`claims` of at least those ids)."""
    owner = {node: listed for listed, ids in names.items() for node in ids}
    claimed: dict[str, tuple[str, str, set[int]]] = {}
    for claim in claims(conn, owner) if said is None else said:
        if claim.claimant in owner and (visible is None or claim.namespace in visible):
            claimed.setdefault(claim.key, (claim.namespace, claim.name, set()))[2].add(owner[claim.claimant])
    if not claimed:
        return {}
    claimants = {key: found for key, found in _claimants(conn, claimed, visible).items() if len(found) > 1}
    if claimants:  # several names claim it: the same dataset by a namespace alias is no conflict
        namespace_aliases = identity.stored_namespace_aliases(conn)
        claimants = {
            key: found
            for key, found in claimants.items()
            if len({identity.identity_key(namespace, name, namespace_aliases) for namespace, name in found}) > 1
        }
    found: dict[int, list[dict[str, str]]] = {}
    for key, (namespace, name, listed_by) in sorted(claimed.items(), key=lambda item: item[1][:2]):
        if key in claimants:
            for node in sorted(listed_by):
                found.setdefault(node, []).append({"namespace": namespace, "name": name})
    return found


def merge_times(
    times: Iterable[tuple[datetime, datetime]],
) -> tuple[datetime, datetime]:
    """``(createdAt, updatedAt)`` of a group from its names' ``(created_at, updated_at)``."""
    spans = list(times)
    return min(span[0] for span in spans), max(span[1] for span in spans)


def latest(items: Iterable[tuple[Any, datetime | None, int]]) -> Any:
    """Of ``(value, time, rank)`` items, the value with a time, latest first, then least ``rank`` (the
    representative is rank 0); None when no item has a time."""
    timed = [(value, time, rank) for value, time, rank in items if time is not None]
    if not timed:
        return None
    return min(timed, key=lambda item: (-item[1].timestamp(), item[2]))[0]


def visible_set(visible: Visible) -> Collection[str] | None:
    """``visible`` as a set for membership tests (None stays None)."""
    return None if visible is None else frozenset(visible)
