"""Version 8: one dataset under several names: symlink keys, producers, groups."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

from alembic import op
from sqlalchemy import Connection, text

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _dataset_identity(op.get_bind())


_IDENTITY_TABLES = """
CREATE INDEX ix_lineage_symlinks_alias ON lineage_symlinks (alias_key, dataset_id);
CREATE TABLE lineage_node_producers (
    node_id {bigint} NOT NULL,
    producer_key VARCHAR(40) NOT NULL,
    producer TEXT NOT NULL,
    first_seen {timestamp} NOT NULL,
    PRIMARY KEY (node_id, producer_key)
);
CREATE TABLE lineage_dataset_members (
    node_id {bigint} NOT NULL,
    member_id {bigint} NOT NULL,
    canonical_id {bigint} NOT NULL,
    PRIMARY KEY (node_id, member_id)
);
CREATE INDEX ix_lineage_dataset_members_canonical ON lineage_dataset_members (canonical_id);
CREATE TABLE lineage_store_settings (
    name VARCHAR(64) NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (name)
)
"""

#: Version 7's symlinks a page at a time, in key order after the last one of the page before.
_V7_SYMLINKS = (
    "SELECT dataset_id, symlink_key, namespace, name FROM lineage_symlinks"
    " WHERE dataset_id > :after_id OR (dataset_id = :after_id AND symlink_key > :after_key)"
    " ORDER BY dataset_id, symlink_key LIMIT 1000"
)


def _dataset_identity(conn: Connection) -> None:
    """Version 8: one dataset under several names. Symlinks gain the key of the dataset they name, how the
    name was claimed and by which producer; the producers of each node, the groups of datasets known under
    several names, and the store's settings (its id, the namespace aliases) get tables. Existing symlinks are keyed and
    grouped (without namespace aliases, which the consumer applies when it opens the store)."""
    postgres = conn.dialect.name == "postgresql"
    bigint, timestamp = ("BIGINT", "TIMESTAMP WITH TIME ZONE") if postgres else ("INTEGER", "DATETIME")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN alias_key VARCHAR(40)")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN via VARCHAR(10) DEFAULT 'symlink' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE lineage_symlinks ADD COLUMN producer TEXT")
    for ddl in _IDENTITY_TABLES.format(bigint=bigint, timestamp=timestamp).split(";"):
        conn.exec_driver_sql(ddl)
    keyed = text("UPDATE lineage_symlinks SET alias_key = :b_alias WHERE dataset_id = :b_id AND symlink_key = :b_key")
    after_id, after_key = -1, ""
    while rows := conn.execute(text(_V7_SYMLINKS), {"after_id": after_id, "after_key": after_key}).all():
        after_id, after_key = rows[-1][0], rows[-1][1]
        updates = [{"b_id": d, "b_key": k, "b_alias": _node_key("dataset", ns, n)} for d, k, ns, n in rows]
        conn.execute(keyed, updates)
    conn.execute(
        text("INSERT INTO lineage_store_settings (name, value) VALUES ('store_id', :id)"), {"id": str(uuid.uuid4())}
    )
    _group_claimed_datasets(conn)


#: Ids or keys per ``IN (...)`` list.
_CHUNK = 900


def _node_key(kind: str, namespace: str, name: str) -> str:
    """The key of a job or dataset node: SHA-1 of kind, namespace and name."""
    return hashlib.sha1(f"{kind}\x00{namespace}\x00{name}".encode()).hexdigest()


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(prefix: str, values: list[Any]) -> tuple[str, dict[str, Any]]:
    """``:p0, :p1, ...`` for an ``IN (...)`` list of ``values``, and their parameters."""
    return ", ".join(f":{prefix}{i}" for i in range(len(values))), {f"{prefix}{i}": v for i, v in enumerate(values)}


def _datasets(conn: Connection, column_: str, values: list[Any]) -> dict[int, tuple[str, str, str]]:
    """``id → (node key, namespace, name)`` of the dataset nodes whose ``column_`` is one of ``values``."""
    found: dict[int, tuple[str, str, str]] = {}
    for chunk in _chunks(sorted(set(values))):
        marks, bound = _marks("v", chunk)
        query = (
            f"SELECT id, node_key, namespace, name FROM lineage_nodes WHERE kind = 'dataset' AND {column_} IN ({marks})"
        )
        found.update((node, (key, ns, name)) for node, key, ns, name in conn.execute(text(query), bound))
    return found


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


def _group_claimed_datasets(conn: Connection) -> None:
    """Group the datasets the stored claims link, as the ingest did at version 8 with no namespace aliases.

    A dataset's symlink names another stored dataset (``alias_key`` is that one's node key): the two are one. A name
    claimed by two or more datasets is a conflict and links none of them. The canonical member of a group is the
    least ``(is a storage location, namespace, name)``: a name claimed with type ``LOCATION``, or a dataset that
    claims a ``TABLE``, is a storage location. Each group is written as a row per two members (each with itself)
    with the canonical id, and the version of every grouped node is bumped (the graph-card cache key).
    """
    claims = [
        (claimant, alias_key, kind)
        for claimant, alias_key, kind in conn.execute(
            text("SELECT dataset_id, alias_key, type FROM lineage_symlinks WHERE alias_key IS NOT NULL")
        )
    ]
    if not claims:
        return
    claimants = _datasets(conn, "id", [claimant for claimant, _key, _kind in claims])
    claimed = _datasets(conn, "node_key", [key for _claimant, key, _kind in claims])
    nodes = {**claimants, **claimed}
    by_key = {key: node for node, (key, _ns, _name) in nodes.items()}
    real = {(c, k, t) for c, k, t in claims if c in claimants and k != claimants[c][0]}
    by_name: dict[str, set[int]] = {}
    for claimant, alias_key, _kind in real:
        by_name.setdefault(alias_key, set()).add(claimant)
    groups, locations = _UnionFind(), set()
    for claimant, alias_key, kind in real:
        target = by_key.get(alias_key)
        if target is None or len(by_name[alias_key]) > 1:
            continue  # a name not stored, or a conflict: several datasets claim it, none gets it
        groups.union(claimant, target)
        if (kind or "").upper() == "LOCATION":
            locations.add(target)
        elif (kind or "").upper() == "TABLE":
            locations.add(claimant)
    members: dict[int, set[int]] = {}
    for node in nodes:
        members.setdefault(groups.find(node), set()).add(node)
    rows = []
    for group in members.values():
        if len(group) > 1:
            canonical = min(group, key=lambda node: (node in locations, nodes[node][1], nodes[node][2]))
            rows += [
                {"node": node, "member": member, "canonical": canonical}
                for node in sorted(group)
                for member in sorted(group)
            ]
    if not rows:
        return
    add_member = text(
        "INSERT INTO lineage_dataset_members (node_id, member_id, canonical_id) VALUES (:node, :member, :canonical)"
    )
    for start in range(0, len(rows), _CHUNK):
        conn.execute(add_member, rows[start : start + _CHUNK])
    for chunk in _chunks(sorted({row["node"] for row in rows})):
        marks, bound = _marks("n", chunk)
        conn.execute(text(f"UPDATE lineage_nodes SET version = version + 1 WHERE id IN ({marks})"), bound)
