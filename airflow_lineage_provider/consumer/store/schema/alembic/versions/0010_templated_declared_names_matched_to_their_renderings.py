"""Version 10: templated declared names matched to their renderings."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, NamedTuple

from alembic import op
from sqlalchemy import Connection, text

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _templated_names(op.get_bind())


_TEMPLATED_NAME_TABLES = """
CREATE TABLE lineage_name_patterns (
    node_id {bigint} NOT NULL PRIMARY KEY, name_regex TEXT NOT NULL, namespace_regex TEXT
);
CREATE TABLE lineage_pattern_renderings (
    pattern_id {bigint} NOT NULL, dataset_id {bigint} NOT NULL, PRIMARY KEY (pattern_id, dataset_id)
);
CREATE INDEX ix_lineage_pattern_renderings_dataset ON lineage_pattern_renderings (dataset_id, pattern_id)
"""

#: Version 9's declared datasets whose facets may say their name is a template, a page at a time.
_V9_TEMPLATED_DATASETS = (
    "SELECT n.id, n.namespace, n.name, d.facets FROM lineage_nodes n JOIN lineage_datasets d ON d.node_id = n.id"
    " WHERE n.declared_at IS NOT NULL AND d.facets LIKE '%airflowLineageProvider_templatedName%' AND n.id > :after"
    " ORDER BY n.id LIMIT 1000"
)


def _templated_names(conn: Connection) -> None:
    """Version 10: declared templated names (``totals_{{ ds_nodash }}``) matched to their renderings. The patterns
    are read from the stored facets of declared datasets, then every job's observed edges are matched against
    them: a rendering's edge (same job, same direction, a name the pattern's regular expression matches) is
    recorded as the pattern's rendering and declared at the pattern edge's time."""
    bigint = "BIGINT" if conn.dialect.name == "postgresql" else "INTEGER"
    for ddl in _TEMPLATED_NAME_TABLES.format(bigint=bigint).split(";"):
        conn.exec_driver_sql(ddl)
    after, found = -1, {}
    while rows := conn.execute(text(_V9_TEMPLATED_DATASETS), {"after": after}).all():
        after = rows[-1][0]
        for node_id, namespace, name, facets in rows:
            pattern = _pattern_of(namespace, name, json.loads(facets))
            if pattern is not None:
                found[node_id] = pattern
    if found:
        conn.execute(
            text("INSERT INTO lineage_name_patterns (node_id, name_regex, namespace_regex) VALUES (:id, :name, :ns)"),
            [{"id": node, "name": p.name_regex, "ns": p.namespace_regex} for node, p in sorted(found.items())],
        )
        conn.execute(text("DELETE FROM lineage_store_settings WHERE name = 'templated_names'"))
        conn.execute(text("INSERT INTO lineage_store_settings (name, value) VALUES ('templated_names', '1')"))
        _match_renderings(conn)


#: The facet by which a declared dataset says its name is a template.
_TEMPLATED_NAME_KEY = "airflowLineageProvider_templatedName"
#: Jinja's delimiters: any template, expressions, statements and comments.
_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_STATEMENT = re.compile(r"\{%.*?%\}", re.DOTALL)
_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)
#: What Airflow's date macros render as; any other expression renders as any text (a free part).
_MACRO_FORMATS = {
    "ds": r"\d{4}-\d{2}-\d{2}",
    "ds_nodash": r"\d{8}",
    "ts_nodash": r"\d{8}T\d{6}",
    "ts_nodash_with_tz": r"\d{8}T\d{6}[+-]\d{4}",
    "ts": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?[+-]\d{2}:\d{2}",
    "ti.map_index": r"-?\d+",
}
#: Most free parts a pattern may hold: a template with more is not matched.
_MAX_FREE_PARTS = 2
_CHUNK = 500


class _Pattern(NamedTuple):
    name_regex: str
    namespace_regex: str | None


class _Declared(NamedTuple):
    """A declared edge of a job to a pattern."""

    pattern_id: int
    declared_at: datetime
    pattern: _Pattern
    namespace: str


class _JobEdge(NamedTuple):
    """An observed edge of a job to a dataset: ``input`` or ``output``, and the dataset's names."""

    job_id: int
    dataset_id: int
    direction: str
    namespace: str
    name: str


def _is_templated(text_: str | None) -> bool:
    return bool(text_) and _TEMPLATE.search(text_ or "") is not None


def _rendering_regex(text_: str) -> str | None:
    """The anchored regular expression the renderings of ``text_`` match: date macros as what they render to,
    other expressions as any text, comments as nothing, statements (first to last) as any text; None with more
    than :data:`_MAX_FREE_PARTS` free parts."""
    text_ = _COMMENT.sub("", text_)
    statements = list(_STATEMENT.finditer(text_))
    if statements:
        head, tail = text_[: statements[0].start()], text_[statements[-1].end() :]
        parts = [*_rendering_parts(head), "(.*)", *_rendering_parts(tail)]
    else:
        parts = _rendering_parts(text_)
    if parts.count("(.*)") > _MAX_FREE_PARTS:
        return None
    return "^" + "".join(parts) + "$"


def _rendering_parts(text_: str) -> list[str]:
    parts = []
    for index, part in enumerate(re.split(r"(\{\{.*?\}\})", text_, flags=re.DOTALL)):
        if index % 2 == 0:
            parts.append(re.escape(part))
            continue
        macro = _MACRO_FORMATS.get(part[2:-2].strip())
        parts.append(f"({macro})" if macro is not None else "(.*)")
    return parts


