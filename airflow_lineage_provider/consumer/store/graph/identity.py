"""One dataset under several names: which stored datasets are the same data, and which name stands for it.

Producers name one table differently: Spark by its files (``file:/warehouse/tbl1``) with a ``symlinks``
facet naming the metastore table (``hive://metastore:9083``, ``default.tbl1``, type ``TABLE``); Hive by the
table with a ``symlinks`` facet naming its location (type ``LOCATION``); two producers by two host names of
one database. The store keeps every name as the producers sent it, and groups the names of one dataset:

* **claims** — a dataset *claims* each identifier of its ``symlinks`` facets, and, when its ``dataSource``
  facet's URI is a bare ``scheme://authority`` other than its own namespace, its own name under that URI
  (``lineage_symlinks``, written by the ingest with the producer that said it);
* **namespace aliases** — ``alias = canonical`` pairs of the consumer's configuration: a dataset in the alias
  namespace and the one of the same name in the canonical namespace are the same (applied from the
  configuration the store was opened with, see :func:`apply_namespace_aliases`; no event is rewritten).

A claim links the claiming dataset to the dataset stored under the claimed name, whenever that one is stored
(before or after the claim: a late symlink merges datasets already stored, without re-ingesting anything).
The datasets linked together, directly or through others, form a **group**: one dataset. A name claimed by
two or more datasets that are not otherwise the same (say, two storage locations of one table) is a
**conflict**: it links nothing — no guess is made — and :func:`conflicts` reports it.

The **canonical** name of a group (what graph answers show as the node, the others being its aliases) is
the member with the least ``(is a storage location, in an alias namespace, namespace, name)``: a storage
location is a name claimed with type ``LOCATION`` or a dataset that claims a ``TABLE``, so a metastore table
wins over its files; then the configuration's canonical namespace; then the first in code-point order.

Groups are kept in ``lineage_dataset_members`` (a row per two members, each with itself, and the canonical
id; a dataset alone has none) and rewritten by :func:`regroup` whenever a claim, a claimed dataset or a
dataset in an aliased namespace is stored. Every node whose group changed gets its version bumped, so no
cached answer (:mod:`.versioned_cache`) shows the old group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, delete, distinct, func, insert, select, tuple_

from airflow_lineage_provider.consumer.store.graph.versioned_cache import bump_versions
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.store_settings import (
    NAMESPACE_ALIASES,
    read_settings,
    write_setting,
)

#: Ids or keys per ``IN (...)`` list.
CHUNK = 900

_n, _s, _m = tables.nodes.c, tables.symlinks.c, tables.dataset_members.c


def data_source_alias(namespace: str, facets: Mapping[str, Any]) -> str | None:
    """The namespace a ``dataSource`` facet names the dataset's database by, when it is another spelling of
    ``namespace``. The URI is read as the naming spec writes namespaces: ``scheme://host[:port]``, and a path only
    when ``namespace`` has one too (``postgres://db:5432/analytics`` names the database ``analytics`` of the
    namespace ``postgres://db:5432``, whose datasets are named ``analytics.schema.table``). Credentials, query and
    fragment are never part of it. None for a URI without scheme or host, or naming ``namespace`` itself."""
    facet = facets.get("dataSource")
    uri = facet.get("uri") if isinstance(facet, dict) else None
    if not isinstance(uri, str) or "\x00" in uri:
        return None
    try:
        parts = urlsplit(uri.strip())
        host, port = parts.hostname, parts.port
        own_path = urlsplit(namespace).path.rstrip("/")
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    alias = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    if own_path:
        alias += parts.path.rstrip("/")
    return None if alias == namespace else alias


def chunks(items: Iterable[Any]) -> Iterator[list[Any]]:
    """``items`` in lists of at most :data:`CHUNK` (one ``IN (...)`` list each)."""
    items = list(items)
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


@dataclass(frozen=True)
class _Node:
    id: int
    key: str
    namespace: str
    name: str


@dataclass(frozen=True)
class _Claim:
    claimant: int
    alias_key: str
    namespace: str
    name: str
    type: str | None


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, node: int) -> int:
        parent = self.parent.setdefault(node, node)
        if parent != node:
            parent = self.parent[node] = self.find(parent)
        return parent

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def stored_namespace_aliases(conn: Connection, settings: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``alias → canonical`` namespaces the store's groups were derived with (empty: none), from its
    ``settings`` when already read (:func:`.store_settings.read_settings`)."""
    value = (read_settings(conn) if settings is None else settings).get(NAMESPACE_ALIASES)
    return dict(json.loads(value)) if value else {}


def _equivalents(aliases: Mapping[str, str]) -> dict[str, list[str]]:
    """``namespace → every namespace of its alias group`` (itself included), for the aliased namespaces."""
    groups: dict[str, set[str]] = {}
    for alias, canonical in aliases.items():
        groups.setdefault(canonical, {canonical}).add(alias)
    return {namespace: sorted(group) for group in groups.values() for namespace in group}


class _Explorer:
    """Reads the nodes, claims and old groups around some datasets, a layer of neighbours at a time."""

    def __init__(self, conn: Connection, aliases: Mapping[str, str]) -> None:
        self.conn = conn
        self.equivalents = _equivalents(aliases)
        self.nodes: dict[int, _Node] = {}
        self.claims: set[_Claim] = set()
        self.old_groups: dict[int, tuple[int, frozenset[int]]] = {}

    def _read_nodes(self, where: Any) -> list[_Node]:
        query = select(_n.id, _n.node_key, _n.namespace, _n.name).where(_n.kind == "dataset", where)
        found = [_Node(*row) for row in self.conn.execute(query)]
        self.nodes.update((node.id, node) for node in found)
        return found

    def explore(self, seeds: Iterable[int]) -> None:
        frontier = {node.id for chunk in chunks(set(seeds)) for node in self._read_nodes(_n.id.in_(chunk))}
        seen: set[int] = set()
        while frontier:
            seen |= frontier
            found = self._neighbours(frontier)
            frontier = found - seen

    def _neighbours(self, frontier: set[int]) -> set[int]:
        found: set[int] = set()
        keys = {self.nodes[node].key: node for node in frontier}
        claimed: set[str] = set()
        for chunk in chunks(frontier):  # what these datasets claim, and their old groups
            for row in self.conn.execute(
                select(_s.dataset_id, _s.alias_key, _s.namespace, _s.name, _s.type).where(_s.dataset_id.in_(chunk))
            ):
                if row.alias_key is not None and row.alias_key != self.nodes[row.dataset_id].key:
                    self.claims.add(_Claim(*row))
                    claimed.add(row.alias_key)
            for node, member, canonical in self.conn.execute(
                select(_m.node_id, _m.member_id, _m.canonical_id).where(_m.node_id.in_(chunk))
            ):
                old = self.old_groups.get(node, (canonical, frozenset()))
                self.old_groups[node] = (canonical, old[1] | {member})
                found.add(member)
        for chunk in chunks(keys):  # who claims these datasets' names
            for row in self.conn.execute(
                select(_s.dataset_id, _s.alias_key, _s.namespace, _s.name, _s.type).where(_s.alias_key.in_(chunk))
            ):
                if row.dataset_id != keys[row.alias_key]:
                    self.claims.add(_Claim(*row))
                    found.add(row.dataset_id)
        for chunk in chunks(claimed):  # the datasets stored under the claimed names
            found.update(node.id for node in self._read_nodes(_n.node_key.in_(chunk)))
        pairs = {
            (other, self.nodes[node].name)
            for node in frontier
            for other in self.equivalents.get(self.nodes[node].namespace, ())
            if other != self.nodes[node].namespace
        }
        for chunk in chunks(pairs):  # the same name in the other namespaces of an alias group
            found.update(node.id for node in self._read_nodes(tuple_(_n.namespace, _n.name).in_(chunk)))
        missing = found - self.nodes.keys()
        for chunk in chunks(missing):
            self._read_nodes(_n.id.in_(chunk))
        return {node for node in found if node in self.nodes}


def identity_key(namespace: str, name: str, aliases: Mapping[str, str]) -> tuple[str, str]:
    """What makes two names one dataset without any claim: the same name in namespaces ``aliases`` maps to the
    same canonical namespace. Claimants with the same key are one dataset, never a conflict."""
    return aliases.get(namespace, namespace), name


def _identity(node: _Node, aliases: Mapping[str, str]) -> tuple[str, str]:
    return identity_key(node.namespace, node.name, aliases)


def _groups(explorer: _Explorer, aliases: Mapping[str, str]) -> dict[int, tuple[int, frozenset[int]]]:
    """``node → (canonical id, members)`` of every explored dataset in a group of two or more."""
    nodes = explorer.nodes
    by_key = {node.key: node.id for node in nodes.values()}
    groups = _UnionFind()
    claimants: dict[str, set[int]] = {}
    for claim in explorer.claims:
        claimants.setdefault(claim.alias_key, set()).add(claim.claimant)
    locations: set[int] = set()
    for claim in explorer.claims:
        target = by_key.get(claim.alias_key)
        if target is None or claim.claimant not in nodes:
            continue
        if len({_identity(nodes[other], aliases) for other in claimants[claim.alias_key] if other in nodes}) > 1:
            continue  # a conflict: several datasets claim the name, none gets it
        groups.union(claim.claimant, target)
        kind = (claim.type or "").upper()
        if kind == "LOCATION":
            locations.add(target)
        elif kind == "TABLE":
            locations.add(claim.claimant)
    by_identity: dict[tuple[str, str], int] = {}
    for found in nodes.values():
        if found.namespace in explorer.equivalents:
            first = by_identity.setdefault(_identity(found, aliases), found.id)
            groups.union(found.id, first)
    members: dict[int, set[int]] = {}
    for node_id in nodes:
        members.setdefault(groups.find(node_id), set()).add(node_id)

    def rank(node: int) -> tuple[bool, bool, str, str]:
        found = nodes[node]
        return node in locations, found.namespace in aliases, found.namespace, found.name

    answer: dict[int, tuple[int, frozenset[int]]] = {}
    for group in members.values():
        if len(group) > 1:
            canonical, frozen = min(group, key=rank), frozenset(group)
            answer.update((node, (canonical, frozen)) for node in group)
    return answer


def regroup(conn: Connection, seeds: Iterable[int], aliases: Mapping[str, str] | None = None) -> set[int]:
    """Rewrite the groups of the datasets ``seeds`` and of every dataset linked to them; the node ids whose
    group changed (their versions are bumped). ``aliases``: ``alias → canonical`` namespaces (None: the
    store's, :func:`stored_namespace_aliases`)."""
    seeds = set(seeds)
    if not seeds:
        return set()
    aliases = stored_namespace_aliases(conn) if aliases is None else dict(aliases)
    explorer = _Explorer(conn, aliases)
    explorer.explore(seeds)
    new = _groups(explorer, aliases)
    old = explorer.old_groups
    changed = {node for node in explorer.nodes if old.get(node) != new.get(node)}
    if not changed:
        return set()
    for chunk in chunks(changed):
        conn.execute(delete(tables.dataset_members).where(_m.node_id.in_(chunk)))
    rows = [
        {"node_id": node, "member_id": member, "canonical_id": new[node][0]}
        for node in sorted(changed)
        if node in new
        for member in sorted(new[node][1])
    ]
    for start in range(0, len(rows), CHUNK):
        conn.execute(insert(tables.dataset_members), rows[start : start + CHUNK])
    for chunk in chunks(changed):
        bump_versions(conn, chunk)
    return changed


def _claimed_or_aliased(conn: Connection, aliases: Mapping[str, str]) -> set[int]:
    """Every dataset that claims a name, is claimed, is grouped or lives in an aliased namespace."""
    found = set(conn.execute(select(_s.dataset_id).distinct()).scalars())
    found |= set(conn.execute(select(_m.node_id)).scalars())
    claimed = select(_s.alias_key).where(_s.alias_key.is_not(None))
    found |= set(conn.execute(select(_n.id).where(_n.kind == "dataset", _n.node_key.in_(claimed))).scalars())
    for chunk in chunks(_equivalents(aliases)):
        found |= set(conn.execute(select(_n.id).where(_n.kind == "dataset", _n.namespace.in_(chunk))).scalars())
    return found


def regroup_everything(conn: Connection, aliases: Mapping[str, str] | None = None) -> set[int]:
    """Derive every group of the store again (a migration, a changed namespace-alias configuration)."""
    aliases = stored_namespace_aliases(conn) if aliases is None else dict(aliases)
    return regroup(conn, _claimed_or_aliased(conn, aliases), aliases)


def apply_namespace_aliases(conn: Connection, aliases: Mapping[str, str]) -> set[int]:
    """Make ``aliases`` (``alias → canonical``) the store's namespace aliases; regroup the datasets of the
    namespaces named by the old or the new mapping when it changed. The node ids whose group changed."""
    aliases = dict(sorted(aliases.items()))
    old = stored_namespace_aliases(conn)
    if old == aliases:
        return set()
    write_setting(conn, NAMESPACE_ALIASES, json.dumps(aliases))
    seeds: set[int] = set()
    for chunk in chunks(set(_equivalents(old)) | set(_equivalents(aliases))):
        seeds |= set(conn.execute(select(_n.id).where(_n.kind == "dataset", _n.namespace.in_(chunk))).scalars())
    seeds |= set(conn.execute(select(_m.node_id)).scalars())
    return regroup(conn, seeds, aliases)


def ungrouped_candidates(
    conn: Connection, datasets: Mapping[str, str], aliases: Mapping[str, str], any_claim: bool | None = None
) -> set[int]:
    """Of the datasets a batch just stored (``node key → namespace``), those in no group that another
    dataset claims or that live in an aliased namespace: a group may now form around them.

    Costs one probe of the claims' index per dataset, and nothing when the store holds no claim at all
    (``any_claim``, when the caller already knows: :func:`.store_settings.read_settings_and_claims`).
    """
    equivalents = _equivalents(aliases)
    candidates = {key for key, namespace in datasets.items() if namespace in equivalents}
    if any_claim is None:
        any_claim = conn.execute(select(_s.alias_key).where(_s.alias_key.is_not(None)).limit(1)).first() is not None
    if any_claim:
        for chunk in chunks(datasets):
            candidates.update(conn.execute(select(_s.alias_key).where(_s.alias_key.in_(chunk)).distinct()).scalars())
    found: set[int] = set()
    if not candidates:  # most batches: not even the query is built (that alone was a tenth of a small batch's ingest)
        return found
    no_group = ~select(_m.node_id).where(_m.node_id == _n.id).exists()
    for chunk in chunks(candidates):
        query = select(_n.id).where(_n.node_key.in_(chunk), _n.kind == "dataset", no_group)
        found.update(conn.execute(query).scalars())
    return found


@dataclass(frozen=True)
class Conflict:
    """A name claimed by datasets that are not otherwise the same: it links none of them."""

    namespace: str
    name: str
    claimants: tuple[tuple[str, str, str, str | None], ...]
    """``(namespace, name, via, producer)`` of each dataset claiming the name."""


def conflicts(conn: Connection, limit: int, offset: int) -> tuple[list[Conflict], int]:
    """A page of the names in conflict (by namespace and name) and how many there are."""
    aliases = stored_namespace_aliases(conn)
    claimant = tables.nodes.alias("claimant")
    several = select(_s.alias_key).where(_s.alias_key.is_not(None)).group_by(_s.alias_key)
    several = several.having(func.count(distinct(_s.dataset_id)) > 1)
    query = (
        select(_s.alias_key, _s.namespace, _s.name, _s.via, _s.producer, claimant.c.namespace, claimant.c.name)
        .join(claimant, claimant.c.id == _s.dataset_id)
        .where(_s.alias_key.in_(several))
        .order_by(_s.namespace, _s.name, claimant.c.namespace, claimant.c.name)
    )
    found: dict[str, tuple[str, str, list[tuple[str, str, str, str | None]]]] = {}
    for key, namespace, name, via, producer, owner_ns, owner_name in conn.execute(query):
        found.setdefault(key, (namespace, name, []))[2].append((owner_ns, owner_name, via, producer))
    listed = [
        Conflict(namespace, name, tuple(claims))
        for namespace, name, claims in found.values()
        if len({identity_key(ns, n, aliases) for ns, n, _via, _producer in claims}) > 1
    ]
    return listed[offset : offset + limit], len(listed)
