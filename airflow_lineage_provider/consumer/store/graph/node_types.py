"""A node's type from its facets (never a constant), in Marquez's words: shown on graph nodes and Marquez's answers.

Marquez's ``JobType`` is ``BATCH``, ``STREAM`` or ``SERVICE``; its ``DatasetType`` ``DB_TABLE`` or ``STREAM``.
OpenLineage says the first in the ``jobType`` job facet (``processingType`` ``BATCH`` / ``STREAMING``, ``jobType``
such as ``QUERY``, ``DAG``, ``TASK``) and the second in the ``datasetType`` dataset facet (``TABLE``, ``VIEW``,
``STREAM``, ``TOPIC``, ``FILE``, ...) or, for older producers, a ``dataSource`` URI whose scheme is a stream's
(``kafka://``, ``kinesis://``, ``pulsar://``). With nothing said, the answer is Marquez's own default for an
OpenLineage job or dataset: ``BATCH`` and ``DB_TABLE``.
"""

from __future__ import annotations

from typing import Any

#: URI schemes of streams (a ``dataSource`` facet's ``uri``, or the dataset's namespace).
STREAM_SCHEMES = ("kafka", "kinesis", "pulsar", "pubsub", "eventhubs", "rabbitmq")
#: ``datasetType`` facet values that are streams.
STREAM_DATASET_TYPES = {"STREAM", "TOPIC"}


def _facet(facets: dict[str, Any] | None, name: str) -> dict[str, Any]:
    value = (facets or {}).get(name)
    return value if isinstance(value, dict) else {}


def job_type(facets: dict[str, Any] | None) -> str:
    """``STREAM`` for a job whose ``jobType`` facet says ``processingType: STREAMING``, else ``BATCH``."""
    processing = _facet(facets, "jobType").get("processingType")
    return "STREAM" if isinstance(processing, str) and processing.upper() == "STREAMING" else "BATCH"


def _scheme(uri: Any) -> str:
    return uri.split("://", 1)[0].lower() if isinstance(uri, str) and "://" in uri else ""


def dataset_type(facets: dict[str, Any] | None, namespace: str = "") -> str:
    """``STREAM`` for a dataset the events call a stream or topic (or in a stream's namespace), else ``DB_TABLE``."""
    declared = _facet(facets, "datasetType").get("datasetType")
    if isinstance(declared, str) and declared.strip():
        return "STREAM" if declared.strip().upper() in STREAM_DATASET_TYPES else "DB_TABLE"
    source = _facet(facets, "dataSource").get("uri")
    return "STREAM" if _scheme(source) in STREAM_SCHEMES or _scheme(namespace) in STREAM_SCHEMES else "DB_TABLE"


def job_kind(facets: dict[str, Any] | None) -> str | None:
    """What the producer calls the job (``jobType.jobType``: ``QUERY``, ``DAG``, ``TASK``...), if it says."""
    kind = _facet(facets, "jobType").get("jobType")
    return kind if isinstance(kind, str) and kind else None
