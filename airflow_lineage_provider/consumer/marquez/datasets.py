"""Marquez's ``Dataset``: one dataset, or a namespace's datasets paged, from what the events said.

Every value comes from the stored events (see docs/marquez-api.md, "Datasets, versions, sources and tags"):

* ``type``: :func:`..store.graph.node_types.dataset_type` of the stored facets (``datasetType``, ``dataSource``, the
  namespace's scheme); ``sourceName``: :func:`.sources.source_of`;
* ``fields``: the latest ``schema`` facet (by event time), each with the tags put on it; a field whose type
  the facet does not say is ``UNKNOWN`` (Marquez's ``FieldType.UNKNOWN``);
* ``facets``: as stored (the facets of the latest event that gave the dataset facets); ``description``: its
  ``documentation`` facet; ``lastLifecycleState``: its ``lifecycleStateChange`` facet; ``deleted``: whether
  that state is ``DROP`` (Marquez marks a dataset deleted on a DROP);
* ``lastModifiedAt``: the end of the latest COMPLETED run that wrote the dataset (Marquez: "last modified by
  a successful run"); ``currentVersion``: the version (:func:`version_id`) of the latest run that wrote it.
  Both are absent while no run wrote it (Marquez serializes without nulls).

A run "wrote" a dataset when one of its events listed it as an output (``lineage_run_io``). The runs are
found from the dataset through the graph's indexes — its incoming edges (``ix_lineage_edges_destination``)
give the jobs that wrote it, their runs (``ix_lineage_runs_job``), each checked against ``lineage_run_io``'s
key (:func:`writes`) — so a page of datasets costs a fixed number of statements, each an index lookup, and
reads the runs of the jobs that wrote them, not the store.

A dataset known under several names (:mod:`.dataset_aliases`) is one Dataset, under its representative's name,
asked by any of its names: its schema and facets (and what is read from them) are the latest any of its names
received, ``createdAt``/``updatedAt`` the earliest and latest of its names', tags those on any of them, and its
versions the runs that wrote any of them; ``aliases`` lists its other names (empty for a dataset with one).

``visible`` (see :mod:`.visibility`): a dataset in a hidden namespace is not found; runs of jobs in hidden
namespaces count for nothing (no version, no ``lastModifiedAt``); facets lose objects naming a hidden namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, and_, func, select

from airflow_lineage_provider.consumer.marquez.shapes import Dataset, Field, NodeId
from airflow_lineage_provider.consumer.store.graph import dataset_aliases
from airflow_lineage_provider.consumer.store.graph.node_types import dataset_type
from airflow_lineage_provider.consumer.store.read import node_totals, tags
from airflow_lineage_provider.consumer.store.read.queries import Admit, dataset_size
from airflow_lineage_provider.consumer.store.read.sources import source_of
from airflow_lineage_provider.consumer.store.read.text import iso, loads
from airflow_lineage_provider.consumer.store.read.visibility import Visible, scrub
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import node_key

#: The namespace of dataset version UUIDs (``uuid5(VERSIONS, namespace NUL name NUL run id)``).
VERSIONS = uuid.UUID("6f1d5c2e-8a43-5b9e-9c1a-3e7d2b40a8f1")
#: Ids per ``IN (...)`` list.
_CHUNK = 900
#: Marquez's word for a field type the schema does not say.
UNKNOWN_TYPE = "UNKNOWN"


def version_id(namespace: str, name: str, run_uuid: str) -> str:
    """The version of dataset ``namespace``/``name`` written by run ``run_uuid``: a UUID 5, the same for every
    event of the run, in every store (see docs/marquez-api.md)."""
    return str(uuid.uuid5(VERSIONS, f"{namespace}\x00{name}\x00{run_uuid.lower()}"))


def _facet_text(facets: dict[str, Any], facet: str, key: str) -> str | None:
    value = facets.get(facet)
    text = value.get(key) if isinstance(value, dict) else None
    return text if isinstance(text, str) and text else None


def description(facets: dict[str, Any]) -> str | None:
    """The ``documentation`` facet's description."""
    return _facet_text(facets, "documentation", "description")


def lifecycle_state(facets: dict[str, Any]) -> str | None:
    """The ``lifecycleStateChange`` facet's state (``CREATE``, ``OVERWRITE``, ``DROP``, ...)."""
    return _facet_text(facets, "lifecycleStateChange", "lifecycleStateChange")


def marquez_fields(fields: list[dict[str, Any]], field_tags: dict[str, list[str]]) -> list[Field]:
    """Stored schema fields (``{name, type, tags, description, fields?}``) in Marquez's shape, without nulls,
    with the tags put on each top-level field."""
    return [_field(item, field_tags.get(item["name"], [])) for item in fields]


