"""Declared datasets with templated names, matched to the names runs report (see docs/declared-lineage.md).

A task that declares ``totals_{{ ds_nodash }}`` (a JobEvent, its dataset carrying the
``airflowLineageProvider_templatedName`` facet) and writes ``totals_20260201`` when it runs has one declared
edge to the *pattern* and one observed edge to the *rendering*. They are the same lineage, so:

* the rendering's edge is declared too (its ``declared_at`` is the pattern edge's): it is not "observed, never
  declared" drift, and graph answers flag it declared and observed;
* the pattern's edge is realised by the rendering (``lineage_pattern_renderings``): drift does not list it as
  "declared, never observed" while a rendering's edge of the same job, in the same direction, was observed in
  the window; and a rendering's edge is never "declared, not observed" itself (yesterday's partition is not
  written again today: the pattern stands for the declaration). Graph answers still show the pattern's own
  edge as declared only: no run wrote a dataset of that name.

Matching is by name, in the job's own edges only (a pattern declared by one task is not matched to what another
task writes), in the same direction. The regular expression is derived here from the template itself
(:func:`..name_templates.rendering_regex`: Airflow's date macros as what they render to, any other expression
as any text), never taken from the event — a consumer matches names from anyone, and a regex from an event could
take exponential time. A template with more than :data:`MAX_FREE_PARTS` free parts is not matched.

Done at ingest, in the write transaction: when a RunEvent's batch observes an edge of a job that declared a
pattern edge in that direction, and when a JobEvent declares a pattern edge of a job whose stored observed edges
may render it. Stores that never received a templated name (no :data:`.tables.TEMPLATED_NAMES` setting) skip
all of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, literal, or_, select, union_all, update
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.facets.design_time import TEMPLATED_NAME_KEY
from airflow_lineage_provider.name_templates import MAX_FREE_PARTS, is_templated, rendering_regex

_CHUNK = 500


@dataclass(frozen=True)
class Pattern:
    """How the renderings of one templated dataset name are recognised."""

    name_regex: str
    namespace_regex: str | None


def pattern_of(namespace: str, name: str, facets: Mapping[str, Any]) -> Pattern | None:
    """The pattern a declared dataset stands for: its name (and namespace, when templated) carries Jinja and its
    facets say so (``airflowLineageProvider_templatedName``); ``None`` otherwise, or when the template has too many
    free parts to match safely."""
    if not isinstance(facets.get(TEMPLATED_NAME_KEY), dict) or not is_templated(name):
        return None
    name_regex = rendering_regex(name, MAX_FREE_PARTS)
    namespace_regex = rendering_regex(namespace, MAX_FREE_PARTS) if is_templated(namespace) else None
    if name_regex is None or (is_templated(namespace) and namespace_regex is None):
        return None
    return Pattern(name_regex, namespace_regex)


def write_patterns(conn: Connection, patterns: Mapping[int, Pattern]) -> None:
    """Store the patterns of these dataset nodes (node id → pattern), replacing what was stored."""
    if not patterns:
        return
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    rows = [
        {"node_id": node_id, "name_regex": p.name_regex, "namespace_regex": p.namespace_regex}
        for node_id, p in sorted(patterns.items())
    ]
    statement = insert(tables.name_patterns)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["node_id"],
            set_={"name_regex": statement.excluded.name_regex, "namespace_regex": statement.excluded.namespace_regex},
        ),
        rows,
    )


@dataclass(frozen=True)
class JobEdge:
    """One job↔dataset edge: the job, the dataset, ``input`` or ``output``, and the dataset's names."""

    job_id: int
    dataset_id: int
    direction: str
    namespace: str
    name: str

    @property
    def key(self) -> tuple[int, int]:
        """``(origin_id, destination_id)`` of the edge row."""
        return (self.dataset_id, self.job_id) if self.direction == "input" else (self.job_id, self.dataset_id)


@dataclass(frozen=True)
class _Declared:
    pattern_id: int
    declared_at: datetime
    pattern: Pattern
    namespace: str

    def matches(self, edge: JobEdge) -> bool:
        if self.pattern.namespace_regex is None:
            if edge.namespace != self.namespace:
                return False
        elif _compiled(self.pattern.namespace_regex).match(edge.namespace) is None:
            return False
        return _compiled(self.pattern.name_regex).match(edge.name) is not None


@lru_cache(maxsize=4096)
def _compiled(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.DOTALL)


def _sides() -> tuple[tuple[str, str, str], ...]:
    """``(direction, edge column at the job, edge column at the dataset)``."""
    return (("input", "destination_id", "origin_id"), ("output", "origin_id", "destination_id"))


def _declared_patterns(conn: Connection, job_ids: list[int] | None) -> dict[tuple[int, str], list[_Declared]]:
    """The declared pattern edges of these jobs (None: every job), by (job, direction)."""
    found: dict[tuple[int, str], list[_Declared]] = {}
    chunks: Iterable[list[int] | None] = (
        [None] if job_ids is None else (job_ids[i : i + _CHUNK] for i in range(0, len(job_ids), _CHUNK))
    )
    p, n = tables.name_patterns, tables.nodes
    for chunk in chunks:
        parts = []
        for direction, at_job, at_dataset in _sides():
            e = tables.edges.alias(f"{direction}_edge")
            conditions = [e.c.declared_at.is_not(None)]
            if chunk is not None:
                conditions.append(e.c[at_job].in_(chunk))
            parts.append(
                select(
                    e.c[at_job].label("job_id"),
                    literal(direction).label("direction"),
                    p.c.node_id,
                    e.c.declared_at,
                    p.c.name_regex,
                    p.c.namespace_regex,
                    n.c.namespace,
                )
                .select_from(e.join(p, p.c.node_id == e.c[at_dataset]).join(n, n.c.id == p.c.node_id))
                .where(*conditions)
            )
        for job_id, direction, pattern_id, declared_at, name_regex, ns_regex, namespace in conn.execute(
            union_all(*parts)
        ):
            found.setdefault((job_id, direction), []).append(
                _Declared(pattern_id, declared_at, Pattern(name_regex, ns_regex), namespace)
            )
    return found


