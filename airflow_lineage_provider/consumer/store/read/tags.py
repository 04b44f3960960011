"""Tags on jobs, datasets and dataset fields (Marquez's tag API), stored apart from what events say.

A tag is a name (at most :data:`MAX_TAG_LENGTH` characters) and an optional description. Putting a tag on
a node or field creates the tag when it does not exist yet, as Marquez does; taking it off leaves the tag.
Events never write tags, so re-ingesting or pruning changes none.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, and_, delete, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.consumer.store.graph.versioned_cache import bump_versions
from airflow_lineage_provider.consumer.store.read.visibility import Visible, namespace_in
from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.write.ingest import field_key

#: Longest tag name accepted (Marquez's column is ``VARCHAR(255)``).
MAX_TAG_LENGTH = 255

#: ``field_key`` of a tag on the node itself.
NODE = ""


def check_tag_name(name: str) -> str:
    """``name`` when usable as a tag; raises ValueError saying what is wrong otherwise."""
    if not name or not name.strip():
        raise ValueError("a tag name must not be empty")
    if len(name) > MAX_TAG_LENGTH:
        raise ValueError(f"a tag name is at most {MAX_TAG_LENGTH} characters, got {len(name)}")
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        raise ValueError(f"a tag name must not contain control characters, got {name!r}")
    return name


def _insert(conn: Connection, table: Any) -> Any:
    return (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(table)


def put_tag(conn: Connection, name: str, description: str | None = None, *, keep_description: bool = False) -> None:
    """Create tag ``name``; an existing tag gets ``description`` unless ``keep_description``."""
    check_tag_name(name)
    statement = _insert(conn, tables.tags)
    if keep_description:
        statement = statement.on_conflict_do_nothing(index_elements=["name"])
    else:
        statement = statement.on_conflict_do_update(
            index_elements=["name"], set_={"description": statement.excluded.description}
        )
    conn.execute(statement, {"name": name, "description": description, "created_at": datetime.now(timezone.utc)})


def tag_exists(conn: Connection, name: str) -> bool:
    """Whether tag ``name`` is defined (by ``PUT /api/v1/tags`` or by being put on a node before)."""
    return conn.execute(select(tables.tags.c.name).where(tables.tags.c.name == name)).first() is not None


def add_tag(conn: Connection, node_id: int, tag: str, field: str | None = None) -> None:
    """Put ``tag`` on node ``node_id``, or on its field ``field``; creates the tag if needed. Idempotent."""
    put_tag(conn, tag, keep_description=True)
    row = {
        "node_id": node_id,
        "field_key": NODE if field is None else field_key(node_id, field),
        "tag": tag,
        "field": field,
        "tagged_at": datetime.now(timezone.utc),
    }
    # RETURNING, not rowcount: an INSERT's rowcount is gone once SQLAlchemy closes the cursor on psycopg (3).
    inserted = _insert(conn, tables.node_tags).on_conflict_do_nothing().returning(tables.node_tags.c.node_id)
    if conn.execute(inserted, row).first() is not None:
        bump_versions(conn, node_id)  # job objects kept by version show their tags


def remove_tag(conn: Connection, node_id: int, tag: str, field: str | None = None) -> bool:
    """Take ``tag`` off the node (or its ``field``); whether it was there."""
    t = tables.node_tags.c
    where = and_(
        t.node_id == node_id, t.field_key == (NODE if field is None else field_key(node_id, field)), t.tag == tag
    )
    removed = bool(conn.execute(delete(tables.node_tags).where(where)).rowcount)
    if removed:
        bump_versions(conn, node_id)
    return removed


def node_tags(conn: Connection, node_ids: Iterable[int]) -> dict[int, list[str]]:
    """The tags on each node itself (not its fields), sorted; nodes without tags are absent."""
    ids = list(node_ids)
    found: dict[int, list[str]] = {}
    t = tables.node_tags.c
    for start in range(0, len(ids), 900):
        query = (
            select(t.node_id, t.tag)
            .where(t.node_id.in_(ids[start : start + 900]), t.field_key == NODE)
            .order_by(t.node_id, t.tag)
        )
        for node, tag in conn.execute(query):
            found.setdefault(node, []).append(tag)
    return found


def field_tags(conn: Connection, dataset_id: int) -> dict[str, list[str]]:
    """The tags on each field of a dataset, by field name, sorted."""
    return fields_tags(conn, [dataset_id]).get(dataset_id, {})


def fields_tags(conn: Connection, dataset_ids: Iterable[int]) -> dict[int, dict[str, list[str]]]:
    """The tags on each field of each dataset (one statement per 900 datasets): ``{dataset: {field: [tags]}}``,
    sorted; datasets without field tags are absent."""
    ids = list(dataset_ids)
    found: dict[int, dict[str, list[str]]] = {}
    t = tables.node_tags.c
    for start in range(0, len(ids), 900):
        query = (
            select(t.node_id, t.field, t.tag)
            .where(t.node_id.in_(ids[start : start + 900]), t.field_key != NODE)
            .order_by(t.node_id, t.field, t.tag)
        )
        for node, field, tag in conn.execute(query):
            found.setdefault(node, {}).setdefault(field, []).append(tag)
    return found


def list_tags(conn: Connection, limit: int, offset: int, visible: Visible = None) -> tuple[list[dict[str, Any]], int]:
    """Tags by name, a page of them, and how many there are: ``[{name, description}]``, total. For a key seeing
    ``visible`` namespaces only (None: every one), the tags it can see: those on a node it can see, and those on
    nothing (the vocabulary); a tag used only on hidden nodes is hidden, like them."""
    t, nt, n = tables.tags.c, tables.node_tags.c, tables.nodes.c
    shown = select(t.name, t.description)
    if visible is not None:
        used = select(nt.tag).where(nt.tag == t.name)
        seen = used.join_from(tables.node_tags, tables.nodes, n.id == nt.node_id).where(
            namespace_in(n.namespace, visible, conn.dialect.name)
        )
        shown = shown.where(or_(~used.exists(), seen.exists()))
    listed = shown.subquery("listed")
    total = conn.execute(select(func.count()).select_from(listed)).scalar_one()
    page = conn.execute(select(listed.c.name, listed.c.description).order_by(listed.c.name).limit(limit).offset(offset))
    return [{"name": name, "description": description} for name, description in page], total
