"""Airflow hooks of this provider (the ``openlineage`` connection type)."""