def _pattern_of(namespace: str, name: str, facets: Any) -> _Pattern | None:
    """The pattern of a declared dataset whose name (and namespace, when templated) carries Jinja and whose facets
    say so; None otherwise, or when the template has too many free parts."""
    if not isinstance(facets, dict) or not isinstance(facets.get(_TEMPLATED_NAME_KEY), dict):
        return None
    if not _is_templated(name):
        return None
    name_regex = _rendering_regex(name)
    namespace_regex = _rendering_regex(namespace) if _is_templated(namespace) else None
    if name_regex is None or (_is_templated(namespace) and namespace_regex is None):
        return None
    return _Pattern(name_regex, namespace_regex)


#: ``(direction, edge column at the job, edge column at the dataset)``.
_SIDES = (("input", "destination_id", "origin_id"), ("output", "origin_id", "destination_id"))


def _time(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite answers text
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _bound(conn: Connection, value: datetime) -> Any:
    """A time as the store keeps it: naive UTC text on SQLite, aware on PostgreSQL."""
    if conn.dialect.name == "sqlite":
        return value.replace(tzinfo=None).isoformat(" ", "microseconds")
    return value


def _declared_patterns(conn: Connection) -> dict[tuple[int, str], list[_Declared]]:
    """Every job's declared edges to a pattern, by (job, direction)."""
    found: dict[tuple[int, str], list[_Declared]] = {}
    for direction, at_job, at_dataset in _SIDES:
        query = (
            f"SELECT e.{at_job}, p.node_id, e.declared_at, p.name_regex, p.namespace_regex, n.namespace"
            f" FROM lineage_edges e JOIN lineage_name_patterns p ON p.node_id = e.{at_dataset}"
            " JOIN lineage_nodes n ON n.id = p.node_id WHERE e.declared_at IS NOT NULL"
        )
        for job_id, pattern_id, declared_at, name_regex, ns_regex, namespace in conn.execute(text(query)):
            declared = _Declared(pattern_id, _time(declared_at), _Pattern(name_regex, ns_regex), namespace)
            found.setdefault((job_id, direction), []).append(declared)
    return found


def _observed_edges(conn: Connection, job_ids: list[int]) -> list[_JobEdge]:
    """Every observed edge of these jobs to a dataset that is not itself a pattern."""
    edges = []
    for start in range(0, len(job_ids), _CHUNK):
        jobs = ", ".join(str(int(job)) for job in job_ids[start : start + _CHUNK])
        for direction, at_job, at_dataset in _SIDES:
            query = (
                f"SELECT e.{at_job}, e.{at_dataset}, n.namespace, n.name FROM lineage_edges e"
                f" JOIN lineage_nodes n ON n.id = e.{at_dataset} LEFT JOIN lineage_name_patterns p ON p.node_id = n.id"
                f" WHERE e.{at_job} IN ({jobs}) AND e.observed_at IS NOT NULL AND n.kind = 'dataset'"
                " AND p.node_id IS NULL"
            )
            edges += [
                _JobEdge(job, dataset, direction, ns, name) for job, dataset, ns, name in conn.execute(text(query))
            ]
    return edges


def _matches(declared: _Declared, edge: _JobEdge, compiled: dict[str, re.Pattern[str]]) -> bool:
    def regex(source: str) -> re.Pattern[str]:
        if source not in compiled:
            compiled[source] = re.compile(source, re.DOTALL)
        return compiled[source]

    if declared.pattern.namespace_regex is None:
        if edge.namespace != declared.namespace:
            return False
    elif regex(declared.pattern.namespace_regex).match(edge.namespace) is None:
        return False
    return regex(declared.pattern.name_regex).match(edge.name) is not None


def _match_renderings(conn: Connection) -> None:
    """Match every job's observed edges against the patterns the job declared an edge to, in the same direction:
    record each rendering and declare its edge at the latest time of the pattern edges it renders."""
    declared = _declared_patterns(conn)
    if not declared:
        return
    candidates = _observed_edges(conn, sorted({job for job, _direction in declared}))
    patterns = {d.pattern_id for ds in declared.values() for d in ds}
    compiled: dict[str, re.Pattern[str]] = {}
    renderings: set[tuple[int, int]] = set()
    declared_at: dict[tuple[int, int], datetime] = {}
    for edge in candidates:
        if edge.dataset_id in patterns:
            continue
        key = (edge.dataset_id, edge.job_id) if edge.direction == "input" else (edge.job_id, edge.dataset_id)
        for pattern in declared.get((edge.job_id, edge.direction), ()):
            if _matches(pattern, edge, compiled):
                renderings.add((pattern.pattern_id, edge.dataset_id))
                known = declared_at.get(key)
                if known is None or pattern.declared_at > known:
                    declared_at[key] = pattern.declared_at
    if not renderings:
        return
    conn.execute(
        text("INSERT INTO lineage_pattern_renderings (pattern_id, dataset_id) VALUES (:pattern, :dataset)"),
        [{"pattern": p, "dataset": d} for p, d in sorted(renderings)],
    )
    conn.execute(
        text(
            "UPDATE lineage_edges SET declared_at = :at WHERE origin_id = :origin AND destination_id = :destination"
            " AND (declared_at IS NULL OR declared_at < :at)"
        ),
        [
            {"origin": origin, "destination": destination, "at": _bound(conn, when)}
            for (origin, destination), when in sorted(declared_at.items())
        ],
    )
