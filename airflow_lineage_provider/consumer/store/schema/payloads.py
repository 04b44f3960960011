"""Raw events stored packed: deflated with a dictionary of text common to the store's events preset.

An event's canonical JSON mostly repeats what the same producer's other events say: facet names, schema URLs,
the producer, namespaces, job and dataset names, column names. Compressed alone (PostgreSQL compresses a value
over ~2 kB with pglz) each event still holds all of that; deflated with a preset dictionary drawn from the store's
own events it holds little more than what is its own (figures: ``docs/benchmarks.md``, "Packed raw events").

The dictionary is drawn once the store holds :data:`TRAIN_AFTER` events, by the first ingest past that, in its
transaction (:func:`dictionary_for_ingest`): :data:`SAMPLE_EVENTS` events spread over the latest
:data:`SAMPLE_FROM`, joined oldest first, the last :data:`DICTIONARY_BYTES` kept (deflate's window). It goes in
``lineage_payload_dictionaries`` and its id in the store setting :data:`DICTIONARY_SETTING`; every event stored
after is packed with it. Events stored before stay as they were until ``airflow-lineage pack-events`` packs them
(:mod:`..operations.packing`), which can also draw a new dictionary when a deployment's events have changed.

Each stored event also keeps its text's ``size`` and the ``namespaces`` it names: what listings size pages by and
namespace-limited keys filter by, in SQL, without reading the text. Readers select :func:`payload_columns` and
read the text with :func:`text_of`; dictionaries are immutable, so each process keeps those it has read.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import weakref
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Engine, case, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from airflow_lineage_provider.consumer.store.schema import tables
from airflow_lineage_provider.consumer.store.schema.store_settings import write_setting

#: The store setting naming the dictionary new events are packed with (its id, as text).
DICTIONARY_SETTING = "payload_dictionary"
#: Events a store holds before it draws its dictionary: enough to show what its producers' events share.
TRAIN_AFTER = 1_000
#: The latest events the dictionary is drawn from, and how many of them, spread evenly, go into it.
SAMPLE_FROM = 1_000
SAMPLE_EVENTS = 24
#: Bytes of a dictionary: deflate's window, the farthest back a match can reach.
DICTIONARY_BYTES = 32_768
#: deflate's level (zlib's default: level 1 is faster and packs larger; see docs/benchmarks.md).
LEVEL = 6
#: Dictionaries a process keeps (each :data:`DICTIONARY_BYTES` and deflate's state).
KEPT_DICTIONARIES = 32

_RAW_DEFLATE = -15  # no zlib header or checksum: a few bytes less per event


def dictionary_id(body: bytes) -> int:
    """The id of the dictionary ``body``: its SHA-256's first 8 bytes as a signed 64-bit integer (so a dictionary has
    the same id in every store, and an id names one dictionary for as long as a process runs)."""
    return int.from_bytes(hashlib.sha256(body).digest()[:8], "big", signed=True)


class Dictionary:
    """A payload dictionary: packs and unpacks event texts (thread-safe)."""

    def __init__(self, body: bytes) -> None:
        if not body:
            raise ValueError("a payload dictionary cannot be empty")
        self.body = body
        self.id = dictionary_id(body)
        # Primed once: each event's compressor is a copy (setting a 32 kB dictionary costs more than packing).
        self._primed = zlib.compressobj(LEVEL, zlib.DEFLATED, _RAW_DEFLATE, 8, zlib.Z_DEFAULT_STRATEGY, body)

    def pack(self, text: str) -> bytes:
        packer = self._primed.copy()
        return packer.compress(text.encode()) + packer.flush()

    def unpack(self, packed: bytes) -> str:
        unpacker = zlib.decompressobj(_RAW_DEFLATE, self.body)
        return (unpacker.decompress(packed) + unpacker.flush()).decode()


class PayloadError(RuntimeError):
    """A packed event names a dictionary the store does not hold (its table was edited by hand)."""


_known: dict[int, Dictionary] = {}
_known_lock = threading.Lock()


def _keep(dictionary: Dictionary) -> Dictionary:
    with _known_lock:
        if len(_known) >= KEPT_DICTIONARIES and dictionary.id not in _known:
            _known.pop(next(iter(_known)))
        _known[dictionary.id] = dictionary
    return dictionary


def dictionary(conn: Connection, dictionary_id_: int) -> Dictionary:
    """The dictionary ``dictionary_id_`` of the store, read once per process."""
    found = _known.get(dictionary_id_)
    if found is not None:
        return found
    d = tables.payload_dictionaries.c
    body = conn.execute(select(d.body).where(d.id == dictionary_id_)).scalar()
    if body is None:
        raise PayloadError(
            f"a stored event is packed with payload dictionary {dictionary_id_}, which lineage_payload_dictionaries "
            "does not hold: restore that table's rows from a backup of the store"
        )
    read = Dictionary(bytes(body))
    if read.id != dictionary_id_:
        raise PayloadError(f"payload dictionary {dictionary_id_} holds another dictionary's body ({read.id})")
    return _keep(read)


def payload_columns() -> tuple[Any, Any, Any]:
    """The columns of ``lineage_events`` :func:`text_of` reads an event's text from."""
    e = tables.events.c
    return e.payload, e.packed, e.dictionary_id


