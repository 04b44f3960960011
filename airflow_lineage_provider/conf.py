"""Getters for the ``[lineage_provider]`` configuration section, one per option.

Each reads Airflow's configuration (``airflow.cfg`` or ``AIRFLOW__LINEAGE_PROVIDER__<OPTION>``); a changed
``AIRFLOW__LINEAGE_PROVIDER__*`` variable takes effect at once. Defaults are the ones declared in
:mod:`airflow_lineage_provider.get_provider_info`.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING

from airflow_lineage_provider.defaults import GRAPH_CACHE_NODES, INGEST_APPLY_MODES, MAX_BODY_BYTES
from airflow_lineage_provider.get_provider_info import CONFIG
from airflow_lineage_provider.version import __version__

if TYPE_CHECKING:
    from airflow_lineage_provider.namespace_aliases import NamespaceAliases

SECTION = "lineage_provider"
DEFAULT_PRODUCER = f"https://pypi.org/project/airflow-lineage-provider/{__version__}/"


def _get(option: str) -> str:
    # Reading Airflow's configuration costs tens of microseconds and options are read for every facet:
    # cache per value of the option's environment variable, so ``AIRFLOW__LINEAGE_PROVIDER__*`` changes
    # still take effect at once (airflow.cfg edits need a new process, as for Airflow itself).
    return _read(option, os.environ.get(f"AIRFLOW__{SECTION.upper()}__{option.upper()}"))


@lru_cache(maxsize=256)
def _read(option: str, env_value: str | None) -> str:
    from airflow.configuration import conf

    default = CONFIG[SECTION]["options"][option]["default"]
    return str(conf.get(SECTION, option, fallback=default))


def namespace() -> str:
    """``[lineage_provider] namespace``: namespace of datasets no connector names (default ``default``)."""
    return _get("namespace") or "default"


def producer() -> str:
    """``[lineage_provider] producer``: the producer URI of events and facets this package builds."""
    return _get("producer") or DEFAULT_PRODUCER


def schema_lookup_timeout() -> float | None:
    """``[lineage_provider] schema_lookup_timeout``: seconds all schema lookups of a run may take (None: no limit).

    A value that is not a number falls back to the default of 5 s (the lookup is an enrichment, never a
    reason to fail a task).
    """
    try:
        value = float(_get("schema_lookup_timeout") or 5)
    except ValueError:
        value = 5.0
    return value if value > 0 else None


def strict() -> bool:
    """``[lineage_provider] strict``: raise on API misuse instead of logging and skipping."""
    return _get("strict").strip().lower() in ("true", "1", "t", "yes", "on")


def information_supply_chain() -> str:
    """``[lineage_provider] information_supply_chain``: default Egeria supply chain (empty: none)."""
    return _get("information_supply_chain").strip()


def egeria_governance_action() -> str:
    """``[lineage_provider] egeria_governance_action``: default governance action, a JSON object (empty: none)."""
    return _get("egeria_governance_action").strip()


def extractor_operators() -> list[str]:
    """``[lineage_provider] extractor_operators``: operator class names the declared-lineage extractor handles."""
    return [name.strip() for name in _get("extractor_operators").replace(",", ";").split(";") if name.strip()]


def _as_bool(value: str) -> bool:
    return value.strip().lower() in ("true", "1", "t", "yes", "on")


def outbox_url() -> str:
    """``[lineage_provider] outbox_url``: the outbox's SQLAlchemy URL (default: SQLite under ``$AIRFLOW_HOME``)."""
    configured = _get("outbox_url").strip()
    if configured:
        return configured
    from airflow.configuration import AIRFLOW_HOME

    return f"sqlite:///{AIRFLOW_HOME}/lineage_outbox.db"


def outbox_spill_dir() -> str:
    """``[lineage_provider] outbox_spill_dir``: folder for events the outbox could not take (empty: derived)."""
    return _get("outbox_spill_dir").strip()


def retention_days() -> float:
    """``[lineage_provider] retention_days``: days delivered events stay in the outbox (default 7)."""
    return float(_get("retention_days") or 7)


def export_conn_id() -> str:
    """``[lineage_provider] export_conn_id``: the ``openlineage`` connection the export DAG ships to."""
    return _get("export_conn_id").strip()


def export_path() -> str:
    """``[lineage_provider] export_path``: where the export DAG writes NDJSON files (empty: no export)."""
    return _get("export_path").strip()


def export_compress() -> bool:
    """``[lineage_provider] export_compress``: gzip the exported files."""
    return _as_bool(_get("export_compress"))


def export_schedule() -> str:
    """``[lineage_provider] export_schedule``: schedule of the ``openlineage_export`` DAG (default every 5 min)."""
    return _get("export_schedule").strip() or "*/5 * * * *"


def export_time_budget() -> float:
    """``[lineage_provider] export_time_budget``: seconds one export DAG run may spend shipping (default 240)."""
    return float(_get("export_time_budget") or 240)


