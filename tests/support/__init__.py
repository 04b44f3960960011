"""Test support: OpenLineage schema validation, event capture, Airflow runs."""
