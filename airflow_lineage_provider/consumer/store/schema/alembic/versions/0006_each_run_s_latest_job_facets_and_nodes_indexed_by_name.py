"""Version 6: each run's latest job facets, and nodes indexed by name."""

from __future__ import annotations

import json
from typing import Any

from alembic import op
from sqlalchemy import Connection, Text, bindparam, case, cast, column, func, literal, select, table, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.elements import ColumnElement

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _run_job_facets(op.get_bind())


#: Version 5's tables, as far as this revision reads and writes them. Times are read and written back as the
#: database answers them (text on SQLite), never converted.
_events = table("lineage_events", column("id"), column("run_uuid"), column("event_time"), column("payload", Text))
_runs = table("lineage_runs", column("run_uuid"), column("job_facets"), column("job_facets_time"))

#: Runs a page at a time, in run id order after the last one of the page before.
_V5_RUNS = "SELECT run_uuid FROM lineage_runs WHERE run_uuid > :after ORDER BY run_uuid LIMIT 1000"


def _run_job_facets(conn: Connection) -> None:
    """Version 6: ``lineage_runs.job_facets`` (and its time), so a job version is read without parsing events;
    the index on nodes' kind and namespace gains the name, so a page of jobs or datasets is read in order.

    Each run gets the job facets of its latest event that carried some (by event time, then by the order
    stored), as the ingest keeps them from now on, read from the stored events a page of runs at a time.
    """
    postgres = conn.dialect.name == "postgresql"
    timestamp = "TIMESTAMP WITH TIME ZONE" if postgres else "DATETIME"
    conn.exec_driver_sql("CREATE INDEX ix_lineage_nodes_kind_namespace_name ON lineage_nodes (kind, namespace, name)")
    conn.exec_driver_sql("DROP INDEX ix_lineage_nodes_kind_namespace")
    conn.exec_driver_sql("ALTER TABLE lineage_runs ADD COLUMN job_facets TEXT")
    conn.exec_driver_sql(f"ALTER TABLE lineage_runs ADD COLUMN job_facets_time {timestamp}")
    e, r = _events.c, _runs.c
    member = _json_member(e.payload, ("job", "facets"), conn.dialect.name)
    holds_nul = e.payload.contains("\\u0000", autoescape=True)
    set_facets = (
        _runs.update()
        .where(r.run_uuid == bindparam("b_run"))
        .values(job_facets=bindparam("b_facets"), job_facets_time=bindparam("b_at"))
    )
    after = ""
    while runs := conn.execute(text(_V5_RUNS), {"after": after}).scalars().all():
        after = runs[-1]
        query = (
            select(e.run_uuid, e.event_time, member.label("facets"), case((holds_nul, e.payload)).label("payload"))
            .where(e.run_uuid.in_(runs))
            .order_by(e.run_uuid, e.event_time, e.id)
        )
        latest: dict[str, tuple[str, Any]] = {}
        for run_uuid, event_time, facets_text, payload in conn.execute(query):
            # PostgreSQL reads a \u0000 escape as U+FFFD: an event holding one is read whole, as it said it.
            facets = _member_value(facets_text) if payload is None else json.loads(payload).get("job", {}).get("facets")
            if isinstance(facets, dict) and facets:
                latest[run_uuid] = (json.dumps(facets, sort_keys=True), event_time)
        if latest:
            rows = [{"b_run": run, "b_facets": facets, "b_at": at} for run, (facets, at) in latest.items()]
            conn.execute(set_facets, rows)


def _json_member(column_: Any, path: tuple[str, ...], dialect: str) -> ColumnElement[Any]:
    """SQL for the member at ``path`` of the JSON text ``column_``, as JSON text (NULL when absent). PostgreSQL
    refuses to read a ``\\u0000`` escape: there it is read as U+FFFD."""
    if dialect == "postgresql":
        value: Any = cast(func.replace(column_, "\\u0000", "\\ufffd"), postgresql.JSON)
        for key in path:
            value = value.op("->")(literal(key, Text))
        return cast(value, Text)
    quoted = ".".join(json.dumps(key) for key in path)
    return column_.op("->")(literal(f"$.{quoted}", Text))


def _member_value(text_: Any) -> Any:
    """A member read by :func:`_json_member`, decoded (None when absent or unreadable)."""
    if not isinstance(text_, str) or not text_:
        return None
    try:
        return json.loads(text_)
    except ValueError:
        return None
