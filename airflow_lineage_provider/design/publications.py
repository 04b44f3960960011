"""What was published for each DAG: a small table of our own in the outbox database.

``lineage_design_publications`` holds, per DAG, the serialized version (Airflow's ``dag_hash``) whose
lineage was last appended to the outbox and the jobs that publication declared. It sits in the outbox
database so that a DAG's events and its row are written in one transaction: a pass that fails half-way
leaves the DAG to be published again, never recorded as published without its events.

The table belongs to design-time publication, not to the outbox's schema: it is created on first use
(``CREATE TABLE IF NOT EXISTS``) and never altered; a new layout would be a new table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Column, Connection, DateTime, Engine, Integer, MetaData, String, Table, Text, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from airflow_lineage_provider.outbox.store import utcnow

metadata = MetaData()

publications = Table(
    "lineage_design_publications",
    metadata,
    Column("dag_id", String(250), primary_key=True),
    Column("dag_hash", String(64), nullable=False),
    Column("jobs", Text, nullable=False),  # JSON list of the job names the publication declared
    Column("events", Integer, nullable=False),
    Column("published_at", DateTime, nullable=False),
)


@dataclass(frozen=True)
class Publication:
    """The last publication of one DAG."""

    dag_id: str
    dag_hash: str
    jobs: tuple[str, ...]


def ensure_table(engine: Engine) -> None:
    """Create the table in the outbox database if it is not there (safe when several processes race)."""
    try:
        metadata.create_all(engine, checkfirst=True)
    except Exception:
        # Another process created it between the check and the CREATE: fine if it exists now.
        from sqlalchemy import inspect

        with engine.connect() as conn:
            if not inspect(conn).has_table(publications.name):
                raise


def published(conn: Connection, dag_ids: Sequence[str] | None = None) -> dict[str, Publication]:
    """The last publication of every DAG (or of ``dag_ids``), by DAG id."""
    statement = select(publications.c.dag_id, publications.c.dag_hash, publications.c.jobs)
    if dag_ids is not None:
        statement = statement.where(publications.c.dag_id.in_(list(dag_ids)))
    return {
        dag_id: Publication(dag_id, dag_hash, tuple(json.loads(jobs)))
        for dag_id, dag_hash, jobs in conn.execute(statement)
    }


def record(conn: Connection, dag_id: str, dag_hash: str, jobs: Iterable[str], events: int) -> None:
    """Remember that ``dag_id`` at ``dag_hash`` was published, declaring ``jobs`` in ``events`` events."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    values = {
        "dag_id": dag_id,
        "dag_hash": dag_hash,
        "jobs": json.dumps(sorted(jobs)),
        "events": events,
        "published_at": utcnow(),
    }
    statement = dialect.insert(publications).values(values)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[publications.c.dag_id],
            set_={key: statement.excluded[key] for key in ("dag_hash", "jobs", "events", "published_at")},
        )
    )


def forget(conn: Connection, dag_id: str) -> None:
    """Drop the record of a DAG that no longer exists (its jobs were retired)."""
    conn.execute(delete(publications).where(publications.c.dag_id == dag_id))
