"""The one read boundary: the store as one request's principal sees it.

Every read of a router goes through a :class:`StoreView`, given by one dependency (:data:`View`) from the request's
store and principal. The view decides the visible namespaces (:func:`.store.read.visibility.visible_namespaces`) once
per request, on the first read, and hands them with each read's connection; routers never compute them. A route
that reads through the view cannot forget to filter: what it is given to filter with is in its hands with the
connection. ``tests/test_consumer_every_route_visibility.py`` holds every GET route to the result, and
``tests/test_consumer_read_boundary.py`` holds the routers to reading through the view.

Example::

    @router.get("/api/v1/things")
    async def things(view: View) -> dict:
        with view.read() as (conn, visible):
            return list_things(conn, visible)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, NamedTuple

from fastapi import Depends
from sqlalchemy import Connection

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
#: A scope every namespace matches: what the store's namespaces are, to compare a principal's with.
_EVERY_NAMESPACE = NamespaceScope(("*",))


class StoreView:
    """The store as a principal limited to ``scope`` (None: unlimited) sees it; see the module."""

    def __init__(self, store: LineageStore, scope: NamespaceScope | None) -> None:
        self.store = store
        self.scope = scope
        self._visible: object = _UNDECIDED

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
        with self.store.read(stop) as conn:
            yield ViewRead(conn, self.visible(conn))

    @contextmanager
    def walking(self, walk: Walk | None) -> Iterator[ViewRead]:
        """A read for a walk run by the walk limiter (:func:`..walk_limits.reading`): the connection the limiter
        can interrupt, with what the principal may see."""
        with reading(self.store, walk) as conn:
            yield ViewRead(conn, self.visible(conn))


def store_view(store: Store, principal: Reader) -> StoreView:
    """The request's view of the store (a FastAPI dependency: :data:`View`)."""
    return StoreView(store, principal.namespaces)


#: The request's view of the store, for a principal with read access.
View = Annotated[StoreView, Depends(store_view)]
