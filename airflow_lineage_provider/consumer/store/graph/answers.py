"""Whole graph answers kept in memory, keyed by the store's data version: a repeated walk of an unchanged store.

A graph answer (the JSON bytes of ``GET /api/v1/lineage``) is a function of the request's parameters, the
principal's namespace scope and the data of the store. While nothing is committed to the store, the same request
gets the same bytes: a user reloading a page, a dashboard polling a graph. This cache keeps recent answers with the
data version they were built at and gives one back while the store is still at that version, without reading the
graph again.

The version must change with every commit of any connection of any process. On a SQLite file it is ``PRAGMA
data_version`` of a connection kept for that alone, which never writes: SQLite changes the value it reports
whenever another connection commits to the file. The version is read before the answer's read transaction begins,
so an answer is never newer than its version says: if a commit lands between the two, the answer (built from data
at least that new) is kept under a version that no later read sees again, and is never served.

Where no such version exists the cache is off and every answer is built from the store (see :func:`answers_of`):

* PostgreSQL: nothing that one database's commits, and only they, move. A transaction's snapshot moves with every
  writing transaction of the whole cluster (an Airflow metadata database beside the store writes several times a
  second), so answers keyed by it would almost never be served; a version bumped by the store's own writes would be
  a table of its own, which the store does not have;
* an in-memory SQLite store (no second connection sees it), a ``file:`` URI;
* a store whose events are applied after the answer (deferred apply), whose reads may be behind and say so;
* a store with the graph cards off (``graph_cache_nodes`` 0): what caches graph answers is off.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_lineage_provider.consumer.store import LineageStore

#: Bytes of answers one store keeps (the least recently used go first); an answer larger than a quarter of it is
#: not kept.
ANSWER_CACHE_BYTES = 64 * 1024 * 1024


class SqliteDataVersion:
    """``PRAGMA data_version`` of a SQLite file, read on a read-only connection of its own (see the module)."""

    def __init__(self, path: str) -> None:
        uri = f"{Path(path).resolve().as_uri()}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()

    def __call__(self) -> int | None:
        """The current data version: any other connection's commit to the file changes it (None: it could not be
        read, the file gone or unreadable; the answer is then built and not kept)."""
        with self._lock:
            try:
                row = self._conn.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error:
                return None
        return int(row[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()


class GraphAnswers:
    """At most ``capacity`` bytes of answers by request key, each with the data version it was built at."""

    def __init__(self, version: Callable[[], int | None], capacity: int = ANSWER_CACHE_BYTES) -> None:
        #: The store's current data version (read before the answer's read transaction begins).
        self.version = version
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, tuple[int, bytes]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, version: int | None) -> bytes | None:
        """The answer to ``key`` built at ``version``, or None (none kept, or built at another version)."""
        if version is None:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def keep(self, key: Hashable, version: int | None, body: bytes) -> None:
        """Keep the answer to ``key`` built at ``version`` (its version read before its read began; None: not
        known, nothing kept); the least recently used answers beyond the capacity go."""
        if version is None or len(body) > self.capacity // 4:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held -= len(old[1])
            self._entries[key] = (version, body)
            self._held += len(body)
            while self._held > self.capacity:
                _key, (_version, dropped) = self._entries.popitem(last=False)
                self._held -= len(dropped)

    @property
    def held_bytes(self) -> int:
        """Bytes of the answers kept."""
        return self._held

    def __len__(self) -> int:
        return len(self._entries)


_OFF = object()
#: Each store's answers (or ``_OFF``), for as long as the store lives.
_of_store: weakref.WeakKeyDictionary[LineageStore, GraphAnswers | object] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def answers_of(store: LineageStore) -> GraphAnswers | None:
    """The store's graph answers, or None where the cache is off (see the module)."""
    found = _of_store.get(store)
    if found is None:
        with _lock:
            found = _of_store.get(store)
            if found is None:
                found = _of_store[store] = _made_for(store)
    return found if isinstance(found, GraphAnswers) else None


def _made_for(store: LineageStore) -> GraphAnswers | object:
    if store.graph_cards.capacity <= 0 or store.deferred is not None:
        return _OFF
    url = store.engine.url
    path = url.database
    if url.get_backend_name() != "sqlite" or not path or path == ":memory:" or path.startswith("file:") or url.query:
        return _OFF
    try:
        version = SqliteDataVersion(path)
    except sqlite3.Error:
        return _OFF
    if version() is None:  # a file this process cannot read that way
        version.close()
        return _OFF
    answers = GraphAnswers(version)
    weakref.finalize(answers, version.close)
    return answers
