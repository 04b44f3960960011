"""Renderings of a templated name drawn as one node: the pattern's (see docs/declared-lineage.md#templated-names).

A task declaring ``orders_{{ ds_nodash }}`` writes ``orders_20260201``, ``orders_20260202``, ... — a year of
daily runs is 365 datasets around one task. Graph answers draw them *collapsed* by default: each rendering
(:data:`.tables.pattern_renderings`) is shown as its pattern's node, every edge to or from it drawn to or from
the pattern, once, and the pattern's ``data`` carries :class:`Renderings` (how many, the latest, whether they are
expanded). A pattern asked to be *expanded* has its renderings drawn as themselves. The walk itself runs as
always over the stored nodes; the collapse maps rendering ids onto pattern ids after it, as the answers map a
dataset's names onto the one they show (:func:`.subgraph.grouped_subgraph`).

Rules, each applied here once:

* a rendering of two patterns is shown as the one with the lowest node id (both patterns' counts include it);
* the node a walk is rooted at is shown as itself, even a rendering (the caller asked for that name);
* a walk rooted at a pattern starts from the pattern and its renderings (:func:`rendering_roots`): what they
  feed is downstream of it;
* for a key limited to namespaces (:mod:`.visibility`) a rendering is collapsed only into a visible pattern, and
  ``count`` and ``latest`` read visible renderings only: a hidden rendering's name never shows.

Templated names come only with JobEvents: a store without declared lineage (which graph answers probe for
anyway, :func:`.graph.walk_probe`) pays nothing, and one with declared lineage but no templated name (no
:data:`.tables.TEMPLATED_NAMES` setting) one index probe (:func:`has_patterns`); either walks with the statements
it always did.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from sqlalchemy import Connection, Select, exists, func, literal, null, select
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.read.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.name_templates import is_templated

#: How a graph answer draws renderings: as their pattern's node (``collapsed``) or as themselves (``expanded``).
Shown = Literal["collapsed", "expanded"]


class LatestRendering(msgspec.Struct):
    """The most recently updated rendering of a pattern."""

    name: str
    namespace: str
    updatedAt: str


class Renderings(msgspec.Struct, omit_defaults=True):
    """What a pattern node's ``data.renderings`` says: how many (visible) datasets render it, the latest one (left
    out without any), and whether they are drawn as themselves in this answer."""

    count: int
    expanded: bool = False
    latest: LatestRendering | None = None


@dataclass(frozen=True)
class Collapse:
    """How one graph answer draws renderings: every pattern collapsed except ``expanded`` (pattern node ids), the
    node ``kept`` (the walk's root) shown as itself, for a key seeing ``visible`` namespaces (None: all)."""

    expanded: frozenset[int] | None = frozenset()
    """Patterns whose renderings are drawn as themselves; None: every pattern's."""
    kept: int | None = None
    visible: Visible = None

    def collapses(self, pattern: int) -> bool:
        """Whether the renderings of ``pattern`` are drawn as its node."""
        return self.expanded is not None and pattern not in self.expanded


def _has_patterns() -> ColumnElement[bool]:
    s = tables.store_settings.c
    return exists(select(s.name).where(s.name == tables.TEMPLATED_NAMES))


def _visible_rendering(rendering_id: Any, visible: Visible, dialect: str) -> tuple[Any, list[ColumnElement[bool]]]:
    """What to read pattern-rendering rows from, and the conditions keeping those whose rendering
    (``rendering_id``) is in a ``visible`` namespace."""
    r = tables.pattern_renderings
    if visible is None:
        return r, []
    n = tables.nodes.alias("rendering_node")
    return r.join(n, n.c.id == rendering_id), [namespace_in(n.c.namespace, visible, dialect)]


def rendering_roots(conn: Connection, root: int, visible: Visible) -> list[int]:
    """The (visible) renderings of the pattern ``root``: where a walk from it starts besides itself. Asked only for
    a root whose name or namespace is templated (:func:`may_be_pattern`): other walks pay no statement."""
    r = tables.pattern_renderings.c
    joined, conditions = _visible_rendering(r.dataset_id, visible, conn.dialect.name)
    query = select(r.dataset_id).select_from(joined).where(r.pattern_id == root, *conditions)
    return sorted(conn.execute(query).scalars())


def may_be_pattern(namespace: str, name: str) -> bool:
    """Whether a dataset so named can be a pattern (only templated declared names are, see
    :func:`.templated_names.pattern_of`)."""
    return is_templated(name) or is_templated(namespace)


def walk_parts(picked: Any, width: int, visible: Visible, dialect: str) -> tuple[Select[Any], Select[Any]]:
    """Rows ``('r', pattern, rendering, NULL...)`` (``width`` columns) for the walk's statement (``picked``: its
    CTE of node ids): each picked node that renders a visible pattern, with the pattern; and ``('r', pattern,
    NULL, ...)`` for each picked pattern. Added only for a store holding templated names (:func:`has_patterns`)."""
    r, p = tables.pattern_renderings.c, tables.name_patterns.c
    padding = [null() for _ in range(width - 3)]
    rendered = select(literal("r"), r.pattern_id, r.dataset_id, *padding).join_from(
        picked, tables.pattern_renderings, r.dataset_id == picked.c.node_id
    )
    patterns = select(literal("r"), p.node_id, null(), *padding).join_from(
        picked, tables.name_patterns, p.node_id == picked.c.node_id
    )
    if visible is not None:
        pattern = tables.nodes.alias("rendered_pattern")
        shown = namespace_in(pattern.c.namespace, visible, dialect)
        rendered = rendered.join(pattern, pattern.c.id == r.pattern_id).where(shown)
        patterns = patterns.join(pattern, pattern.c.id == p.node_id).where(shown)
    return rendered, patterns


def lowest_patterns(rows: Iterable[Any]) -> tuple[dict[int, int], set[int]]:
    """From the ``r`` rows of :func:`walk_parts`: ``rendering → its lowest pattern`` and the picked patterns."""
    of: dict[int, int] = {}
    picked: set[int] = set()
    for row in rows:
        pattern, rendering = row[1], row[2]
        if rendering is None:
            picked.add(pattern)
        elif rendering not in of or pattern < of[rendering]:
            of[rendering] = pattern
    return of, picked


def summaries(
    conn: Connection, patterns: Collection[int], visible: Visible, expanded: frozenset[int] | None
) -> dict[int, Renderings]:
    """``pattern → Renderings`` (over the visible renderings) of these patterns, in one statement."""
    if not patterns:
        return {}
    dialect = conn.dialect.name
    counted = tables.pattern_renderings.alias("counted")
    totals = select(counted.c.pattern_id, func.count().label("count")).where(counted.c.pattern_id.in_(sorted(patterns)))
    if visible is not None:
        named = tables.nodes.alias("counted_node")
        totals = totals.join_from(counted, named, named.c.id == counted.c.dataset_id)
        totals = totals.where(namespace_in(named.c.namespace, visible, dialect))
    counts = totals.group_by(counted.c.pattern_id).cte("totals")
    # Each pattern's newest rendering, by a top-1 per pattern (ties: the last by namespace and name).
    r, n = tables.pattern_renderings.alias("newest"), tables.nodes.alias("newest_node")
    newest = select(n.c.id).join_from(r, n, n.c.id == r.c.dataset_id).where(r.c.pattern_id == counts.c.pattern_id)
    if visible is not None:
        newest = newest.where(namespace_in(n.c.namespace, visible, dialect))
    newest = newest.order_by(n.c.updated_at.desc(), n.c.namespace.desc(), n.c.name.desc()).limit(1)
    shown = tables.nodes.c
    latest = select(counts.c.pattern_id, counts.c.count, shown.namespace, shown.name, iso_utc(shown.updated_at))
    latest = latest.join_from(counts, tables.nodes, shown.id == newest.correlate(counts).scalar_subquery())
    found = {
        pattern: Renderings(count, False, LatestRendering(name, namespace, updated))
        for pattern, count, namespace, name, updated in conn.execute(latest)
    }
    every = expanded is None
    return {
        pattern: Renderings(
            found[pattern].count if pattern in found else 0,
            every or (expanded is not None and pattern in expanded),
            found[pattern].latest if pattern in found else None,
        )
        for pattern in patterns
    }


def pattern_data(data: Any, renderings: Renderings) -> dict[str, Any]:
    """A pattern node's ``data``: its card's (never changed: cards are shared) with ``renderings``."""
    shown = msgspec.structs.asdict(data) if isinstance(data, msgspec.Struct) else dict(data)
    shown["renderings"] = renderings
    return shown


def not_a_rendering(node_id: Any, visible: Visible, dialect: str) -> ColumnElement[bool]:
    """SQL: the dataset ``node_id`` renders no (visible) pattern — what listings keep with ``renderings=collapsed``."""
    r = tables.pattern_renderings.c
    query = select(r.pattern_id).where(r.dataset_id == node_id)
    if visible is not None:
        pattern = tables.nodes.alias("listed_pattern")
        query = query.join_from(tables.pattern_renderings, pattern, pattern.c.id == r.pattern_id)
        query = query.where(namespace_in(pattern.c.namespace, visible, dialect))
    return ~query.exists()


def has_patterns(conn: Connection) -> bool:
    """Whether the store holds templated names (one probe of :data:`.tables.TEMPLATED_NAMES`)."""
    return bool(conn.execute(select(_has_patterns())).scalar())


def rendered_patterns(conn: Connection, renderings: Collection[int], visible: Visible) -> dict[int, int]:
    """``rendering → its lowest visible pattern`` of these datasets (those rendering none left out)."""
    if not renderings:
        return {}
    r = tables.pattern_renderings.c
    query = select(r.dataset_id, func.min(r.pattern_id)).where(r.dataset_id.in_(sorted(renderings)))
    if visible is not None:
        pattern = tables.nodes.alias("shown_pattern")
        query = query.join_from(tables.pattern_renderings, pattern, pattern.c.id == r.pattern_id)
        query = query.where(namespace_in(pattern.c.namespace, visible, conn.dialect.name))
    return dict(conn.execute(query.group_by(r.dataset_id)).all())


def renderings_of(conn: Connection, patterns: Collection[int], visible: Visible) -> dict[int, int]:
    """``rendering → pattern`` for the (visible) renderings of these patterns whose lowest visible pattern it is."""
    if not patterns:
        return {}
    r = tables.pattern_renderings.c
    joined, conditions = _visible_rendering(r.dataset_id, visible, conn.dialect.name)
    query = select(r.dataset_id).select_from(joined).where(r.pattern_id.in_(sorted(patterns)), *conditions)
    found = [row[0] for row in conn.execute(query.distinct())]
    lowest = rendered_patterns(conn, found, visible)
    return {rendering: pattern for rendering, pattern in lowest.items() if pattern in patterns}


def collapsed_edges(
    edges: Iterable[tuple[int, int, int]], of: Mapping[int, int], patterns: Collection[int]
) -> list[tuple[int, int, int]]:
    """``(origin, destination, flags)`` edges with every end in ``of`` drawn to its pattern (one of ``patterns``),
    each once, with the flags of any of the stored edges it is drawn for (bits OR-ed)."""
    if not of:
        return list(edges)
    kept: list[tuple[int, int, int]] = []
    drawn: dict[tuple[int, int], int] = {}  # edges at a pattern: several stored edges may be drawn as one
    for origin, destination, flags in edges:
        if origin in of or destination in of or origin in patterns or destination in patterns:
            ends = (of.get(origin, origin), of.get(destination, destination))
            drawn[ends] = drawn.get(ends, 0) | flags
        else:
            kept.append((origin, destination, flags))
    return kept + [(origin, destination, flags) for (origin, destination), flags in drawn.items()]


def patterns_among(conn: Connection, ids: Collection[int]) -> set[int]:
    """Which of these nodes are patterns (templated declared names)."""
    if not ids:
        return set()
    p = tables.name_patterns.c
    return set(conn.execute(select(p.node_id).where(p.node_id.in_(sorted(ids)))).scalars())
