"""Alembic environment of the lineage store: see :mod:`airflow_lineage_provider.consumer.store.schema.migrations`."""

from airflow_lineage_provider.schema_migrations import run_migrations

run_migrations()
