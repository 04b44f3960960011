"""The ``openlineage`` connection type: where an OpenLineage HTTP consumer is, and how to reach it.

Fields: ``schema`` = ``http`` or ``https`` (default ``http``), ``host``, ``port``, ``password`` = API key
(sent as ``Authorization: Bearer``); extra ``endpoint`` (default ``api/v1/lineage``), ``timeout``
(seconds, default 10), ``compress`` (gzip bodies) and ``verify`` (TLS verification, or a CA bundle path).
A host may also be given as a full URL (``https://marquez:5000/base``).

Example, as an environment variable::

    AIRFLOW_CONN_OPENLINEAGE_DEFAULT='{"conn_type": "openlineage", "host": "marquez", "port": 5000,
                                       "schema": "http", "extra": {"endpoint": "api/v1/lineage"}}'
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from airflow_lineage_provider.defaults import LINEAGE_ENDPOINT
from airflow_lineage_provider.outbox.consumer_client import ConsumerConfig


def consumer_config_from_connection(conn: Any) -> ConsumerConfig:
    """A :class:`ConsumerConfig` from an Airflow ``Connection`` of type ``openlineage``."""
    host = (conn.host or "").strip()
    if not host:
        raise ValueError(f"connection {conn.conn_id!r} has no host; set the consumer's host name (and port)")
    if "://" in host:
        url = host.rstrip("/")
    else:
        scheme = (conn.schema or "http").strip().lower()
        if scheme not in ("http", "https"):
            raise ValueError(f"connection {conn.conn_id!r} has schema {conn.schema!r}; use http or https")
        url = f"{scheme}://{host}" + (f":{conn.port}" if conn.port else "")
    extra = conn.extra_dejson or {}
    return ConsumerConfig.from_dict(
        {
            "url": url,
            "endpoint": extra.get("endpoint") or LINEAGE_ENDPOINT,
            "api_key": conn.password or extra.get("api_key"),
            "timeout": extra.get("timeout") or 10,
            "compress": extra.get("compress", False),
            "verify": extra.get("verify", True),
        }
    )


class OpenLineageConsumerHook(BaseHook):
    """Reads an ``openlineage`` connection into the settings the outbox shipper uses."""

    conn_name_attr = "openlineage_conn_id"
    default_conn_name = "openlineage_default"
    conn_type = "openlineage"
    hook_name = "OpenLineage consumer"

    def __init__(self, openlineage_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.openlineage_conn_id = openlineage_conn_id

    def consumer_config(self) -> ConsumerConfig:
        """The consumer's URL, endpoint, API key and HTTP options from the connection."""
        return consumer_config_from_connection(self.get_connection(self.openlineage_conn_id))

    def test_connection(self) -> tuple[bool, str]:
        """Whether the consumer answers over HTTP at all (any status counts: it is there)."""
        import requests

        try:
            config = self.consumer_config()
            response = requests.get(config.url, timeout=config.timeout, verify=config.verify)
        except Exception as error:
            return False, str(error)
        return True, f"{config.url} answered HTTP {response.status_code}"
