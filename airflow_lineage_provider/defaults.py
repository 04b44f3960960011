"""Defaults shared by the producer, the outbox and the consumer, each said once.

A module importing only the standard library, so that every side (the Airflow-free outbox and consumer included)
can read it.
"""

from __future__ import annotations

import os

#: The OpenLineage HTTP ingest path, relative to a consumer's base URL (the stock HTTP transport's default).
LINEAGE_ENDPOINT = "api/v1/lineage"

#: The largest request body the consumer reads (also after gunzip): 16 MiB.
MAX_BODY_BYTES = 16 * 1024 * 1024

#: Nodes whose graph data (and job objects) the consumer keeps in memory, by node version.
GRAPH_CACHE_NODES = 20_000

#: How the consumer applies ingested events to the graph when its settings do not say: ``inline`` (in the ingest's
#: transaction), ``deferred`` (logged, answered, applied in batches after: ``consumer/store/write/deferred_apply.py``)
#: or ``auto``: deferred on PostgreSQL, inline on SQLite (the faster on each: ``docs/consumer.md``, "Guarantees");
#: ``LINEAGE_INGEST_APPLY`` in the environment changes it (the test suite runs each way with it).
INGEST_APPLY = os.environ.get("LINEAGE_INGEST_APPLY", "auto").strip().lower()
#: The values of ``ingest_apply``.
INGEST_APPLY_MODES = ("auto", "inline", "deferred")