def export_batch_size() -> int:
    """``[lineage_provider] export_batch_size``: events per shipping request (default 500)."""
    return int(_get("export_batch_size") or 500)


def export_dag_lineage() -> bool:
    """``[lineage_provider] export_dag_lineage``: let the export DAG's own tasks emit lineage (default off)."""
    return _as_bool(_get("export_dag_lineage"))


def publish_dags() -> bool:
    """``[lineage_provider] publish_dags``: the export DAG publishes design-time lineage (default on)."""
    return _as_bool(_get("publish_dags"))


def publish_metadata_conn_id() -> str:
    """``[lineage_provider] publish_metadata_conn_id``: connection to the metadata database for publication."""
    return _get("publish_metadata_conn_id").strip()


def dag_run_egeria_facets() -> bool:
    """``[lineage_provider] dag_run_egeria_facets``: Egeria facets on DAG runs too (default on)."""
    return _as_bool(_get("dag_run_egeria_facets"))


def prepare_task_processes() -> bool:
    """``[lineage_provider] prepare_task_processes``: import what task events need in the scheduler (default on)."""
    return _as_bool(_get("prepare_task_processes"))


def consumer_plugin() -> bool:
    """``[lineage_provider] consumer_plugin``: mount the consumer in the Airflow API server (default on)."""
    return _as_bool(_get("consumer_plugin"))


def consumer_store_url() -> str:
    """``[lineage_provider] consumer_store_url``: the consumer's store (default: SQLite under ``$AIRFLOW_HOME``)."""
    url = _get("consumer_store_url").strip()
    if url:
        return url
    from airflow.configuration import AIRFLOW_HOME

    return f"sqlite:///{AIRFLOW_HOME}/lineage_consumer.db"


def consumer_api_key() -> str | None:
    """``[lineage_provider] consumer_api_key``: the consumer's write key for producers (None: none)."""
    return _get("consumer_api_key").strip() or None


def consumer_keys_file() -> str | None:
    """``[lineage_provider] consumer_keys_file``: JSON file of consumer keys with scopes (None: none)."""
    return _get("consumer_keys_file").strip() or None


def consumer_anonymous_access() -> str | None:
    """``[lineage_provider] consumer_anonymous_access``: ``read``, ``write`` or ``admin``; None for ``none``."""
    value = _get("consumer_anonymous_access").strip().lower()
    return None if value in ("", "none") else value


def consumer_user_namespaces() -> str:
    """``[lineage_provider] consumer_user_namespaces``: ``user:NAME``, ``role:NAME`` or ``team:NAME`` ``=`` namespace
    patterns, by line or ``;`` (Airflow users limited as namespace-limited keys; empty: every user sees all), as
    written: the consumer parses it (:meth:`.consumer.security.access.UserScopes.parse`)."""
    return _get("consumer_user_namespaces")


def consumer_auth_cache_seconds() -> float:
    """``[lineage_provider] consumer_auth_cache_seconds``: how long a token's decision is kept (default 5 s)."""
    value = _get("consumer_auth_cache_seconds").strip()
    seconds = float(value) if value else 5.0
    if seconds < 0:
        raise ValueError(f"consumer_auth_cache_seconds must be 0 (no cache) or more, got {value!r}")
    return seconds


def consumer_max_body_bytes() -> int:
    """``[lineage_provider] consumer_max_body_bytes``: largest ingest body in bytes (default 16 MiB)."""
    return int(_get("consumer_max_body_bytes") or MAX_BODY_BYTES)


def consumer_strict() -> bool:
    """``[lineage_provider] consumer_strict``: reject events the OpenLineage JSON schema rejects."""
    return _as_bool(_get("consumer_strict"))


def consumer_batch_answers() -> str:
    """``[lineage_provider] consumer_batch_answers``: ``summary`` (default) or ``feast``, the status codes of
    ``POST /api/v1/lineage/batch`` (docs/consumer.md, "Feast's consumer API")."""
    return _get("consumer_batch_answers").strip().lower() or "summary"


def consumer_spec_dir() -> str | None:
    """``[lineage_provider] consumer_spec_dir``: the OpenLineage spec folder strict mode reads."""
    return _get("consumer_spec_dir").strip() or None


def consumer_max_batch_events() -> int:
    """``[lineage_provider] consumer_max_batch_events``: most events per ingest request (default 10,000)."""
    return _positive_int("consumer_max_batch_events")


def consumer_max_clock_skew_hours() -> float:
    """``[lineage_provider] consumer_max_clock_skew_hours``: how far ahead an eventTime may be (default 24)."""
    return _number("consumer_max_clock_skew_hours", "a number of hours")


def consumer_upload_timeout_seconds() -> float:
    """``[lineage_provider] consumer_upload_timeout_seconds``: longest an ingest body may take to arrive (default
    60)."""
    seconds = _number("consumer_upload_timeout_seconds", "a number of seconds")
    if not seconds > 0:
        raise ValueError(f"consumer_upload_timeout_seconds must be more than 0, got {seconds}")
    return seconds


