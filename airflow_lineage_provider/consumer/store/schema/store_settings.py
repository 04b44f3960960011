"""The store's own settings (``lineage_store_settings``): its identity and what its derived tables assume.

* ``store_id`` — a random id the store gets when it is created (or upgraded to schema 8) and a new one
  whenever it is emptied by a reset: what a process remembers about a store (:mod:`.ingest` remembers which
  producers it already recorded) is valid only for the same id, in any process.
* ``namespace_aliases`` — the namespace aliases its dataset groups were derived with (:mod:`.identity`).
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from sqlalchemy import Connection, literal, select, union_all
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.consumer.store.schema import tables

STORE_ID = "store_id"
NAMESPACE_ALIASES = "namespace_aliases"

_s = tables.store_settings.c


def read_settings(conn: Connection) -> dict[str, str]:
    """Every setting of the store, ``name → value`` (one statement)."""
    return dict(conn.execute(select(_s.name, _s.value)).all())


#: The name :func:`read_settings_and_claims` answers, with the settings, when any dataset claims another name.
ANY_CLAIM = "(any claim)"


@cache
def _settings_and_claims() -> Any:
    sym = tables.symlinks.c
    probe = (
        select(literal(ANY_CLAIM).label("name"), sym.alias_key.label("value"))
        .where(sym.alias_key.is_not(None))
        .limit(1)
        .subquery("any_claim")
    )
    return union_all(select(_s.name, _s.value), select(probe.c.name, probe.c.value))


def read_settings_and_claims(conn: Connection) -> tuple[dict[str, str], bool]:
    """Every setting, and whether any dataset claims another name (``lineage_symlinks``), in one statement:
    what every ingest batch reads first (see :mod:`.ingest` and :func:`.identity.ungrouped_candidates`)."""
    settings = dict(conn.execute(_settings_and_claims()).all())
    return settings, settings.pop(ANY_CLAIM, None) is not None


def write_setting(conn: Connection, name: str, value: str) -> None:
    """Set ``name`` to ``value`` (in the open transaction), in one statement: two transactions setting the same
    name at once never fail on its key (the later one's value stays)."""
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(tables.store_settings).values(name=name, value=value)
    conn.execute(statement.on_conflict_do_update(index_elements=["name"], set_={"value": statement.excluded.value}))


def new_store_id(conn: Connection) -> str:
    """Give the store a new random id (a new store, or one emptied by a reset) and answer it."""
    value = str(uuid.uuid4())
    write_setting(conn, STORE_ID, value)
    return value