def _field(item: dict[str, Any], field_tags: list[str]) -> Field:
    return Field(
        name=item["name"],
        type=item.get("type") or UNKNOWN_TYPE,
        tags=field_tags,
        description=item.get("description") or None,
        fields=[_field(sub, []) for sub in item["fields"]] if item.get("fields") else None,
    )


@dataclass(frozen=True)
class Write:
    """A run that wrote a dataset: what the dataset's ``lastModifiedAt``, ``currentVersion`` and versions need."""

    run_uuid: str
    state: str
    created_at: datetime
    ended_at: datetime | None


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def writes(conn: Connection, dataset_ids: list[int], visible: Visible = None) -> dict[int, list[Write]]:
    """The runs that wrote each dataset (of jobs in ``visible`` namespaces), newest first: ``{id: [Write]}``.

    Stepwise, one table per statement and each statement an index lookup whatever the planner knows (a
    PostgreSQL without statistics would otherwise start from a scan of ``lineage_run_io``): the datasets'
    incoming edges (``ix_lineage_edges_destination``) give the jobs that wrote them, the jobs' runs come from
    ``ix_lineage_runs_job``, and ``lineage_run_io``'s key says which of those runs wrote which dataset.
    """
    e, r, io, n = tables.edges.c, tables.runs.c, tables.run_io.c, tables.nodes.c
    writers: set[int] = set()
    for chunk in _chunks(dataset_ids):
        writers.update(conn.execute(select(e.origin_id).where(e.destination_id.in_(chunk))).scalars())
    jobs = sorted(writers)
    if visible is not None:
        shown = frozenset(visible)
        jobs = [
            job
            for chunk in _chunks(jobs)
            for job, namespace in conn.execute(select(n.id, n.namespace).where(n.id.in_(chunk)))
            if namespace in shown
        ]
    runs: dict[str, Write] = {}
    for chunk in _chunks(jobs):
        query = select(r.run_uuid, r.state, r.created_at, r.ended_at).where(r.job_id.in_(chunk))
        runs.update((row.run_uuid, Write(*row)) for row in conn.execute(query))
    found: dict[int, list[Write]] = {}
    for datasets_chunk in _chunks(dataset_ids):
        for chunk in _chunks(list(runs)):
            query = select(io.run_uuid, io.dataset_id).where(
                io.run_uuid.in_(chunk), io.dataset_id.in_(datasets_chunk), io.direction == "output"
            )
            for row in conn.execute(query):
                found.setdefault(row.dataset_id, []).append(runs[row.run_uuid])
    for written in found.values():
        written.sort(key=lambda write: (write.created_at, write.run_uuid), reverse=True)
    return found


@cache
def _details_query(times: bool, probe: bool) -> Any:
    """The rows a Dataset is made of (built once per variant): with the times of its schema and facets when
    choosing among a group's rows needs them (no time is read for nothing otherwise), with whether each
    dataset has a group when ``probe``."""
    n, d = tables.nodes.c, tables.datasets.c
    columns = [n.id, n.namespace, n.name, n.created_at, n.updated_at, d.fields, d.facets]
    if times:
        columns += [d.schema_time, d.facets_time]
    if probe:
        columns.append(dataset_aliases.grouped_probe(n))
    return select(*columns).outerjoin_from(tables.nodes, tables.datasets, d.node_id == n.id)


#: A run that wrote a dataset, with the name (namespace, name) it wrote it under.
NamedWrite = tuple[Write, str, str]


def named_writes(written: dict[int, list[Write]], names: list[tuple[int, str, str]]) -> list[NamedWrite]:
    """The runs that wrote any of a dataset's ``names`` (``(id, namespace, name)``, the representative first),
    newest first, each run once (under the first of the names it wrote)."""
    every = [(write, namespace, name) for node, namespace, name in names for write in written.get(node, [])]
    if len(names) == 1:
        return every  # one name's runs: newest first already, each once
    every.sort(key=lambda item: (item[0].created_at, item[0].run_uuid), reverse=True)  # stable: names' order
    seen: set[str] = set()
    named = []
    for item in every:
        if item[0].run_uuid not in seen:
            seen.add(item[0].run_uuid)
            named.append(item)
    return named


def _merged_field_tags(rows: list[Any], on_fields: dict[int, dict[str, list[str]]]) -> dict[str, list[str]]:
    merged: dict[str, set[str]] = {}
    for row in rows:
        for field, field_tags in on_fields.get(row.id, {}).items():
            merged.setdefault(field, set()).update(field_tags)
    return {field: sorted(field_tags) for field, field_tags in merged.items()}


