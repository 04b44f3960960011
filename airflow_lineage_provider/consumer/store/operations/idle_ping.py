"""Check a pooled PostgreSQL connection before use only when it has been idle: a busy writer pays no ping.

SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` on every checkout: one more round trip per transaction, about
an eighth of a grouped single-event ingest's time on PostgreSQL. A connection checked in less than
:data:`PING_AFTER_IDLE_SECONDS` ago was working then; one idle for longer may have been closed by the server
(a restart, ``idle_session_timeout``, a proxy), and is pinged as ``pool_pre_ping`` would. A ping that fails
with a disconnect makes the pool replace the connection (SQLAlchemy's documented ``DisconnectionError`` from a
checkout listener), so the request that asked for it never sees the dead one.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

#: Seconds a pooled connection may have been idle and still be used without a ping.
PING_AFTER_IDLE_SECONDS = 1.0
_IDLE_SINCE = "lineage_idle_since"


def ping_idle_connections(engine: Engine) -> None:
    """Ping ``engine``'s pooled connections at checkout when idle past :data:`PING_AFTER_IDLE_SECONDS`
    (use instead of ``pool_pre_ping``)."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_SECONDS:
            return  # just connected, or in use a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as error:
            if dialect.is_disconnect(error, dbapi_connection, None):
                raise DisconnectionError(f"a pooled connection idle since {since:.0f} was closed: {error}") from error
            raise