def _observed_edges(conn: Connection, job_ids: list[int]) -> list[JobEdge]:
    """Every stored observed edge of these jobs to a dataset that is not itself a pattern."""
    edges = []
    n, p = tables.nodes, tables.name_patterns
    for start in range(0, len(job_ids), _CHUNK):
        chunk = job_ids[start : start + _CHUNK]
        for direction, at_job, at_dataset in _sides():
            e = tables.edges.alias(f"{direction}_observed")
            query = (
                select(e.c[at_job], e.c[at_dataset], n.c.namespace, n.c.name)
                .select_from(e.join(n, n.c.id == e.c[at_dataset]).outerjoin(p, p.c.node_id == n.c.id))
                .where(e.c[at_job].in_(chunk), e.c.observed_at.is_not(None), n.c.kind == "dataset")
                .where(p.c.node_id.is_(None))
            )
            edges += [JobEdge(job, dataset, direction, ns, name) for job, dataset, ns, name in conn.execute(query)]
    return edges


def match(conn: Connection, observed: Iterable[JobEdge], declaring_jobs: Iterable[int]) -> int:
    """Match renderings in the open write transaction: ``observed``, the edges a batch observed, against their
    jobs' declared patterns; and every stored observed edge of ``declaring_jobs`` (jobs whose pattern edges the
    batch declared). Records the renderings and marks their edges declared; how many edges matched."""
    observed = list(observed)
    declaring = sorted(set(declaring_jobs))
    jobs = sorted({edge.job_id for edge in observed} | set(declaring))
    if not jobs:
        return 0
    declared = _declared_patterns(conn, jobs)
    if not declared:
        return 0
    with_patterns = sorted({job for job, _direction in declared})
    candidates = {edge.key: edge for edge in observed if (edge.job_id, edge.direction) in declared}
    rescan = sorted(set(declaring) & set(with_patterns))
    if rescan:
        candidates.update((edge.key, edge) for edge in _observed_edges(conn, rescan))
    return _record(conn, candidates.values(), declared)


def rematch_all(conn: Connection) -> int:
    """Match every job's stored observed edges against every declared pattern (a store upgraded to
    ``lineage_name_patterns``); how many edges matched."""
    declared = _declared_patterns(conn, None)
    if not declared:
        return 0
    jobs = sorted({job for job, _direction in declared})
    return _record(conn, _observed_edges(conn, jobs), declared)


def _record(
    conn: Connection, candidates: Iterable[JobEdge], declared: Mapping[tuple[int, str], list[_Declared]]
) -> int:
    patterns = {d.pattern_id for ds in declared.values() for d in ds}
    renderings: set[tuple[int, int]] = set()
    declared_at: dict[tuple[int, int], datetime] = {}
    for edge in candidates:
        if edge.dataset_id in patterns:
            continue
        for pattern in declared.get((edge.job_id, edge.direction), ()):
            if pattern.matches(edge):
                renderings.add((pattern.pattern_id, edge.dataset_id))
                known = declared_at.get(edge.key)
                if known is None or pattern.declared_at > known:
                    declared_at[edge.key] = pattern.declared_at
    if not renderings:
        return 0
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    conn.execute(
        insert(tables.pattern_renderings).on_conflict_do_nothing(index_elements=["pattern_id", "dataset_id"]),
        [{"pattern_id": p, "dataset_id": d} for p, d in sorted(renderings)],
    )
    e = tables.edges.c
    at = bindparam("b_declared_at", type_=tables.UtcDateTime)
    conn.execute(
        update(tables.edges)
        .where(e.origin_id == bindparam("b_origin"), e.destination_id == bindparam("b_destination"))
        .where(or_(e.declared_at.is_(None), e.declared_at < at))
        .values(declared_at=at),
        [
            {"b_origin": origin, "b_destination": destination, "b_declared_at": when}
            for (origin, destination), when in sorted(declared_at.items())
        ],
    )
    return len(declared_at)


def realised(edge: Any, at_job: str, at_dataset: str, since: datetime) -> Any:
    """SQL: the declared edge ``edge`` (to a pattern) has a rendering whose edge of the same job, in the same
    direction, was observed since ``since``."""
    r = tables.pattern_renderings.alias("rendering")
    rendered = tables.edges.alias("rendered_edge")
    return (
        select(r.c.dataset_id)
        .select_from(r.join(rendered, rendered.c[at_dataset] == r.c.dataset_id))
        .where(
            and_(
                r.c.pattern_id == edge.c[at_dataset],
                rendered.c[at_job] == edge.c[at_job],
                rendered.c.observed_at >= since,
            )
        )
        .exists()
    )


def rendering(edge: Any, at_job: str, at_dataset: str) -> Any:
    """SQL: the edge ``edge`` goes to a rendering of a pattern its job declared an edge to, in the same direction
    (it is declared through the pattern: one run's partition, not a declaration of its own)."""
    r = tables.pattern_renderings.alias("rendered")
    pattern_edge = tables.edges.alias("pattern_edge")
    return (
        select(r.c.pattern_id)
        .select_from(r.join(pattern_edge, pattern_edge.c[at_dataset] == r.c.pattern_id))
        .where(
            and_(
                r.c.dataset_id == edge.c[at_dataset],
                pattern_edge.c[at_job] == edge.c[at_job],
                pattern_edge.c.declared_at.is_not(None),
            )
        )
        .exists()
    )
