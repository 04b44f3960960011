"""Marquez's ``Run`` and ``JobVersion`` from the store: run objects, their job versions, a run's facets.

A **job version** is what one run of a job read, wrote and said about the job: its inputs and outputs (every
event of the run, from ``lineage_run_io``) and the job facets of its latest event that carried job facets
(the rule the store applies to a job's own facets). Its id is a UUID 5 of that content, so the same content
has the same version on every store and in every process (see :func:`version_id`). A JobEvent has no run and
makes no version.

A run's ``facets`` in a ``Run`` are those of its latest event that carried run facets (as the store keeps
them); :func:`run_facets` answers ``/jobs/runs/{id}/facets`` from every event of the run, each facet as the
latest event naming it said it, as Marquez merges them. Objects follow Marquez's JSON: no null fields.

``visible`` (see :mod:`.visibility`) leaves out inputs and outputs in hidden namespaces and facet objects
naming one; version ids are computed from the full content, so every key sees the same ids.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache, cached_property, lru_cache
from typing import Any, overload

import msgspec
from sqlalchemy import Connection, Text, bindparam, case, cast, func, null, select, true
from sqlalchemy.sql.elements import BindParameter

from airflow_lineage_provider.consumer.marquez.shapes import Run, RunFacets, VersionId
from airflow_lineage_provider.consumer.store.read.json_paths import decoded, json_member, member_in, member_value
from airflow_lineage_provider.consumer.store.read.queries import named
from airflow_lineage_provider.consumer.store.read.sqltime import iso_utc
from airflow_lineage_provider.consumer.store.read.visibility import Visible, scrub
from airflow_lineage_provider.consumer.store.schema import payloads, tables

#: The UUID 5 namespace of job version ids (a fixed, random UUID: never change it, ids would change).
VERSION_NAMESPACE = uuid.UUID("5b0d6e1c-3f52-4c1e-9a8e-5d2a0a6f0c71")
#: Ids per ``IN (...)`` list.
CHUNK = 2000
#: Job version ids remembered by content (a page of 100 jobs shows up to 1,000 runs' versions).
VERSION_IDS_KEPT = 8192

_r, _n = tables.runs.c, tables.nodes.c
#: The ``lineage_runs`` columns a Run is made of (times as ISO text), and its job's namespace and name.
RUN_COLUMNS = (
    _r.run_uuid,
    _r.job_id,
    _r.state,
    # Times as ISO text formatted by the database (a page holds hundreds): no datetime parsed and formatted
    # again per value. The text sorts as the times do.
    iso_utc(_r.created_at).label("created_at"),
    iso_utc(_r.updated_at).label("updated_at"),
    iso_utc(_r.started_at).label("started_at"),
    iso_utc(_r.ended_at).label("ended_at"),
    iso_utc(_r.nominal_start_time).label("nominal_start_time"),
    iso_utc(_r.nominal_end_time).label("nominal_end_time"),
    _r.facets,
    _r.job_facets,
    _n.namespace,
    _n.name,
)


def runs_query() -> Any:
    """``SELECT`` :data:`RUN_COLUMNS` from the runs joined to their jobs (add the ``WHERE``)."""
    return select(*RUN_COLUMNS).join_from(tables.runs, tables.nodes, _n.id == _r.job_id)


def json_rows(dialect: str, *members: Any) -> Any:
    """SQL aggregating each row's ``members`` into one JSON array of arrays (``[[a, b], ...]``; none: NULL or
    ``[]``), decoded by :func:`json_rows_value`."""
    if dialect == "postgresql":  # as text: msgspec decodes it faster than psycopg2's json.loads
        return cast(func.json_agg(func.json_build_array(*members)), Text)
    return func.json_group_array(func.json_array(*members))


#: msgspec's JSON decoder, faster than json.loads on the small arrays of :func:`json_rows` (hundreds per page).
_decode = msgspec.json.Decoder().decode


def json_rows_value(value: Any) -> list[Any]:
    """What :func:`json_rows` answered (JSON text), as a list."""
    if value is None:
        return []
    return _decode(value) if isinstance(value, str) else value


def io_column(dialect: str) -> Any:
    """A column ``io`` of a query on runs: what the run read and wrote, ``[[direction, namespace, name], ...]``.

    A subquery per run on ``lineage_run_io``'s key, so a page of runs needs no statement of its own for it.
    """
    io = tables.run_io
    rows, dataset = named(dialect, io.c.dataset_id, io, "io_dataset")
    said = (
        select(json_rows(dialect, io.c.direction, dataset.c.namespace, dataset.c.name))
        .select_from(rows)
        .where(io.c.run_uuid == _r.run_uuid)
    )
    return said.scalar_subquery().label("io")


def runs_with_io_query(dialect: str) -> Any:
    """:func:`runs_query` with each run's :func:`io_column`: :func:`run_versions` then reads nothing more."""
    return runs_query().add_columns(io_column(dialect))


