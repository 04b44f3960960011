"""The lineage consumer: an OpenLineage HTTP endpoint over a SQL lineage store, with fast graph walks.

Example::

    from airflow_lineage_provider.consumer import create_app

    app = create_app(store_url="sqlite:////tmp/lineage.db")  # serve with uvicorn, or mount in Airflow
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_lineage_provider.consumer.app import create_app
    from airflow_lineage_provider.consumer.settings import ConsumerSettings

__all__ = ["ConsumerSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from airflow_lineage_provider.consumer.app import create_app

        return create_app
    if name == "ConsumerSettings":
        from airflow_lineage_provider.consumer.settings import ConsumerSettings

        return ConsumerSettings
    raise AttributeError(f"module 'airflow_lineage_provider.consumer' has no attribute {name!r}")
