"""The ``openlineage`` connection type: registered by the provider, read into the shipper's settings."""

from __future__ import annotations

import json

import airflow
import pytest
from packaging.version import Version
from support.consumer_server import ConsumerServer

from airflow_lineage_provider.hooks.openlineage import OpenLineageConsumerHook

pytestmark = pytest.mark.airflow  # Airflow-facing: run again on every supported set by scripts/compat.sh


def use_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "openlineage", **fields}))


def test_connection_type_is_registered_by_the_provider() -> None:
    from airflow.providers_manager import ProvidersManager

    hook = ProvidersManager().hooks["openlineage"]
    assert hook is not None
    assert hook.hook_class_name == "airflow_lineage_provider.hooks.openlineage.OpenLineageConsumerHook"
    behaviours = ProvidersManager().field_behaviours
    if Version(airflow.__version__).release < (3, 2):
        # Airflow 3.1 takes a connection type's form labels only from its hook class, through Flask-AppBuilder
        # (not installed with Airflow 3): the provider info's ui-field-behaviour is read from 3.2 on.
        assert "openlineage" not in behaviours or behaviours["openlineage"]["relabeling"]["password"] == "API key"
    else:
        assert behaviours["openlineage"]["relabeling"]["password"] == "API key"


def test_fields_become_the_consumer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"endpoint": "/custom/lineage/", "timeout": "3.5", "compress": "true", "verify": "false"}
    use_connection(
        monkeypatch, "marquez", host="marquez.internal", port=5000, schema="https", password="k3y", extra=extra
    )
    config = OpenLineageConsumerHook("marquez").consumer_config()
    assert (config.url, config.endpoint, config.api_key) == ("https://marquez.internal:5000", "custom/lineage", "k3y")
    assert (config.timeout, config.compress, config.verify) == (3.5, True, False)
    assert config.batch_url == "https://marquez.internal:5000/custom/lineage/batch"


def test_defaults_and_a_full_url_in_host(monkeypatch: pytest.MonkeyPatch) -> None:
    use_connection(monkeypatch, "openlineage_default", host="http://127.0.0.1:9000/base/")
    config = OpenLineageConsumerHook().consumer_config()
    assert (config.url, config.endpoint, config.api_key, config.timeout) == (
        "http://127.0.0.1:9000/base", "api/v1/lineage", None, 10.0)  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"port": 5000}, "has no host"), ({"host": "h", "schema": "ftp"}, "has schema 'ftp'; use http or https")],
)
def test_unusable_connections_are_named(monkeypatch: pytest.MonkeyPatch, fields: dict, message: str) -> None:
    use_connection(monkeypatch, "broken", **fields)
    with pytest.raises(ValueError, match=f"connection 'broken' {message}"):
        OpenLineageConsumerHook("broken").consumer_config()


def test_test_connection_reaches_the_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    with ConsumerServer() as consumer:
        use_connection(monkeypatch, "live", host="127.0.0.1", port=consumer.port)
        ok, message = OpenLineageConsumerHook("live").test_connection()
    assert ok and "answered HTTP" in message
    down = ConsumerServer()
    down.stop()
    use_connection(monkeypatch, "dead", host="127.0.0.1", port=down.port)
    assert OpenLineageConsumerHook("dead").test_connection()[0] is False
