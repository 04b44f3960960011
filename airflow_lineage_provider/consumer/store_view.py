"""The one read boundary: the store as one request's principal sees it.

Every read of a router goes through a :class:`StoreView`, given by one dependency (:data:`View`) from the request's
store and principal. The view decides the visible namespaces (:func:`.store.read.visibility.visible_namespaces`) once
per request, on the first read, and hands them with each read's connection; routers never compute them. A route
that reads through the view cannot forget to filter: what it is given to filter with is in its hands with the
connection. ``tests/test_consumer_every_route_visibility.py`` holds every GET route to the result, and
``tests/test_consumer_read_boundary.py`` holds the routers to reading through the view.

A read never fails for deferred apply being behind (a bulk load, a backlog replayed after an outage): past its
wait it answers from what is applied, and the answer carries ``Lineage-Pending-Events``, about how many events
logged before the read were not applied yet (:class:`PendingHeader`; :meth:`.DeferredApply.wait_applied`). Behind
more than a few events, a read waits only for those its own principal posted: a sender reads its writes, and a
reader is not held up by another sender's bulk load.

Example::

    @router.get("/api/v1/things")
    async def things(view: View) -> dict:
        with view.read() as (conn, visible):
            return list_things(conn, visible)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Annotated, NamedTuple

from fastapi import Depends, Request
from sqlalchemy import Connection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from airflow_lineage_provider.consumer.deps import Store
from airflow_lineage_provider.consumer.limits.walk_limits import Walk, reading
from airflow_lineage_provider.consumer.security.access import NamespaceScope
from airflow_lineage_provider.consumer.security.auth import Reader
from airflow_lineage_provider.consumer.store import LineageStore
from airflow_lineage_provider.consumer.store.read.visibility import Visible, visible_namespaces


class ViewRead(NamedTuple):
    """One read through the view: the connection (in a read transaction) and the namespaces visible (None: all)."""

    conn: Connection
    visible: Visible


_UNDECIDED = object()
#: The key of the request's ASGI state under which its reads note how many events they are behind.
PENDING_STATE = "lineage_pending_events"
#: The answer's header saying about how many events logged before the request its reads did not see.
PENDING_HEADER = "Lineage-Pending-Events"
#: A scope every namespace matches: what the store's namespaces are, to compare a principal's with.
_EVERY_NAMESPACE = NamespaceScope(("*",))


class StoreView:
    """The store as a principal limited to ``scope`` (None: unlimited) sees it; see the module."""

    def __init__(
        self,
        store: LineageStore,
        scope: NamespaceScope | None,
        state: dict[str, object] | None = None,
        reader: str | None = None,
    ) -> None:
        self.store = store
        self.scope = scope
        #: Whom the reads are for (:attr:`.Principal.log_name`): behind a bulk load they wait only for its events.
        self.reader = reader
        #: The request's ASGI state, where a read behind deferred apply notes how far (:class:`PendingHeader`);
        #: None: a walk's (:meth:`walking`), or nowhere.
        self.state = state
        self._visible: object = _UNDECIDED

    def _noting(self, walk: Walk | None = None) -> Callable[[int], None]:
        """What a read calls when it is behind deferred apply: noting it in the request's state (or the walk's)."""
        state = self.state if self.state is not None else walk.state if walk is not None else {}
        return partial(_note_behind, state)

    def visible(self, conn: Connection) -> Visible:
        """The visible namespaces, decided on ``conn`` the first time and kept for the request."""
        if self._visible is _UNDECIDED:
            self._visible = visible_namespaces(conn, self.scope)
        return self._visible  # type: ignore[return-value]

    def sees_every_namespace(self, conn: Connection) -> bool:
        """Whether the principal sees every namespace of the store (a limited key whose patterns match them all
        does)."""
        if self.scope is None:
            return True
        visible = self.visible(conn)
        return visible is None or len(visible) >= len(visible_namespaces(conn, _EVERY_NAMESPACE) or ())

    @contextmanager
    def read(self, stop: Callable[[], None] | None = None) -> Iterator[ViewRead]:
        """A read transaction (:meth:`.LineageStore.read`) with what the principal may see."""
        with self.store.read(stop, behind=self._noting(), reader=self.reader) as conn:
            yield ViewRead(conn, self.visible(conn))

    @contextmanager
    def walking(self, walk: Walk | None) -> Iterator[ViewRead]:
        """A read for a walk run by the walk limiter (:func:`..walk_limits.reading`): the connection the limiter
        can interrupt, with what the principal may see."""
        with reading(self.store, walk, behind=self._noting(walk), reader=self.reader) as conn:
            yield ViewRead(conn, self.visible(conn))


def _note_behind(state: dict[str, object], events: int) -> None:
    noted = state.get(PENDING_STATE)
    state[PENDING_STATE] = max(events, noted if isinstance(noted, int) else 0)


def store_view(store: Store, principal: Reader, request: Request) -> StoreView:
    """The request's view of the store (a FastAPI dependency: :data:`View`)."""
    return StoreView(store, principal.namespaces, request.scope.setdefault("state", {}), principal.log_name)


#: The request's view of the store, for a principal with read access.
View = Annotated[StoreView, Depends(store_view)]


class PendingHeader:
    """ASGI middleware: an answer whose reads were behind deferred apply carries :data:`PENDING_HEADER` (and an
    ``Access-Control-Expose-Headers`` naming it is left to the deployment's CORS set-up)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def send_noting(message: Message) -> None:
            pending = state.get(PENDING_STATE)
            if message["type"] == "http.response.start" and isinstance(pending, int) and pending > 0:
                message["headers"] = [*message.get("headers", ()), (PENDING_HEADER.lower().encode(), b"%d" % pending)]
            await send(message)

        await self.app(scope, receive, send_noting)
