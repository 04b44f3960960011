"""``GET /api/v1/datasets/conflicts``: names that several datasets claim, which therefore link none of them.

A dataset claims a name through its ``symlinks`` facet or its ``dataSource`` facet (docs/identity.md). When
datasets that are not otherwise the same claim one name — two storage locations naming one metastore table,
say — the store makes no guess: the name joins none of them to anything (:func:`...store.graph.identity.conflicts`).
This lists those names, by namespace and name, each with every dataset claiming it (``via`` ``symlink`` or
``dataSource``, and the producer that said it); ``totalCount`` counts names. The datasets also carry each such
name in ``aliasConflicts`` in ``GET /api/v1/datasets``.

A key limited to namespace patterns sees a conflict only when the name's namespace and at least two of the
datasets claiming it (not the same dataset) are visible, and only the visible ones among them: it learns no
name, nor the existence of a dataset, in a namespace it cannot see.
"""

from __future__ import annotations

import sys
from typing import Any

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field
from sqlalchemy import Connection

from airflow_lineage_provider.consumer.deps import Limit, Offset, stored_answer
from airflow_lineage_provider.consumer.limits.query_names import KnownQuery
from airflow_lineage_provider.consumer.security.access import Access
from airflow_lineage_provider.consumer.security.auth import requires
from airflow_lineage_provider.consumer.store.graph import identity
from airflow_lineage_provider.consumer.store.read.visibility import Visible
from airflow_lineage_provider.consumer.store_view import View

router = APIRouter(tags=["datasets"], dependencies=[Depends(requires(Access.READ))])


class Claimant(BaseModel):
    """A dataset claiming the name, how, and the producer whose event said it first."""

    namespace: str
    name: str
    via: str = Field(description="symlink (a symlinks facet identifier) or dataSource (the dataSource facet's URI).")
    producer: str | None


class AliasConflict(BaseModel):
    """A name claimed by datasets that are not otherwise the same: it links none of them."""

    namespace: str
    name: str
    claimants: list[Claimant]


class AliasConflicts(BaseModel):
    conflicts: list[AliasConflict]
    totalCount: int = Field(description="Names in conflict (every page's).")


def _answer(conflict: identity.Conflict, claimants: list[tuple[str, str, str, str | None]]) -> dict[str, Any]:
    return {
        "namespace": conflict.namespace,
        "name": conflict.name,
        "claimants": [
            {"namespace": namespace, "name": name, "via": via, "producer": producer}
            for namespace, name, via, producer in claimants
        ],
    }


def conflicts(conn: Connection, limit: int, offset: int, visible: Visible) -> tuple[list[dict[str, Any]], int]:
    """A page of the conflicts a key seeing ``visible`` (None: every namespace) may see, and how many."""
    if visible is None:
        page, total = identity.conflicts(conn, limit, offset)
        return [_answer(conflict, list(conflict.claimants)) for conflict in page], total
    shown, aliases = frozenset(visible), identity.stored_namespace_aliases(conn)
    every, _ = identity.conflicts(conn, sys.maxsize, 0)
    seen = []
    for conflict in every:
        claimants = [claimant for claimant in conflict.claimants if claimant[0] in shown]
        identities = {(aliases.get(namespace, namespace), name) for namespace, name, _, _ in claimants}
        if conflict.namespace in shown and len(identities) > 1:
            seen.append(_answer(conflict, claimants))
    return seen[offset : offset + limit], len(seen)


@router.get(
    "/api/v1/datasets/conflicts",
    dependencies=[KnownQuery],
    response_model=AliasConflicts,
    summary="Names several datasets claim (symlinks, dataSource), which link none of them",
)
async def get_conflicts(view: View, limit: Limit = 100, offset: Offset = 0) -> Response:
    def run() -> dict:
        with view.read() as (conn, visible):
            items, total = conflicts(conn, limit, offset, visible)
        return {"conflicts": items, "totalCount": total}

    return await stored_answer(run)
