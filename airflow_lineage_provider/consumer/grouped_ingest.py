"""Grouped commits: ingest requests that arrive together are written in one transaction.

The stock HTTP transport sends one event per request, and eight Airflow workers send eight at once. Written a
transaction each, they queue for the store's write lock and pay a commit each (a WAL flush on PostgreSQL);
written together, they pay one. So the first request that finds no group being written *leads*: it takes every
request waiting (up to :data:`MAX_GROUP_EVENTS` events, at least one request), writes their events in one
transaction, and marks each request answered once that transaction has committed. Requests that arrive
meanwhile wait, and the first of them not yet written leads the next group. Nobody waits on a timer: a request
that finds the store idle is written at once, alone.

The guarantees of a request written alone hold:

* an answer of success means committed: no request is marked answered before the commit of its group returns;
* one bad event fails only its own request: a group the database refuses (a value it will not keep) is written
  again request by request, each as :func:`.service.store_events` writes it (then event by event);
* a failure of the store itself (unreachable, locked past the busy timeout) fails every request of the group
  with :class:`.StoreUnavailable` (503, the sender retries): none was answered as stored, so a server killed
  while a group is written loses nothing a sender was told is stored.

Each event is counted stored for the first request of its group that holds it and duplicate for any other, as
a batch counts an event it holds twice.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError

from airflow_lineage_provider.consumer.service import StoreUnavailable, store_events, write_events
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.ingest import IngestResult
from airflow_lineage_provider.consumer.validation import LineageEvent

#: Most events one grouped transaction takes from waiting requests (a request larger than this is written
#: alone): the size of a batch the ingest writes fastest per event, and a bound on a group's transaction.
MAX_GROUP_EVENTS = 500


@dataclass(eq=False)
class _Request:
    """One request's events and, once its group was written, what came of them."""

    events: list[LineageEvent]
    done: bool = False
    result: IngestResult = field(default_factory=IngestResult)
    errors: dict[int, str] = field(default_factory=dict)
    failure: BaseException | None = None


@dataclass
class GroupStatistics:
    """How the grouping went since the server started (for logs and tests)."""

    groups: int = 0
    requests: int = 0
    events: int = 0
    #: Requests in the largest group written.
    largest: int = 0


class GroupedIngest:
    """Writes ingest requests to ``store``, grouping those that arrive together (see the module)."""

    def __init__(self, store: LineageStore, max_group_events: int = MAX_GROUP_EVENTS) -> None:
        self.store = store
        self.max_group_events = max_group_events
        self.statistics = GroupStatistics()
        self._pending: deque[_Request] = deque()
        self._writing = False
        self._changed = threading.Condition()

    @property
    def waiting(self) -> int:
        """Requests waiting for a group (not the one being written)."""
        with self._changed:
            return len(self._pending)

    def ingest(self, events: Sequence[LineageEvent]) -> tuple[IngestResult, dict[int, str]]:
        """Store ``events`` (one request's) as :func:`.service.store_events` does, in a group with the requests
        that wait at the same time; blocks until they are committed. Raises :class:`.StoreUnavailable`."""
        request = _Request(list(events))
        with self._changed:
            self._pending.append(request)
        while True:
            with self._changed:
                while self._writing and not request.done:
                    self._changed.wait()
                if request.done:
                    break
                self._writing = True
                group = self._take()
            try:
                self._write(group)
            finally:
                with self._changed:
                    for member in group:
                        member.done = True
                    self._writing = False
                    self._changed.notify_all()
        if request.failure is not None:
            raise request.failure
        return request.result, request.errors

    def _take(self) -> list[_Request]:
        """The next group: waiting requests in arrival order, up to :attr:`max_group_events` events."""
        group = [self._pending.popleft()]
        total = len(group[0].events)
        while self._pending and total + len(self._pending[0].events) <= self.max_group_events:
            total += len(self._pending[0].events)
            group.append(self._pending.popleft())
        stats = self.statistics
        stats.groups, stats.requests, stats.events = stats.groups + 1, stats.requests + len(group), stats.events + total
        stats.largest = max(stats.largest, len(group))
        return group

    def _write(self, group: list[_Request]) -> None:
        if len(group) == 1:
            self._write_alone(group[0])
            return
        try:
            result = write_events(self.store, [event for member in group for event in member.events])
        except StoreUnavailable as error:
            for member in group:
                member.failure = error
            return
        except SQLAlchemyError:  # a value the database refuses: find whose, request by request
            for member in group:
                self._write_alone(member)
            return
        except BaseException as error:  # never leave a request of the group waiting, whatever went wrong
            for member in group:
                member.failure = error
            raise
        claimed: set[str] = set()
        for member in group:
            for event in member.events:
                if event.key in result.inserted and event.key not in claimed:
                    claimed.add(event.key)
                    member.result.stored += 1
                else:
                    member.result.duplicates += 1

    def _write_alone(self, request: _Request) -> None:
        try:
            request.result, request.errors = store_events(self.store, request.events)
        except BaseException as error:
            request.failure = error
            if not isinstance(error, Exception):
                raise
