"""What an answer shows of a node, kept in memory and keyed by the node's version.

``lineage_nodes.version`` is bumped by every ingest that changes what an answer shows of the node (every
event naming a job; for a dataset, only an event that moves its times or brings facets, a producer or a name:
:mod:`.node_versions`) and by every other write that does (a tag on it, retention pruning its runs, a reset
taking its edges). An entry read at version *v* is therefore valid exactly as long as the node's version is
*v*, whichever process wrote since: a reader reads the versions of the nodes it needs in its own
transaction, takes the entries at those versions from here, and reads only the rest from the store.

Used for graph cards (:mod:`.cards`) and Marquez's job objects (:mod:`...marquez.jobs`). Each cache is
per store and bounded; the least recently used entries go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, update

from airflow_lineage_provider.consumer.store.schema import tables

T = TypeVar("T")


class VersionedCache(Generic[T]):
    """At most ``capacity`` values by node id, each with the node version it was read at (0: no cache)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, tuple[int, T]] = OrderedDict()
        self._lock = threading.Lock()

    def lookup(self, versions: dict[int, int]) -> tuple[dict[int, T], list[int]]:
        """``(values found at their current version, ids to read)`` for ``node id → version``."""
        if not self.capacity:
            return {}, list(versions)
        found: dict[int, T] = {}
        missing: list[int] = []
        with self._lock:
            get, to_end = self._entries.get, self._entries.move_to_end  # bound once: called per node
            for node_id, version in versions.items():
                entry = get(node_id)
                if entry is not None and entry[0] == version:
                    found[node_id] = entry[1]
                    to_end(node_id)
                else:
                    missing.append(node_id)
        return found, missing

    def keep(self, read: Sequence[tuple[int, int, T]]) -> None:
        """Keep ``(node id, version, value)`` read from the store; least recently used ones beyond capacity go."""
        if not self.capacity:
            return
        with self._lock:
            entries = self._entries
            get, to_end = entries.get, entries.move_to_end
            for node_id, version, value in read:
                known = get(node_id)
                if known is None:  # a new entry goes last, as the most recently used
                    entries[node_id] = (version, value)
                elif known[0] <= version:  # never replace a newer entry with an older read
                    entries[node_id] = (version, value)
                    to_end(node_id)
            while len(entries) > self.capacity:
                entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def bump_versions(conn: Connection, nodes: Any) -> None:
    """Bump the version of ``nodes`` (a node id, a list of ids, or a ``SELECT`` of node ids): what answers show
    of them changed other than by an ingest naming them, so entries read before are stale in every process."""
    n = tables.nodes.c
    where = n.id == nodes if isinstance(nodes, int) else n.id.in_(nodes)
    conn.execute(update(tables.nodes).where(where).values(version=n.version + 1))
