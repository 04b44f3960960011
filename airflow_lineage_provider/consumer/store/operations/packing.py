"""Packing the raw events a store holds as text: those stored before it had a payload dictionary (before
schema version 18, or before it held :data:`..schema.payloads.TRAIN_AFTER` events), and, after a new dictionary
is drawn, those packed with an older one (``airflow-lineage pack-events``, see :mod:`..schema.payloads`).

Events are packed in batches of their ids, each batch in a transaction of its own: ingest and reads go on between
batches, and a stopped run leaves every event readable (packed or not) and picks up where it stopped when run
again. On PostgreSQL the space the texts took is reused by later rows once autovacuum (or ``VACUUM``) has been
through the table; ``VACUUM FULL lineage_events`` (which locks the table) gives it back to the file system.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, bindparam, func, or_, select, update

from airflow_lineage_provider.consumer.store.schema import payloads, tables
from airflow_lineage_provider.consumer.validation import namespaces_in

#: Events packed per transaction.
BATCH_EVENTS = 1_000


@dataclass(frozen=True)
class PackResult:
    """What :func:`pack_events` did: events packed, the bytes of their texts and of what holds them now, and the
    dictionary they were packed with (None when the store holds no event to draw one from)."""

    events: int
    text_bytes: int
    packed_bytes: int
    dictionary_id: int | None


def _waiting(dictionary_id: int) -> Any:
    """The events not packed with ``dictionary_id`` (or not sized and namespaced yet)."""
    e = tables.events.c
    return or_(e.packed.is_(None), e.dictionary_id != dictionary_id, e.namespaces.is_(None))


def prepare(conn: Connection, redraw: bool) -> tuple[payloads.Dictionary | None, int]:
    """The dictionary to pack with (drawn now when ``redraw`` or the store has none) and how many events wait."""
    dictionary = None if redraw else payloads.current_dictionary(conn)
    if dictionary is None:
        dictionary = payloads.draw_dictionary(conn)
    if dictionary is None:
        return None, 0
    waiting = conn.execute(select(func.count()).select_from(tables.events).where(_waiting(dictionary.id))).scalar()
    return dictionary, int(waiting or 0)


_REPACK = (
    update(tables.events)
    .where(tables.events.c.id == bindparam("row_id"))
    .values(
        payload=bindparam("new_payload"),
        packed=bindparam("new_packed"),
        dictionary_id=bindparam("new_dictionary_id"),
        size=bindparam("new_size"),
        namespaces=bindparam("new_namespaces"),
    )
)


def pack_batch(
    conn: Connection, dictionary: payloads.Dictionary, after: int, most: int = BATCH_EVENTS
) -> tuple[int, int, int, int]:
    """Pack up to ``most`` waiting events whose id is above ``after``, in id order: ``(last id, events, text bytes,
    packed bytes)`` (last id ``after`` when none is left)."""
    e = tables.events.c
    query = (
        select(e.id, *payloads.payload_columns())
        .where(and_(e.id > after, _waiting(dictionary.id)))
        .order_by(e.id)
        .limit(most)
    )
    rows = conn.execute(query).all()
    if not rows:
        return after, 0, 0, 0
    changes: list[dict[str, Any]] = []
    text_bytes = packed_bytes = 0
    for row_id, *stored in rows:
        text = payloads.text_of(conn, *stored)
        columns = payloads.stored_columns(text, namespaces_in(text), dictionary)
        changes.append({"row_id": row_id, **{f"new_{name}": value for name, value in columns.items()}})
        text_bytes += len(text)
        packed_bytes += len(columns["packed"])
    conn.execute(_REPACK, changes)
    return rows[-1][0], len(rows), text_bytes, packed_bytes


def pack_events(
    write: Callable[[], Any],
    redraw: bool = False,
    most: int = BATCH_EVENTS,
    progress: Callable[[int, int], None] | None = None,
) -> PackResult:
    """Pack every waiting event of the store ``write`` opens write transactions on (a context manager such as
    :meth:`..LineageStore.write`), ``most`` per transaction; ``redraw`` draws a new dictionary from the latest
    events first. ``progress(done, total)`` is called after each batch."""
    with write() as conn:
        dictionary, total = prepare(conn, redraw)
    if dictionary is None:
        return PackResult(0, 0, 0, None)
    done = text_bytes = packed_bytes = 0
    after = 0
    while True:
        with write() as conn:
            after, events, texts, packed = pack_batch(conn, dictionary, after, most)
        if not events:
            break
        done, text_bytes, packed_bytes = done + events, text_bytes + texts, packed_bytes + packed
        if progress is not None:
            progress(done, max(total, done))
    return PackResult(done, text_bytes, packed_bytes, dictionary.id)
