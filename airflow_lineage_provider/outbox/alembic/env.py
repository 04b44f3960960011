"""Alembic environment of the outbox: see :mod:`airflow_lineage_provider.outbox.migrations`."""

from airflow_lineage_provider.schema_migrations import run_migrations

run_migrations()
