"""The Airflow plugin mounting the lineage consumer in the Airflow 3 API server under ``/lineage``.

The ingest endpoint is then ``http://<api-server>/lineage/api/v1/lineage`` and the graph query
``http://<api-server>/lineage/api/v1/lineage?nodeId=...``. The store, API key and limits come from the
``[lineage_provider] consumer_*`` options. Building the app does not touch the store, so loading the
plugin in schedulers and workers costs nothing; the store is opened on the first request.

Airflow does not authenticate requests to mounted apps, so the app does it itself with an
:class:`~airflow_lineage_provider.plugins.airflow_guard.AirflowGuard`: Airflow's JWT (header or the UI's
session cookie) authorized by the configured auth manager, and the consumer's own API keys for producers.
No route answers anonymously unless ``consumer_anonymous_access`` says so (docs/security.md).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_lineage_provider import conf
from airflow_lineage_provider.consumer.security.access import UserScopes

log = logging.getLogger(__name__)

URL_PREFIX = "/lineage"

#: Airflow's navigation entry for the lineage page (docs/ui.md).
LINEAGE_PAGE_VIEW: dict[str, Any] = {
    "name": "Lineage",
    "href": f"{URL_PREFIX}/ui",
    "url_route": "lineage",
    "destination": "nav",
    "nav_top_level": True,
    "icon": f"{URL_PREFIX}/ui/assets/favicon.svg",
}


def user_scopes(text: str) -> UserScopes:
    """``[lineage_provider] consumer_user_namespaces`` parsed, a bad entry named with the option."""
    try:
        return UserScopes.parse(text)
    except ValueError as error:
        raise ValueError(f"[lineage_provider] consumer_user_namespaces: {error}") from None


def consumer_apps() -> list[dict[str, Any]]:
    """The ``fastapi_apps`` entry for the consumer, or none when ``consumer_plugin`` is off or misconfigured."""
    if not conf.consumer_plugin():
        return []
    try:
        from airflow_lineage_provider.consumer import create_app
        from airflow_lineage_provider.consumer.security.access import Access, load_keys_file
        from airflow_lineage_provider.plugins.airflow_guard import AirflowGuard

        keys_file = conf.consumer_keys_file()
        anonymous = conf.consumer_anonymous_access()
        app = create_app(
            store_url=conf.consumer_store_url(),
            api_key=conf.consumer_api_key(),
            keys=tuple(load_keys_file(keys_file)) if keys_file else (),
            anonymous=Access.parse(anonymous) if anonymous else None,
            guard=partial(
                AirflowGuard,
                cache_seconds=conf.consumer_auth_cache_seconds(),
                user_scopes=user_scopes(conf.consumer_user_namespaces()),
            ),
            max_body_bytes=conf.consumer_max_body_bytes(),
            strict=conf.consumer_strict(),
            spec_dir=conf.consumer_spec_dir(),
            batch_answers=conf.consumer_batch_answers(),
            retention_days=conf.consumer_retention_days(),
            retention_check_interval_hours=conf.consumer_retention_check_interval_hours(),
            namespace_aliases=conf.consumer_namespace_aliases(),
            graph_cache_nodes=conf.consumer_graph_cache_nodes(),
            max_batch_events=conf.consumer_max_batch_events(),
            max_clock_skew_hours=conf.consumer_max_clock_skew_hours(),
            upload_seconds=conf.consumer_upload_timeout_seconds(),
            max_concurrent_walks=conf.consumer_max_concurrent_walks(),
            walk_timeout_seconds=conf.consumer_walk_timeout_seconds(),
            max_answer_bytes=conf.consumer_max_answer_bytes(),
            ingest_group_wait_ms=conf.consumer_ingest_group_wait_ms(),
            ingest_apply=conf.consumer_ingest_apply(),
            ingest_log_max_events=conf.consumer_ingest_log_max_events(),
            ingest_log_max_bytes=conf.consumer_ingest_log_max_bytes(),
            ingest_apply_timeout_seconds=conf.consumer_ingest_apply_timeout_seconds(),
        )
    except (ValueError, ImportError) as error:
        log.error("the lineage consumer is not mounted: %s (check [lineage_provider] consumer_* options)", error)
        return []
    return [{"app": app, "url_prefix": URL_PREFIX, "name": "OpenLineage consumer (airflow-lineage-provider)"}]


class LineageConsumerPlugin(AirflowPlugin):
    """Serves the lineage consumer inside the Airflow API server."""

    name = "lineage_consumer"
    fastapi_apps = consumer_apps()
    # The lineage page in Airflow's navigation, embedded at /plugin/lineage (only when the consumer is mounted).
    external_views = [LINEAGE_PAGE_VIEW] if fastapi_apps else []
