"""Version 6: each run's latest job facets, and nodes indexed by name."""

from __future__ import annotations

import json
from datetime import datetime

from alembic import op
from sqlalchemy import Connection, bindparam, case, select, text

from airflow_lineage_provider.consumer.store import tables
from airflow_lineage_provider.consumer.store.json_paths import json_member, member_value

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _run_job_facets(op.get_bind())


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
    e, r = tables.events.c, tables.runs.c
    member = json_member(e.payload, ("job", "facets"), conn.dialect.name)
    holds_nul = e.payload.contains("\\u0000", autoescape=True)
    set_facets = (
        tables.runs.update()
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
        latest: dict[str, tuple[str, datetime]] = {}
        for run_uuid, event_time, facets_text, payload in conn.execute(query):
            # PostgreSQL reads a \u0000 escape as U+FFFD: an event holding one is read whole, as it said it.
            facets = member_value(facets_text) if payload is None else json.loads(payload).get("job", {}).get("facets")
            if isinstance(facets, dict) and facets:
                latest[run_uuid] = (json.dumps(facets, sort_keys=True), event_time)
        if latest:
            rows = [{"b_run": run, "b_facets": facets, "b_at": at} for run, (facets, at) in latest.items()]
            conn.execute(set_facets, rows)
