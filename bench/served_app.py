"""The consumer app as a uvicorn factory, for serving it from several worker processes in a benchmark.

``uvicorn --factory served_app:make --workers N`` (with this folder on ``PYTHONPATH``) builds in each worker the
app ``airflow-lineage serve`` would build for ``$BENCH_STORE`` with ``$BENCH_INGEST_APPLY`` (``auto`` when unset),
open to this machine — the layout of Airflow's API server, which runs the consumer in each of its workers.
"""

from __future__ import annotations

import os
from typing import Any


def make() -> Any:
    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access

    return create_app(
        store_url=os.environ["BENCH_STORE"],
        anonymous=Access.ADMIN,
        ingest_apply=os.environ.get("BENCH_INGEST_APPLY", "auto"),
    )