@dataclass(frozen=True)
class Version:
    """One job version: its id and content (inputs and outputs as sorted ``(namespace, name)``, the job
    facets as stored, decoded when first asked for)."""

    id: str
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    facets_text: str | None
    dialect: str

    @cached_property
    def facets(self) -> dict[str, Any]:
        """The job facets of the version."""
        return _job_facets(self.facets_text, self.dialect)


def version_id(namespace: str, name: str, inputs: Iterable[Any], outputs: Iterable[Any], facets: dict[str, Any]) -> str:
    """The UUID 5 of a job version's content, in :data:`VERSION_NAMESPACE`.

    The content is the canonical JSON (sorted keys, ASCII, no spaces) of ``[namespace, name, inputs,
    outputs, facets]`` with inputs and outputs as sorted ``[namespace, name]`` pairs; NUL in text counts as
    U+FFFD (PostgreSQL cannot read it, see :mod:`.json_paths`).
    """
    content = [namespace, name, sorted(map(list, inputs)), sorted(map(list, outputs)), facets]
    text = json.dumps(content, sort_keys=True, separators=(",", ":")).replace("\\u0000", "\\ufffd")
    return str(uuid.uuid5(VERSION_NAMESPACE, text))


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


@cache
def _run_io_statement(dialect: str) -> Any:
    """``(run, direction, namespace, name)`` of each dataset the runs of ``:runs`` (expanding) read or wrote.

    Run by run from ``lineage_run_io``'s key: on PostgreSQL through a ``LATERAL`` subquery (``OFFSET 0``
    keeps the planner from hash-joining every row of the table instead).
    """
    io, dataset = tables.run_io, tables.nodes.alias("dataset")
    runs: BindParameter[Any] = bindparam("runs", expanding=True)
    if dialect != "postgresql":
        return (
            select(io.c.run_uuid, io.c.direction, dataset.c.namespace, dataset.c.name)
            .join_from(io, dataset, dataset.c.id == io.c.dataset_id)
            .where(io.c.run_uuid.in_(runs))
        )
    said = select(io.c.direction, io.c.dataset_id).where(io.c.run_uuid == _r.run_uuid).offset(0).lateral("said")
    return (
        select(_r.run_uuid, said.c.direction, dataset.c.namespace, dataset.c.name)
        .select_from(tables.runs)
        .join(said, true())
        .join(dataset, dataset.c.id == said.c.dataset_id)
        .where(_r.run_uuid.in_(runs))
    )


def _run_io(conn: Connection, run_ids: list[str]) -> dict[str, dict[str, list[tuple[str, str]]]]:
    found: dict[str, dict[str, list[tuple[str, str]]]] = {}
    statement = _run_io_statement(conn.dialect.name)
    for chunk in _chunks(run_ids):
        for run_uuid, direction, namespace, name in conn.execute(statement, {"runs": chunk}):
            found.setdefault(run_uuid, {"input": [], "output": []})[direction].append((namespace, name))
    return found


def _event_members(conn: Connection, run_ids: list[str], path: tuple[str, ...]) -> list[tuple[str, Any]]:
    """``(run id, decoded member at path)`` of each event of the runs carrying it, oldest event first."""
    e, dialect = tables.events.c, conn.dialect.name
    # An event's text in payload is read by the database; a packed one is unpacked and read here, alike.
    member = case((e.packed.is_(None), json_member(e.payload, path, dialect)), else_=null()).label("member")
    found = []
    for chunk in _chunks(run_ids):
        query = (
            select(e.run_uuid, e.event_time, e.id, member, e.packed, e.dictionary_id)
            .where(e.run_uuid.in_(chunk))
            .order_by(e.event_time, e.id)
        )
        for row in conn.execute(query):
            if row.packed is None:
                value = member_value(row.member)
            else:
                value = member_in(payloads.text_of(conn, "", row.packed, row.dictionary_id), path, dialect)
            found.append((row.run_uuid, row.event_time, row.id, value))
    found.sort(key=lambda item: (item[1], item[2]))
    return [(run_uuid, value) for run_uuid, _, _, value in found]


def _job_facets(text: str | None, dialect: str) -> dict[str, Any]:
    """A run's stored ``job_facets`` decoded, as :func:`.json_paths.json_member` would read them from its event.

    (On PostgreSQL a ``\\u0000`` escape reads as U+FFFD there: the same here, so answers do not change.)
    """
    if not text:
        return {}
    facets = decoded(text, dialect)
    return facets if isinstance(facets, dict) else {}


@lru_cache(maxsize=VERSION_IDS_KEPT)
def _version_id_of(
    namespace: str,
    name: str,
    inputs: tuple[tuple[str, str], ...],
    outputs: tuple[tuple[str, str], ...],
    facets_text: str | None,
    dialect: str,
) -> str:
    """:func:`version_id` of a stored content, remembered: the same content has the same id (a pure function)."""
    return version_id(namespace, name, inputs, outputs, _job_facets(facets_text, dialect))


