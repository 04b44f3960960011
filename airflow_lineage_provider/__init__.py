"""airflow-lineage-provider: declared OpenLineage lineage for custom Airflow code, delivered durably.

The public API is exposed lazily: Airflow imports this package's provider-info entry point while its
own configuration is still initialising, so importing the package must not import Airflow.

Example::

    from airflow_lineage_provider import lineage_run

    with lineage_run("load_orders", inputs=["raw/orders"], outputs=["main/orders"]) as run:
        copy_rows()
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from airflow_lineage_provider.version import __version__

if TYPE_CHECKING:
    from airflow_lineage_provider.operators.mixin import LineageMixin
    from airflow_lineage_provider.producer.dataset_facets import column_lineage_facet, schema_facet
    from airflow_lineage_provider.producer.emit import EventType, emit_lineage
    from airflow_lineage_provider.producer.run import LineageRun, lineage_run

_EXPORTS = {
    "lineage_run": "airflow_lineage_provider.producer.run",
    "LineageRun": "airflow_lineage_provider.producer.run",
    "emit_lineage": "airflow_lineage_provider.producer.emit",
    "EventType": "airflow_lineage_provider.producer.emit",
    "schema_facet": "airflow_lineage_provider.producer.dataset_facets",
    "column_lineage_facet": "airflow_lineage_provider.producer.dataset_facets",
    "LineageMixin": "airflow_lineage_provider.operators.mixin",
}

__all__ = [
    "EventType",
    "LineageMixin",
    "LineageRun",
    "__version__",
    "column_lineage_facet",
    "emit_lineage",
    "lineage_run",
    "schema_facet",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_lineage_provider' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
