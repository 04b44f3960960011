"""Version 12: a job's latest JobEvent is its declaration; table and column lineage say declared or observed.

Adds ``lineage_job_declarations`` (each job's latest JobEvent: time, event key, whether it named no dataset),
``lineage_declared_column_links`` (the column-lineage links each declaration names), ``declared_at`` and
``observed_at`` on io groups and column edges, and an index of io groups by job.

Derived from what is stored, without today's ingest code (this revision must keep working after it moves on):

* each job's declaration is its stored JobEvent with the latest event time (greater event key on a tie);
* an edge of a declared job whose ``declared_at`` is before the declaration's time was declared only by an earlier
  JobEvent (version 9 kept the latest time of any): it is no longer declared; a retired job's (a declaration naming
  no dataset) edges are none of them declared; an edge left neither declared nor observed is deleted, and so is a
  dataset only such edges named (no run, nothing else pointing at it);
* an io group is declared when it is the group of its job's declaration (same job, inputs and outputs); a group of
  a job with no stored JobEvent came from runs and is observed at its ``last_seen``; any other group is observed
  when every one of its datasets' edges with the job was observed (version 9 derived those from the runs), and a
  group left neither declared nor observed (named only by a superseded JobEvent) is deleted with its members;
* a column edge named by a declaration's ``columnLineage`` is declared at the declaration's time and observed when
  it was seen after it; a column edge a stored DatasetEvent names is declared at that event's time; any other column
  edge is observed at its ``last_seen`` when a run named its target dataset (column lineage comes on a run's
  datasets), and deleted otherwise: only a superseded JobEvent can have named it. (A link a superseded JobEvent named
  on a dataset some run also named still reads as observed: what is stored cannot tell them apart.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from alembic import op
from sqlalchemy import Connection, text

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_CHUNK = 500

#: A column-lineage link by names: source namespace, name and field, target namespace, name and field.
_Named = tuple[str, str, str, str, str, str]
#: A column-lineage link a declaration names: job id, declaration time, the link.
_Link = tuple[int, datetime, _Named]

_DDL = """
CREATE TABLE lineage_job_declarations (
    job_id {id} NOT NULL PRIMARY KEY, declared_at {timestamp} NOT NULL, event_key VARCHAR(64) NOT NULL,
    empty SMALLINT NOT NULL
);
CREATE TABLE lineage_declared_column_links (
    job_id {id} NOT NULL, source_field_id {id} NOT NULL, target_field_id {id} NOT NULL,
    PRIMARY KEY (job_id, source_field_id, target_field_id)
);
CREATE INDEX ix_lineage_declared_column_links_edge ON lineage_declared_column_links (source_field_id, target_field_id);
ALTER TABLE lineage_io_groups ADD COLUMN declared_at {timestamp};
ALTER TABLE lineage_io_groups ADD COLUMN observed_at {timestamp};
CREATE INDEX ix_lineage_io_groups_job ON lineage_io_groups (job_id);
ALTER TABLE lineage_column_edges ADD COLUMN declared_at {timestamp};
ALTER TABLE lineage_column_edges ADD COLUMN observed_at {timestamp}
"""


def _sha1(text_: str) -> str:
    return hashlib.sha1(text_.encode()).hexdigest()


def _node_key(kind: str, namespace: str, name: str) -> str:
    return _sha1(f"{kind}\x00{namespace}\x00{name}")


def _time(value: Any) -> datetime:
    if isinstance(value, str):  # SQLite answers text
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _bound(conn: Connection, value: datetime) -> Any:
    """A time as the store keeps it: naive UTC text on SQLite, aware on PostgreSQL."""
    if conn.dialect.name == "sqlite":
        return value.replace(tzinfo=None).isoformat(" ", "microseconds")
    return value


def _datasets(payload: dict[str, Any], side: str) -> list[dict[str, Any]]:
    found = payload.get(side)
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _named(dataset: dict[str, Any]) -> tuple[str, str] | None:
    namespace, name = dataset.get("namespace"), dataset.get("name")
    return (namespace, name) if isinstance(namespace, str) and isinstance(name, str) and namespace and name else None


def _column_links(dataset: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """``(source namespace, source name, source field, target field)`` of a dataset's ``columnLineage`` facet."""
    facets = dataset.get("facets")
    facet = facets.get("columnLineage") if isinstance(facets, dict) else None
    fields = facet.get("fields") if isinstance(facet, dict) else None
    if not isinstance(fields, dict):
        return
    for target, mapping in fields.items():
        sources = mapping.get("inputFields") if isinstance(mapping, dict) else None
        if not isinstance(target, str) or not target or not isinstance(sources, list):
            continue
        for source in sources:
            if isinstance(source, dict):
                namespace, name, field = source.get("namespace"), source.get("name"), source.get("field")
                strings = isinstance(namespace, str) and isinstance(name, str) and isinstance(field, str)
                if strings and namespace and name and field:
                    yield (namespace, name, field, target)