def _dataset(
    rows: list[Any],
    on_nodes: dict[int, list[str]],
    on_fields: dict[int, dict[str, list[str]]],
    written: list[NamedWrite],
    aliases: list[dict[str, Any]],
    visible: frozenset[str] | None,
) -> Dataset:
    """A Dataset from the rows of its (visible) names, the representative first (see the module docstring)."""
    shown = with_schema = with_facets = rows[0]
    created, updated, node_tags = shown.created_at, shown.updated_at, on_nodes.get(shown.id, [])
    field_tags = on_fields.get(shown.id, {})
    if len(rows) > 1:  # a dataset known under several names (one name: its own row, at no extra cost)
        ranked = list(enumerate(rows))
        with_schema = dataset_aliases.latest((row, row.schema_time, rank) for rank, row in ranked) or shown
        with_facets = dataset_aliases.latest((row, row.facets_time, rank) for rank, row in ranked) or shown
        created, updated = dataset_aliases.merge_times((row.created_at, row.updated_at) for row in rows)
        node_tags = sorted({tag for row in rows for tag in on_nodes.get(row.id, [])})
        field_tags = _merged_field_tags(rows, on_fields)
    facets = loads(with_facets.facets, {})
    completed = [write.ended_at for write, _, _ in written if write.state == "COMPLETED" and write.ended_at is not None]
    state = lifecycle_state(facets)
    current = None
    if written:
        write, namespace, name = written[0]
        current = version_id(namespace, name, write.run_uuid)
    return Dataset(
        id=NodeId(namespace=shown.namespace, name=shown.name),
        type=dataset_type(facets, with_facets.namespace),
        name=shown.name,
        physical_name=shown.name,
        created_at=iso(created),
        updated_at=iso(updated),
        namespace=shown.namespace,
        source_name=source_of(facets, with_facets.namespace)[0],
        fields=marquez_fields(loads(with_schema.fields, []), field_tags),
        tags=node_tags,
        last_modified_at=iso(max(completed)) if completed else None,
        last_lifecycle_state=state,
        description=description(facets),
        facets=facets if visible is None else scrub(facets, visible),
        current_version=current,
        deleted=state is not None and state.upper() == "DROP",
        aliases=aliases,
    )


def dataset_names(
    conn: Connection, node: int, namespace: str, name: str, visible: Visible = None
) -> list[tuple[int, str, str]]:
    """``(id, namespace, name)`` of each (visible) name of the dataset ``node`` (named ``namespace``/``name``), its
    representative first (see :mod:`.dataset_aliases`); the dataset alone when it has one name."""
    group = dataset_aliases.groups(conn, [node]).get(node)
    if group is None:
        return [(node, namespace, name)]
    return [(member.id, member.namespace, member.name) for member in group.shown(visible)]


def _rows(conn: Connection, ids: list[int], *, times: bool, probe: bool = False) -> dict[int, Any]:
    """``id → row`` of the datasets ``ids`` (:func:`_details_query`; ``probe``: with whether each has a group)."""
    query = _details_query(times, probe)
    found: dict[int, Any] = {}
    for chunk in _chunks(ids):
        found.update((row.id, row) for row in conn.execute(query.where(tables.nodes.c.id.in_(chunk))).all())
    return found


def _annotations(
    conn: Connection, ids: list[int], visible: Visible
) -> tuple[dict[int, list[str]], dict[int, dict[str, list[str]]], dict[int, list[Write]]]:
    """The tags on the datasets ``ids`` and on their fields, and the runs that wrote them."""
    on_nodes: dict[int, list[str]] = {}
    on_fields: dict[int, dict[str, list[str]]] = {}
    written: dict[int, list[Write]] = {}
    for chunk in _chunks(ids):
        on_nodes.update(tags.node_tags(conn, chunk))
        on_fields.update(tags.fields_tags(conn, chunk))
        written.update(writes(conn, chunk, visible))
    return on_nodes, on_fields, written


def datasets(
    conn: Connection, ids: list[int], visible: Visible = None, *, has_groups: bool | None = None
) -> dict[int, Dataset]:
    """``id → Dataset`` (Marquez's shape) for the datasets ``ids``, each as its group shows it: under its
    representative's name, with its other visible names as ``aliases`` (see :mod:`.dataset_aliases`). A fixed
    number of statements per :data:`_CHUNK` names (see :func:`writes`); whether a dataset has a group rides
    along with its row, and only datasets with one cost more. ``has_groups``: whether the store has groups,
    when the caller knows (False spares asking)."""
    shown = None if visible is None else frozenset(visible)
    rows = _rows(conn, ids, times=False, probe=has_groups is not False)
    if has_groups is not False and any(row.grouped for row in rows.values()):
        return _grouped_datasets(conn, ids, [node for node, row in rows.items() if row.grouped], shown)
    on_nodes, on_fields, written = _annotations(conn, list(rows), shown)
    found: dict[int, Dataset] = {}
    for node in ids:
        row = rows.get(node)
        if row is not None:
            named = [(write, row.namespace, row.name) for write in written.get(node, ())]
            found[node] = _dataset([row], on_nodes, on_fields, named, [], shown)
    return found


