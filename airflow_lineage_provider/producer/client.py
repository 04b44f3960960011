"""Where events go.

* ``[openlineage] disabled`` (or ``OPENLINEAGE_DISABLED``) true: nowhere.
* OpenLineage configured for Airflow (``[openlineage] transport``/``config_path``/``config_conn_id``, or
  ``OPENLINEAGE_URL``/``OPENLINEAGE__TRANSPORT__*``): through the stock provider's public
  ``airflow.providers.openlineage.api.emit``, i.e. the listener's own client and transport.
* Otherwise (scripts, notebooks, Airflow without OpenLineage configured): an openlineage-python client
  from its standard configuration (``OPENLINEAGE_CONFIG``, ``openlineage.yml``, environment variables).

Sending never raises: a failing transport is logged once and the event is dropped by the transport's
own rules (use the outbox transport for durable delivery).

Only public APIs of the stock provider are used: its ``api`` module, which redacts secrets,
records its ``ol.emit.*`` metrics and logs the emission exactly as the listener does for its own events.
"""

from __future__ import annotations

import copy
import os
import threading
from functools import lru_cache
from typing import Any

from airflow_lineage_provider.reporting import warn_once

_lock = threading.Lock()
_standalone: tuple[tuple[Any, ...], Any] | None = None


def openlineage_disabled() -> bool:
    """``[openlineage] disabled`` or ``OPENLINEAGE_DISABLED`` is true."""
    if os.getenv("OPENLINEAGE_DISABLED", "").strip().lower() in ("true", "1", "t"):
        return True
    return _disabled_in_airflow(os.getenv("AIRFLOW__OPENLINEAGE__DISABLED"))


@lru_cache(maxsize=16)
def _disabled_in_airflow(env_value: str | None) -> bool:
    """Cached per value of the option's environment variable (read for every event)."""
    from airflow.configuration import conf

    return conf.getboolean("openlineage", "disabled", fallback=False)


def airflow_openlineage_active() -> bool:
    """The stock provider is configured and its listener available (its ``is_openlineage_active``)."""
    return _stock().is_openlineage_active()


class _StockParts:
    """The stock provider's public functions this module calls per event, imported once (an import statement in
    a function costs a microsecond or two per call)."""

    def __init__(self) -> None:
        from airflow.providers.openlineage.api import emit, is_openlineage_active

        self.emit = emit
        self.is_openlineage_active = is_openlineage_active


_stock_parts: _StockParts | None = None


def _stock() -> _StockParts:
    global _stock_parts
    if _stock_parts is None:
        _stock_parts = _StockParts()
    return _stock_parts


def _standalone_client() -> Any:
    """openlineage-python's client from its standard configuration, rebuilt when that configuration changes."""
    from openlineage.client import OpenLineageClient

    global _standalone
    key = (os.getcwd(), tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("OPENLINEAGE"))))
    with _lock:
        if _standalone is None or _standalone[0] != key:
            _standalone = (key, OpenLineageClient())
        return _standalone[1]


def will_emit() -> bool:
    """Whether events would be sent anywhere at all (cheap enough to call per event)."""
    try:
        return not openlineage_disabled()
    except Exception as error:
        warn_once(f"Lineage: could not read the OpenLineage configuration ({error}); events are not sent.")
        return False


def send(event: Any, checked: bool = False) -> bool:
    """Send one event; ``True`` when a transport accepted it. Never raises. ``checked``: the caller asked
    :func:`will_emit` for this event already."""
    try:
        if not checked and openlineage_disabled():
            return False
        if airflow_openlineage_active():
            _send_through_listener(event)
        else:
            _standalone_client().emit(event)
        return True
    except Exception as error:
        warn_once(f"Lineage: could not send the {getattr(event, 'eventType', 'event')} event: {error}", exc_info=error)
        return False


def _send_through_listener(event: Any) -> None:
    """The stock ``api.emit``: the listener adapter's secret redaction, its client, metrics and log line.

    The stock redactor rewrites the attrs objects it is given in place, so it gets a copy: facets this package
    reuses between events (the job type, a run's parent) never carry one event's redaction into the next, and
    the caller's objects stay as they were. An event that cannot be copied (a facet holding an object that
    refuses it) is sent as it is, as ``api.emit`` itself would be given it.
    """
    try:
        given = copy.deepcopy(event)
    except Exception:
        given = event
    _stock().emit(given)


def reset() -> None:
    """Drop cached clients and the stock provider's cached configuration (for tests and long-lived shells)."""
    global _standalone
    with _lock:
        _standalone = None
    _disabled_in_airflow.cache_clear()
    from airflow_lineage_provider.producer.connectors import forget_resolved_connections

    forget_resolved_connections()
    try:
        from airflow.providers.openlineage import conf as ol_conf
        from airflow.providers.openlineage.plugins import listener

        for name in dir(ol_conf):
            if name.startswith("_"):
                continue
            cache_clear = getattr(getattr(ol_conf, name), "cache_clear", None)
            if callable(cache_clear):
                cache_clear()
        listener.get_openlineage_listener.cache_clear()
    except Exception:  # pragma: no cover - an older provider layout
        pass
