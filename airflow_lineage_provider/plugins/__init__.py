"""Airflow plugins of this provider (registered through ``get_provider_info()["plugins"]``)."""