def _grouped_datasets(
    conn: Connection, ids: list[int], grouped_ids: list[int], shown: frozenset[str] | None
) -> dict[int, Dataset]:
    """:func:`datasets` when some of ``ids`` (``grouped_ids``) are known under several names."""
    grouped = dataset_aliases.groups(conn, grouped_ids)
    names = {node: [name.id for name in grouped[node].shown(shown)] if node in grouped else [node] for node in ids}
    listed = {members[0]: grouped[node] for node, members in names.items() if node in grouped and members}
    aliases = dataset_aliases.aliases(conn, listed, shown)
    every = sorted({member for members in names.values() for member in members})
    rows = _rows(conn, every, times=True)
    on_nodes, on_fields, written = _annotations(conn, every, shown)
    found: dict[int, Dataset] = {}
    for node, members in names.items():
        member_rows = [rows[member] for member in members if member in rows]
        if member_rows:
            named = named_writes(written, [(row.id, row.namespace, row.name) for row in member_rows])
            found[node] = _dataset(member_rows, on_nodes, on_fields, named, aliases.get(members[0], []), shown)
    return found


def find_dataset(conn: Connection, namespace: str, name: str, visible: Visible = None) -> int | None:
    """The node id of dataset ``namespace``/``name``, or None (also when its namespace is hidden)."""
    if visible is not None and namespace not in visible:
        return None
    n = tables.nodes.c
    return conn.execute(select(n.id).where(n.node_key == node_key("dataset", namespace, name))).scalar()


def has_field(conn: Connection, dataset_id: int, field: str, visible: Visible = None) -> bool:
    """Whether the schema the dataset's Dataset shows (the latest of its names', see :func:`datasets`) has the
    top-level field ``field``."""
    d = tables.datasets.c
    names = [node for node, _, _ in dataset_names(conn, dataset_id, "", "", visible)]
    query = select(d.node_id, d.fields, d.schema_time).where(d.node_id.in_(names))
    stored = {row.node_id: row for row in conn.execute(query)}
    ranked = [(stored[node], stored[node].schema_time, rank) for rank, node in enumerate(names) if node in stored]
    latest = dataset_aliases.latest(ranked)
    fields = None if latest is None else latest.fields
    return any(item.get("name") == field for item in loads(fields, []))


def list_datasets(
    conn: Connection, namespace: str, limit: int, offset: int, visible: Visible = None, admit: Admit | None = None
) -> tuple[list[Dataset], int]:
    """The datasets of ``namespace`` by name, a page of them, and how many there are: a dataset known under
    several names is listed (and counted) once, in its representative's namespace (:mod:`.dataset_aliases`).
    ``admit`` is told the size of each dataset's stored schema and facets before they are read."""
    if visible is not None and namespace not in visible:
        return [], 0
    n = tables.nodes.c
    plain = and_(n.kind == "dataset", n.namespace == namespace)
    expected = dataset_aliases.expect_groups(conn)
    where = and_(plain, dataset_aliases.listed(n, visible, conn.dialect.name)) if expected else plain
    # Without groups the total is the namespace's kept count (.schema.node_counts), not a count of its datasets.
    grouped = conn.execute(select(dataset_aliases.HAS_GROUPS)).scalar_one()
    dataset_aliases.note_groups(conn, bool(grouped))
    if grouped and not expected:
        where = and_(plain, dataset_aliases.listed(n, visible, conn.dialect.name))
    if grouped:
        total = conn.execute(select(func.count()).select_from(tables.nodes).where(where)).scalar_one()
    else:
        total = node_totals.total(conn, "dataset", namespace)
    sized = select(n.id, dataset_size(n.id, conn.dialect.name)).where(where).order_by(n.name)
    rows = conn.execute(sized.limit(limit).offset(offset)).all()
    if admit is not None:
        admit([size for _, size in rows])
    ids = [node for node, _ in rows]
    found = datasets(conn, ids, visible, has_groups=bool(grouped))
    # A dataset gone since the page was chosen (a prune or reset committed in between) is left out.
    return [found[node] for node in ids if node in found], total - (len(ids) - len(found))
