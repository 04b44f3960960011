"""Feast's OpenLineage consumer API (``/api/v1/lineage/openlineage/...``) on this consumer's store.

Its paths, parameter names, answer shapes and status codes, so Feast's UI and scripts switch by URL; behind the
same auth dependency and read boundary as every other route (docs/consumer.md, "Feast's consumer API").
"""

from airflow_lineage_provider.consumer.feast.paths import GraphNodePaths
from airflow_lineage_provider.consumer.feast.router import router

__all__ = ["GraphNodePaths", "router"]
