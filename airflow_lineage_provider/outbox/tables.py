"""The outbox's SQL tables (SQLAlchemy Core), declared once for SQLite and PostgreSQL.

* ``lineage_outbox_events``: one row per distinct event (``event_key`` = SHA-256 of its JSON), in
  insertion order (``id``). ``seq`` is the outbox order destinations follow; it is given by the
  sequencer in commit order, so a destination never skips an event whose transaction committed late.
* ``lineage_outbox_destinations``: consumers and file exports fed from the outbox, each with a
  ``frontier`` (highest ``seq`` it has taken into its deliveries).
* ``lineage_outbox_deliveries``: one row per (destination, event): pending, delivered or dead, with
  attempts, backoff (``not_before``), the current claim and the last error.
* ``lineage_outbox_sequencer``: one row holding the last ``seq`` given out (its row lock serialises
  sequencing).
* ``lineage_outbox_schema``: the schema version as releases before Alembic read it (the revision itself is in
  ``lineage_outbox_alembic_version``; see :mod:`~airflow_lineage_provider.outbox.migrations`).

Times are naive UTC datetimes.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

#: ``BIGINT`` on PostgreSQL; ``INTEGER`` on SQLite, where only that type makes an auto-incrementing rowid.
Id = BigInteger().with_variant(Integer(), "sqlite")

PENDING = "pending"
DELIVERED = "delivered"
DEAD = "dead"
#: Event types after which a run's START must not be delivered.
TERMINAL_EVENT_TYPES = ("COMPLETE", "FAIL", "ABORT")

metadata = MetaData()

schema_version = Table(
    "lineage_outbox_schema",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
)

events = Table(
    "lineage_outbox_events",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("event_key", String(64), nullable=False, unique=True),
    Column("seq", BigInteger, nullable=True),
    Column("run_id", String(64), nullable=True),
    Column("event_type", String(16), nullable=True),
    Column("event_time", String(64), nullable=True),
    Column("job_namespace", Text, nullable=True),
    Column("job_name", Text, nullable=True),
    Column("payload", Text, nullable=False),
    Column("stored_at", DateTime, nullable=False),
    Index("ix_lineage_outbox_events_seq", "seq"),
)

destinations = Table(
    "lineage_outbox_destinations",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(500), nullable=False, unique=True),
    Column("kind", String(16), nullable=False),
    Column("target", Text, nullable=False),
    Column("frontier", BigInteger, nullable=False, default=0),
    Column("created_at", DateTime, nullable=False),
)

deliveries = Table(
    "lineage_outbox_deliveries",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("destination_id", BigInteger, ForeignKey("lineage_outbox_destinations.id"), nullable=False),
    Column("event_id", BigInteger, ForeignKey("lineage_outbox_events.id"), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("run_id", String(64), nullable=True),
    Column("event_type", String(16), nullable=True),
    Column("status", String(12), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("not_before", DateTime, nullable=False),
    Column("claim_token", String(32), nullable=True),
    Column("export_file", Text, nullable=True),
    Column("delivered_at", DateTime, nullable=True),
    Column("status_code", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    UniqueConstraint("destination_id", "event_id", name="uq_lineage_outbox_deliveries_destination_event"),
    Index("ix_lineage_outbox_deliveries_claim", "destination_id", "status", "seq"),
    Index("ix_lineage_outbox_deliveries_run", "destination_id", "run_id", "event_type", "status"),
    Index("ix_lineage_outbox_deliveries_event", "event_id"),
    Index("ix_lineage_outbox_deliveries_token", "claim_token"),
)

sequencer = Table(
    "lineage_outbox_sequencer",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("last_seq", BigInteger, nullable=False),
)