def _latest_job_events(conn: Connection) -> dict[tuple[str, str], tuple[datetime, str, str]]:
    """Each job's latest stored JobEvent: ``(namespace, name) → (event time, event key, payload)``."""
    latest: dict[tuple[str, str], tuple[datetime, str, str]] = {}
    rows = conn.execute(
        text(
            "SELECT job_namespace, job_name, event_time, event_key, payload FROM lineage_events"
            " WHERE kind = 'job' AND job_namespace IS NOT NULL AND job_name IS NOT NULL"
        )
    )
    for namespace, name, at, key, payload in rows:
        at = _time(at)
        known = latest.get((namespace, name))
        if known is None or (at, key) > known[:2]:
            latest[(namespace, name)] = (at, key, payload)
    return latest


def _ids(conn: Connection, keys: list[str], table: str, column: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ", ".join(f":k{i}" for i in range(len(chunk)))
        query = text(f"SELECT {column}, id FROM {table} WHERE {column} IN ({marks})")
        found.update(
            (key, found_id) for key, found_id in conn.execute(query, {f"k{i}": k for i, k in enumerate(chunk)})
        )
    return found


def _declarations(conn: Connection) -> None:
    latest = _latest_job_events(conn)
    if not latest:
        return
    job_ids = _ids(conn, [_node_key("job", ns, name) for ns, name in latest], "lineage_nodes", "node_key")
    groups: list[dict[str, Any]] = []
    links: list[_Link] = []
    for (namespace, name), (at, key, payload_text) in latest.items():
        job_key = _node_key("job", namespace, name)
        job = job_ids.get(job_key)
        if job is None:
            continue
        try:
            payload = json.loads(payload_text)
        except ValueError:
            continue
        inputs = [ref for ref in map(_named, _datasets(payload, "inputs")) if ref]
        outputs = [ref for ref in map(_named, _datasets(payload, "outputs")) if ref]
        empty = not inputs and not outputs
        conn.execute(
            text(
                "INSERT INTO lineage_job_declarations (job_id, declared_at, event_key, empty)"
                " VALUES (:job, :at, :key, :empty)"
            ),
            {"job": job, "at": _bound(conn, at), "key": key, "empty": int(empty)},
        )
        bound = {"job": job, "at": _bound(conn, at)}
        older = "declared_at IS NOT NULL" if empty else "declared_at < :at"
        for side in ("origin_id", "destination_id"):
            conn.execute(text(f"UPDATE lineage_edges SET declared_at = NULL WHERE {side} = :job AND {older}"), bound)
        if inputs and outputs:
            input_keys = sorted({_node_key("dataset", *ref) for ref in inputs})
            output_keys = sorted({_node_key("dataset", *ref) for ref in outputs})
            group_key = _sha1(f"{job_key}>{','.join(input_keys)}>{','.join(output_keys)}")
            groups.append({"key": group_key, "at": _bound(conn, at)})
        for dataset in _datasets(payload, "outputs"):
            target = _named(dataset)
            if target is not None:
                links += [
                    (job, at, (source_ns, source_name, source_field, *target, target_field))
                    for source_ns, source_name, source_field, target_field in _column_links(dataset)
                ]
    if groups:
        conn.execute(
            text(
                "UPDATE lineage_io_groups SET declared_at = :at, observed_at = (SELECT CASE WHEN"
                f" {_GROUP_OBSERVED} THEN g.last_seen END FROM lineage_io_groups g WHERE g.id = lineage_io_groups.id)"
                " WHERE group_key = :key"
            ),
            groups,
        )
    _declared_column_links(conn, links)


def _field_ids(conn: Connection, named: set[_Named]) -> dict[_Named, tuple[int, int]]:
    """The ``(source field id, target field id)`` of each link of ``named`` whose datasets and fields are stored."""
    datasets = {_node_key("dataset", n[0], n[1]) for n in named} | {_node_key("dataset", n[3], n[4]) for n in named}
    dataset_ids = _ids(conn, sorted(datasets), "lineage_nodes", "node_key")
    keys: dict[_Named, tuple[str, str]] = {}
    for link in named:
        source_ns, source_name, source_field, target_ns, target_name, target_field = link
        source = dataset_ids.get(_node_key("dataset", source_ns, source_name))
        target = dataset_ids.get(_node_key("dataset", target_ns, target_name))
        if source is not None and target is not None:
            keys[link] = (_sha1(f"{source}\x00{source_field}"), _sha1(f"{target}\x00{target_field}"))
    field_ids = _ids(conn, sorted({key for pair in keys.values() for key in pair}), "lineage_fields", "field_key")
    found: dict[_Named, tuple[int, int]] = {}
    for link, (source_key, target_key) in keys.items():
        source_id, target_id = field_ids.get(source_key), field_ids.get(target_key)
        if source_id is not None and target_id is not None:
            found[link] = (source_id, target_id)
    return found


def _declared_column_links(conn: Connection, links: list[_Link]) -> None:
    """Link each declared column edge to its job and mark it declared at the declaration's time."""
    if not links:
        return
    ids = _field_ids(conn, {named for _job, _at, named in links})
    seen: set[tuple[int, int, int]] = set()
    for job, at, named in links:
        if named not in ids or (job, *ids[named]) in seen:
            continue
        source, target = ids[named]
        seen.add((job, source, target))
        edge = {"source": source, "target": target, "at": _bound(conn, at)}
        found = conn.execute(
            text(
                "UPDATE lineage_column_edges SET declared_at = :at,"
                " observed_at = CASE WHEN last_seen > :at THEN last_seen ELSE NULL END"
                " WHERE source_field_id = :source AND target_field_id = :target"
            ),
            edge,
        )
        if found.rowcount:
            conn.execute(
                text(
                    "INSERT INTO lineage_declared_column_links (job_id, source_field_id, target_field_id)"
                    " VALUES (:job, :source, :target)"
                ),
                {"job": job, "source": source, "target": target},
            )


#: Every member of the io group (``g``) was observed with its job: the group was observed, not only declared.
_GROUP_OBSERVED = """NOT EXISTS (
    SELECT 1 FROM lineage_io_members m
    WHERE m.group_id = g.id AND NOT EXISTS (
        SELECT 1 FROM lineage_edges e
        WHERE e.observed_at IS NOT NULL AND (
            (m.direction = 'input' AND e.origin_id = m.dataset_id AND e.destination_id = g.job_id)
            OR (m.direction = 'output' AND e.origin_id = g.job_id AND e.destination_id = m.dataset_id)
        )
    )
)"""


def upgrade() -> None:
    conn = op.get_bind()
    postgresql = conn.dialect.name == "postgresql"
    ddl = _DDL.format(
        id="BIGINT" if postgresql else "INTEGER",
        timestamp="TIMESTAMP WITH TIME ZONE" if postgresql else "DATETIME",
    )
    for statement in ddl.split(";"):
        conn.exec_driver_sql(statement)
    _declarations(conn)
    conn.exec_driver_sql(
        "UPDATE lineage_io_groups SET observed_at = (SELECT CASE WHEN g.job_id NOT IN"
        f" (SELECT job_id FROM lineage_job_declarations) OR {_GROUP_OBSERVED} THEN g.last_seen END"
        " FROM lineage_io_groups g WHERE g.id = lineage_io_groups.id) WHERE declared_at IS NULL"
    )
    _dataset_event_column_links(conn)
    conn.exec_driver_sql(
        "UPDATE lineage_column_edges SET observed_at = last_seen WHERE NOT EXISTS"
        " (SELECT 1 FROM lineage_declared_column_links l"
        " WHERE l.source_field_id = lineage_column_edges.source_field_id"
        " AND l.target_field_id = lineage_column_edges.target_field_id) AND EXISTS"
        " (SELECT 1 FROM lineage_fields f JOIN lineage_nodes n ON n.id = f.dataset_id"
        " WHERE f.id = lineage_column_edges.target_field_id AND n.observed_at IS NOT NULL)"
    )
    unseen = _unseen()
    far_ends = {
        node
        for (node,) in conn.exec_driver_sql(
            f"SELECT origin_id FROM lineage_edges WHERE {unseen} UNION SELECT destination_id FROM lineage_edges"
            f" WHERE {unseen}"
            f" UNION SELECT m.dataset_id FROM lineage_io_members m JOIN lineage_io_groups g ON g.id = m.group_id"
            f" WHERE {_unseen('g.')}"
            " UNION SELECT f.dataset_id FROM lineage_fields f JOIN lineage_column_edges c"
            f" ON f.id = c.source_field_id OR f.id = c.target_field_id WHERE {_unseen('c.')}"
        )
    }
    conn.exec_driver_sql(f"DELETE FROM lineage_edges WHERE {unseen}")
    conn.exec_driver_sql(
        f"DELETE FROM lineage_io_members WHERE group_id IN (SELECT id FROM lineage_io_groups WHERE {unseen})"
    )
    conn.exec_driver_sql(f"DELETE FROM lineage_io_groups WHERE {unseen}")
    conn.exec_driver_sql(f"DELETE FROM lineage_column_edges WHERE {unseen}")
    _forget_retracted_datasets(conn, sorted(far_ends))


def _unseen(alias: str = "") -> str:
    """A row (of table ``alias``, given with its dot) neither declared nor observed."""
    return f"{alias}declared_at IS NULL AND {alias}observed_at IS NULL"


def _dataset_event_column_links(conn: Connection) -> None:
    """Mark declared, at the latest event's time, the column edges stored DatasetEvents' ``columnLineage`` name
    (they belong to no job's declaration, and no JobEvent replaces them)."""
    latest: dict[_Named, datetime] = {}
    after = 0
    while True:
        page = conn.execute(
            text(
                "SELECT id, event_time, payload FROM lineage_events WHERE kind = 'dataset' AND id > :after"
                " ORDER BY id LIMIT 1000"
            ),
            {"after": after},
        ).all()
        if not page:
            break
        after = page[-1][0]
        for _id, at, payload_text in page:
            try:
                payload = json.loads(payload_text)
            except ValueError:
                continue
            dataset = payload.get("dataset") if isinstance(payload, dict) else None
            named = _named(dataset) if isinstance(dataset, dict) else None
            if named is None:
                continue
            for source_ns, source_name, source_field, target_field in _column_links(dataset):  # type: ignore[arg-type]
                link = (source_ns, source_name, source_field, *named, target_field)
                latest[link] = max(latest.get(link, _time(at)), _time(at))
    if not latest:
        return
    by_edge: dict[tuple[int, int], datetime] = {}
    for link, (source, target) in _field_ids(conn, set(latest)).items():
        by_edge[(source, target)] = max(by_edge.get((source, target), latest[link]), latest[link])
    for (source, target), at in by_edge.items():
        conn.execute(
            text(
                "UPDATE lineage_column_edges SET declared_at = :at WHERE source_field_id = :source"
                " AND target_field_id = :target AND (declared_at IS NULL OR declared_at < :at)"
            ),
            {"source": source, "target": target, "at": _bound(conn, at)},
        )


#: A dataset (``n``) no run named and nothing in the store points at any more: only a superseded JobEvent named it.
_RETRACTED = """
n.kind = 'dataset' AND n.observed_at IS NULL
AND NOT EXISTS (SELECT 1 FROM lineage_edges e WHERE e.origin_id = n.id OR e.destination_id = n.id)
AND NOT EXISTS (SELECT 1 FROM lineage_io_members m WHERE m.dataset_id = n.id)
AND NOT EXISTS (SELECT 1 FROM lineage_run_io r WHERE r.dataset_id = n.id)
AND NOT EXISTS (SELECT 1 FROM lineage_node_tags t WHERE t.node_id = n.id)
AND NOT EXISTS (SELECT 1 FROM lineage_symlinks s WHERE s.dataset_id = n.id)
AND NOT EXISTS (SELECT 1 FROM lineage_dataset_members d WHERE d.node_id = n.id)
AND NOT EXISTS (SELECT 1 FROM lineage_pattern_renderings p WHERE p.dataset_id = n.id)
AND NOT EXISTS (
    SELECT 1 FROM lineage_fields f JOIN lineage_column_edges c ON c.source_field_id = f.id OR c.target_field_id = f.id
    WHERE f.dataset_id = n.id
)
"""


def _forget_retracted_datasets(conn: Connection, candidates: list[int]) -> None:
    """Delete the datasets of ``candidates`` (ends of the edges deleted) that :data:`_RETRACTED` says are gone."""
    for start in range(0, len(candidates), _CHUNK):
        chunk = candidates[start : start + _CHUNK]
        marks = ", ".join(str(int(node)) for node in chunk)
        gone = [
            node
            for (node,) in conn.exec_driver_sql(
                f"SELECT n.id FROM lineage_nodes n WHERE n.id IN ({marks}) AND {_RETRACTED}"
            )
        ]
        if not gone:
            continue
        ids = ", ".join(str(int(node)) for node in gone)
        for table, column in (
            ("lineage_fields", "dataset_id"),
            ("lineage_node_producers", "node_id"),
            ("lineage_name_patterns", "node_id"),
            ("lineage_pattern_renderings", "pattern_id"),
            ("lineage_datasets", "node_id"),
            ("lineage_nodes", "id"),
        ):
            conn.exec_driver_sql(f"DELETE FROM {table} WHERE {column} IN ({ids})")
