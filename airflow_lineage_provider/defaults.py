"""Defaults shared by the producer, the outbox and the consumer, each said once.

A module without imports, so that every side (the Airflow-free outbox and consumer included) can read it.
"""

from __future__ import annotations

#: The OpenLineage HTTP ingest path, relative to a consumer's base URL (the stock HTTP transport's default).
LINEAGE_ENDPOINT = "api/v1/lineage"

#: The largest request body the consumer reads (also after gunzip): 16 MiB.
MAX_BODY_BYTES = 16 * 1024 * 1024

#: Nodes whose graph data (and job objects) the consumer keeps in memory, by node version.
GRAPH_CACHE_NODES = 20_000