def run_versions(conn: Connection, runs: Iterable[Any]) -> dict[str, Version]:
    """The job version of each run (rows of :data:`RUN_COLUMNS`: ``run_uuid``, ``job_facets`` and its job's
    ``namespace`` and ``name``); one statement reading what each run read and wrote, none for rows of
    :func:`runs_with_io_query`."""
    rows = {row.run_uuid: row for row in runs}
    if rows and all("io" in row._fields for row in rows.values()):  # from runs_with_io_query
        io: dict[str, dict[str, list[tuple[str, str]]]] = {}
        for run_uuid, row in rows.items():
            said = io[run_uuid] = {"input": [], "output": []}
            for direction, namespace, name in json_rows_value(row.io):
                said[direction].append((namespace, name))
    else:
        io = _run_io(conn, list(rows))
    dialect = conn.dialect.name
    versions = {}
    for run_uuid, row in rows.items():
        said = io.get(run_uuid, {"input": [], "output": []})
        inputs, outputs = tuple(sorted(set(said["input"]))), tuple(sorted(set(said["output"])))
        version = _version_id_of(row.namespace, row.name, inputs, outputs, row.job_facets, dialect)
        versions[run_uuid] = Version(version, inputs, outputs, row.job_facets, dialect)
    return versions


@overload
def iso(value: datetime | str) -> str: ...
@overload
def iso(value: datetime | str | None) -> str | None: ...
def iso(value: datetime | str | None) -> str | None:
    """A stored (aware, UTC) time as :func:`.text.iso` writes it, ``2026-03-01T12:00:00.000000Z`` (C-fast);
    text already formatted by :class:`.sqltime.iso_utc` as it is."""
    if value is None or isinstance(value, str):
        return value
    return value.isoformat(timespec="microseconds")[:26] + "Z"


def duration_ms(started: datetime | str | None, ended: datetime | str | None) -> int | None:
    """Milliseconds from ``started`` to ``ended`` (times or :func:`iso` text), truncated; None without both."""
    if started is None or ended is None:
        return None
    if isinstance(started, str):
        started = datetime.fromisoformat(started)
    if isinstance(ended, str):
        ended = datetime.fromisoformat(ended)
    return int((ended - started).total_seconds() * 1000)


def _facets(text: str | None, visible: Visible) -> dict[str, Any]:
    facets = json.loads(text) if text else {}
    return facets if visible is None else scrub(facets, visible)


def run_object(row: Any, version: Version | None, visible: Visible = None) -> Run:
    """A row of :data:`RUN_COLUMNS` as Marquez's ``Run`` (with its ``jobVersion`` when known)."""
    return Run(
        id=row.run_uuid,
        created_at=iso(row.created_at),
        updated_at=iso(row.updated_at),
        nominal_start_time=iso(row.nominal_start_time),
        nominal_end_time=iso(row.nominal_end_time),
        state=row.state,
        started_at=iso(row.started_at),
        ended_at=iso(row.ended_at),
        duration_ms=duration_ms(row.started_at, row.ended_at),
        args={},
        job_version=None if version is None else VersionId(namespace=row.namespace, name=row.name, version=version.id),
        facets=_facets(row.facets, visible),
    )


def run_objects(conn: Connection, rows: list[Any], visible: Visible = None) -> list[Run]:
    """Rows of :data:`RUN_COLUMNS` as Marquez's ``Run`` objects, with their job versions (two statements)."""
    versions = run_versions(conn, rows)
    return [run_object(row, versions[row.run_uuid], visible) for row in rows]


def find_run(conn: Connection, run_id: str, visible: Visible = None) -> Any:
    """The :data:`RUN_COLUMNS` row of run ``run_id``, or None (also when its job's namespace is hidden)."""
    row = conn.execute(runs_query().where(_r.run_uuid == run_id.lower())).first()
    if row is None or (visible is not None and row.namespace not in visible):
        return None
    return row


def run_facets(conn: Connection, run_id: str, kind: str, visible: Visible = None) -> RunFacets:
    """Marquez's ``FacetsResult`` of a run: its ``run`` or ``job`` facets merged over all its events.

    Each facet is as the latest event naming it said it (ties: the later stored event).
    """
    merged: dict[str, Any] = {}
    for _, facets in _event_members(conn, [run_id], (kind, "facets")):
        if isinstance(facets, dict):
            merged.update(facets)
    return RunFacets(run_id=run_id, facets=merged if visible is None else scrub(merged, visible))


def version_location(facets: dict[str, Any]) -> str | None:
    """The ``sourceCodeLocation`` facet's ``url``: Marquez's ``location`` of a job or job version."""
    facet = facets.get("sourceCodeLocation")
    url = facet.get("url") if isinstance(facet, dict) else None
    return url if isinstance(url, str) and url else None


def description(facets: dict[str, Any]) -> str | None:
    """The ``documentation`` facet's ``description``: Marquez's ``description`` of a job."""
    facet = facets.get("documentation")
    text = facet.get("description") if isinstance(facet, dict) else None
    return text if isinstance(text, str) and text else None
