"""The lineage page: the graph around a job or dataset, drawn in the browser from the consumer's own API.

Served by the consumer app at ``/ui`` (``/lineage/ui`` inside Airflow). Hand-written HTML, CSS and
JavaScript in ``assets/``, no third-party code: a left-to-right layered DAG layout drawn in SVG.

Example::

    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.ui import lineage_ui_router

    app = create_app("sqlite:////tmp/lineage.db", extra_routers=[lineage_ui_router()])
"""

from __future__ import annotations

from airflow_lineage_provider.consumer.ui.router import UI_PATH, lineage_ui_router

__all__ = ["UI_PATH", "lineage_ui_router"]