def text_of(conn: Connection, payload: str, packed: bytes | None, dictionary_id_: int | None) -> str:
    """A stored event's canonical JSON text, from the columns :func:`payload_columns` names."""
    if packed is None or dictionary_id_ is None:
        return payload
    return dictionary(conn, dictionary_id_).unpack(bytes(packed))


def size_of(dialect: str) -> ColumnElement[int]:
    """SQL: the length of a stored event's text, without reading it (events stored before version 18 have no
    ``size``: their text's length, from the value's header on PostgreSQL); NULL where no event is (an outer join)."""
    e = tables.events.c
    measured = func.octet_length(e.payload) if dialect == "postgresql" else func.length(e.payload)
    return case((e.size.is_not(None), e.size), else_=measured)


@lru_cache(maxsize=4096)
def _listed(namespaces: frozenset[str]) -> str:
    """``namespaces`` as the JSON array a row lists them in (events of a deployment name few distinct sets)."""
    return json.dumps(sorted(namespaces), ensure_ascii=True, separators=(",", ":"))


def stored_columns(text: str, namespaces: frozenset[str], packer: Dictionary | None) -> dict[str, Any]:
    """The ``lineage_events`` columns holding the event ``text`` (packed with ``packer`` when there is one)."""
    columns = {"size": len(text), "namespaces": _listed(namespaces)}
    if packer is None:
        return {"payload": text, "packed": None, "dictionary_id": None, **columns}
    return {"payload": "", "packed": packer.pack(text), "dictionary_id": packer.id, **columns}


def current_dictionary(conn: Connection) -> Dictionary | None:
    """The dictionary new events are packed with, or None while the store has none."""
    s = tables.store_settings.c
    value = conn.execute(select(s.value).where(s.name == DICTIONARY_SETTING)).scalar()
    return None if value is None else dictionary(conn, int(value))


#: Seconds a process packs with the dictionary it last read for a store before reading the setting again (another
#: process may have drawn a new one: any of the store's dictionaries packs correctly, the newest only better).
REREAD_SECONDS = 10.0
#: Seconds at most before a store found without a dictionary, and too small to draw one, is looked at again.
RECOUNT_SECONDS = 60.0


@dataclass
class _Found:
    """What a process last found of a store's dictionary: until when it holds, the dictionary (None: the store had
    none and too few events to draw one), and how many more events this process stores before it counts again."""

    until: float
    dictionary: Dictionary | None
    short_by: int = 0


_found_for: weakref.WeakKeyDictionary[Engine, _Found] = weakref.WeakKeyDictionary()


def dictionary_for_ingest(conn: Connection, storing: int) -> Dictionary | None:
    """The dictionary an ingest storing ``storing`` events packs them with: the store's, or one drawn now if it has
    none and holds :data:`TRAIN_AFTER` events already (in the ingest's transaction; two processes drawing at once
    each store theirs, the later one's becomes the store's).

    What was found is kept for the engine, so that a batch of small events does not pay two more statements: the
    dictionary for :data:`REREAD_SECONDS`; a store too small to draw one until this process has stored the events
    it was short of (others' events only bring the draw nearer), or :data:`RECOUNT_SECONDS`. A dictionary drawn
    now is not kept: its transaction may yet roll back; the next batch reads it from the setting once committed."""
    now = time.monotonic()
    found = _found_for.get(conn.engine)
    if found is not None and now < found.until:
        if found.dictionary is not None:
            return found.dictionary
        if found.short_by > 0:
            found.short_by -= storing
            return None
    dictionary = current_dictionary(conn)
    if dictionary is not None:
        _found_for[conn.engine] = _Found(now + REREAD_SECONDS, dictionary)
        return dictionary
    held = select(tables.events.c.id).limit(TRAIN_AFTER).subquery()
    count = conn.execute(select(func.count()).select_from(held)).scalar_one()
    if count < TRAIN_AFTER:
        _found_for[conn.engine] = _Found(now + RECOUNT_SECONDS, None, TRAIN_AFTER - count - storing)
        return None
    return draw_dictionary(conn)


def draw_dictionary(conn: Connection) -> Dictionary | None:
    """Draw a dictionary from the store's latest events and make it the one new events are packed with
    (None when the store holds no event)."""
    e = tables.events.c
    latest = conn.execute(select(e.id).order_by(e.id.desc()).limit(SAMPLE_FROM)).scalars().all()
    if not latest:
        return None
    picked = latest[:: max(1, len(latest) // SAMPLE_EVENTS)][:SAMPLE_EVENTS]
    rows = conn.execute(select(*payload_columns()).where(e.id.in_(picked)).order_by(e.id)).all()
    body = "".join(text_of(conn, *row) for row in rows).encode()[-DICTIONARY_BYTES:]  # latest last: nearest matches
    drawn = _keep(Dictionary(body))
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    row = {"id": drawn.id, "created_at": datetime.now(timezone.utc), "body": body}
    conn.execute(dialect_insert(tables.payload_dictionaries).values(row).on_conflict_do_nothing(index_elements=["id"]))
    write_setting(conn, DICTIONARY_SETTING, str(drawn.id))
    return drawn
