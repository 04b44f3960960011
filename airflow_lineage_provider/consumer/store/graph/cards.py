"""Graph cards: what a graph answer shows of one node, kept in memory and keyed by the node's version.

A card is a node's ``id``, ``type`` and ``data`` (names, ``updatedAt``, a dataset's latest schema, a
job's latest run) and whether it is known only by declaration (``declaredOnly``), as the immutable structs
a graph answer encodes. Everything on it changes only with an event naming the node, and every ingest that
changes it bumps ``lineage_nodes.version`` (:mod:`.node_versions`; an event that changes nothing of a dataset
leaves its card valid); so a card is valid exactly as long as the node's version is the one it was read at,
whichever process wrote since (:mod:`.versioned_cache`). A walk reads the picked nodes' versions
with the walk and the data of the nodes whose card is missing or older (or, when the previous walk found
less than half of its cards here, every node's data along with the walk).

Overlapping graphs (a page and its neighbours, repeated impact queries) then fetch and encode only the
nodes that changed. The cache is per store and bounded (least recently used cards go first). What it is
worth: a repeated depth-10 walk of the benchmark graph in half the time, the first request as without it
(``bench/graph_cards.py``, docs/benchmarks.md).

A dataset known under several names (:mod:`.identity`) is shown as one node whose card is read over all of
its names (:func:`.subgraph.grouped_subgraph`): such cards are kept apart, in :attr:`GraphCards.groups`, keyed
by the shown node's version and the sum of its names' versions (:func:`.subgraph.group_key`) — a new
schema, producer or claim of any name, and any change of the group (which bumps every name's version), gives
a new key — with the ids of those names, so that a walk that reached them all finds the card by the versions
it read, without reading the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from airflow_lineage_provider.consumer.store.graph.versioned_cache import VersionedCache


class GraphCard(msgspec.Struct, frozen=True, gc=False):
    """A node of a graph answer without its edges (``data``: the subgraph module's dataset or job data;
    ``declared_only``: no RunEvent named the node, which changes only with an event naming it)."""

    id: str
    type: str
    data: Any
    declared_only: bool = False


class GroupCards(VersionedCache[tuple[GraphCard, frozenset[int]]]):
    """Cards of datasets shown for their whole group, each with the ids of the names it was read over."""

    def names(self, node: int) -> frozenset[int] | None:
        """The names the kept card of ``node`` was read over (None: no card kept), without touching its
        place in the least-recently-used order."""
        with self._lock:
            entry = self._entries.get(node)
        return None if entry is None else entry[1][1]


class GraphCards(VersionedCache[GraphCard]):
    """At most ``capacity`` cards by node id, each with the node version it was read at (0: no cache)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._last_hits = 0.0  # share of the last walk's nodes found here
        #: Cards of datasets shown for their whole group, by the group key (see the module).
        self.groups = GroupCards(capacity)

    def mostly_hits(self) -> bool:
        """Whether the last walk found at least half of its nodes' cards (never without a cache)."""
        return self.capacity > 0 and self._last_hits >= 0.5

    def store(self, read: Sequence[tuple[int, int, GraphCard]], hits: int) -> None:
        """Keep the ``(node id, version, card)`` a walk read, after ``hits`` cards it found here.

        Called once per walk (with nothing read when every card was found): the share of hits is what
        :meth:`mostly_hits` tells the next walk. The least recently used cards beyond capacity go.
        """
        if not self.capacity:
            return
        self._last_hits = hits / max(hits + len(read), 1)
        self.keep(read)