def consumer_max_concurrent_walks() -> int:
    """``[lineage_provider] consumer_max_concurrent_walks``: walks computed at once per process (default 4)."""
    return _positive_int("consumer_max_concurrent_walks")


def consumer_walk_timeout_seconds() -> float:
    """``[lineage_provider] consumer_walk_timeout_seconds``: longest a walk may take before it is cancelled and
    answered 504 (default 30)."""
    seconds = _number("consumer_walk_timeout_seconds", "a number of seconds")
    if not seconds > 0:
        raise ValueError(f"consumer_walk_timeout_seconds must be more than 0, got {seconds}")
    return seconds


def consumer_max_answer_bytes() -> int:
    """``[lineage_provider] consumer_max_answer_bytes``: most bytes of stored values one listing page may show
    (default 32 MiB)."""
    return _positive_int("consumer_max_answer_bytes")


def consumer_ingest_group_wait_ms() -> float:
    """``[lineage_provider] consumer_ingest_group_wait_ms``: how long concurrent single-event ingests may wait for
    each other to be committed together, in milliseconds (default 2; 0: never)."""
    return _number("consumer_ingest_group_wait_ms", "a number of milliseconds (0 to 1000)")


def consumer_ingest_apply() -> str:
    """``[lineage_provider] consumer_ingest_apply``: ``auto`` (default: deferred on PostgreSQL, inline on SQLite),
    ``inline`` or ``deferred`` (an ingest log applied in batches after the answer:
    ``consumer/store/write/deferred_apply.py``)."""
    value = _get("consumer_ingest_apply").strip().lower()
    if value not in INGEST_APPLY_MODES:
        raise ValueError(f"consumer_ingest_apply must be one of {', '.join(INGEST_APPLY_MODES)}, got {value!r}")
    return value


def consumer_ingest_log_max_events() -> int:
    """``[lineage_provider] consumer_ingest_log_max_events``: with deferred apply, most events the ingest log may
    hold before ingests are answered 503 (default 10,000)."""
    return _positive_int("consumer_ingest_log_max_events")


def consumer_ingest_log_max_bytes() -> int:
    """``[lineage_provider] consumer_ingest_log_max_bytes``: the same in bytes of raw events (default 8 MiB)."""
    return _positive_int("consumer_ingest_log_max_bytes")


def consumer_ingest_apply_timeout_seconds() -> float:
    """``[lineage_provider] consumer_ingest_apply_timeout_seconds``: with deferred apply, longest applying a batch
    may take; an event slower alone is set aside (default 10)."""
    seconds = _number("consumer_ingest_apply_timeout_seconds", "a number of seconds")
    if not seconds > 0:
        raise ValueError(f"consumer_ingest_apply_timeout_seconds must be more than 0, got {seconds}")
    return seconds


def _number(option: str, expected: str) -> float:
    """The option as a float; a ValueError naming the option, what it takes (``expected``) and the value."""
    value = _get(option).strip()
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{option} must be {expected}, got {value!r}") from None


def _positive_int(option: str) -> int:
    value = _get(option).strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{option} must be a whole number of at least 1, got {value!r}")
    return int(value)


def consumer_graph_cache_nodes() -> int:
    """``[lineage_provider] consumer_graph_cache_nodes``: graph cards kept in memory (default 20,000)."""
    value = _get("consumer_graph_cache_nodes").strip()
    return int(value) if value else GRAPH_CACHE_NODES


def consumer_retention_days() -> float | None:
    """``[lineage_provider] consumer_retention_days``: days of raw events and runs kept (None: all; 0: off, None).

    The consumer's ``retention_days``; ``[lineage_provider] retention_days`` is the outbox's.
    """
    value = _get("consumer_retention_days").strip()
    days = float(value) if value else None
    return days or None  # 0 means off, as for ``airflow-lineage serve --retention-days 0``


def consumer_retention_check_interval_hours() -> float:
    """``[lineage_provider] consumer_retention_check_interval_hours``: how often the consumer prunes (default 24)."""
    value = _get("consumer_retention_check_interval_hours").strip() or "24"
    try:
        hours = float(value)
    except ValueError:
        hours = 0.0
    if not hours > 0:
        raise ValueError(f"consumer_retention_check_interval_hours must be a number of hours above 0, got {value!r}")
    return hours


def consumer_namespace_aliases() -> NamespaceAliases:
    """``[lineage_provider] consumer_namespace_aliases``: ``alias=canonical`` entries, by newline or comma."""
    from airflow_lineage_provider.namespace_aliases import NamespaceAliases

    try:
        return NamespaceAliases.parse(_get("consumer_namespace_aliases"))
    except ValueError as error:
        raise ValueError(f"consumer_namespace_aliases: {error}") from None
