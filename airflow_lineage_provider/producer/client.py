"""Where events go.

* ``[openlineage] disabled`` (or ``OPENLINEAGE_DISABLED``) true: nowhere.
* OpenLineage configured for Airflow (``[openlineage] transport``/``config_path``/``config_conn_id``, or
  ``OPENLINEAGE_URL``/``OPENLINEAGE__TRANSPORT__*``): through the stock provider's public
  ``airflow.providers.openlineage.api.emit``, i.e. the listener's own client and transport.
* Otherwise (scripts, notebooks, Airflow without OpenLineage configured): an openlineage-python client
  from its standard configuration (``OPENLINEAGE_CONFIG``, ``openlineage.yml``, environment variables).

Sending never raises: a failing transport is logged once and the event is dropped by the transport's
own rules (use the outbox transport for durable delivery).
"""

from __future__ import annotations

import copy
import importlib
import operator
import os
import sys
import threading
from enum import Enum
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
    """The stock provider's functions this module calls per event, imported once (an import statement in a
    function costs a microsecond or two per call)."""

    def __init__(self) -> None:
        from airflow.providers.openlineage.api import emit, is_openlineage_active
        from airflow.providers.openlineage.plugins.adapter import Stats, prune_dict
        from airflow.providers.openlineage.plugins.listener import get_openlineage_listener

        from airflow_lineage_provider.producer.event_json import attrs_fields

        self.emit = emit
        self.is_openlineage_active = is_openlineage_active
        self.get_openlineage_listener = get_openlineage_listener
        self.Stats = Stats
        self.prune_dict = prune_dict
        self.attrs_fields = attrs_fields
        #: Airflow's metrics backend getter (``None`` when this Airflow does not lay it out so): the timer is
        #: skipped only when the backend is its ``NoStatsLogger``, which records nothing.
        stats_module = sys.modules.get(getattr(getattr(Stats, "timer", None), "__module__", None) or "")
        self.metrics_backend = getattr(stats_module, "_get_backend", None)
        #: ``(event type, transport kind) -> tags`` of the adapter's ``ol.emit.attempts`` timer.
        self.timer_tags: dict[tuple[str, str, Any], dict[str, str]] = {}

    def metrics_off(self) -> bool:
        """Whether Airflow's metrics go nowhere (its ``NoStatsLogger``: no statsd, no OpenTelemetry metrics)."""
        if self.metrics_backend is None:
            return False
        try:
            return type(self.metrics_backend()).__name__ == "NoStatsLogger"
        except Exception:
            return False


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


_EMITTED = "Successfully emitted OpenLineage `%s` event of id `%s`"


def _send_through_listener(event: Any) -> None:
    """What the stock ``api.emit`` does - the listener adapter's secret redaction, then its client - without
    paying the redaction's walk when it would change nothing.

    The stock redactor (``OpenLineageRedactor``) rebuilds every attrs object and dict of the event, and
    defines a class per node it visits: about 0.3-0.5 ms per event, two thirds of what a ``lineage_run``
    block cost. It changes an event only where a key it is shown is a sensitive name (``password``,
    ``token``, ... per ``[core] sensitive_var_conn_names``) or a string holds a masked secret (its
    ``replacer``), or for objects it does not know (``Proxy`` and the like). :func:`needs_redaction` checks
    for exactly those - every key and every string the redactor looks at, at every depth - in one walk (a few
    microseconds); when it finds any, or the adapter is not laid out as expected, the event takes the stock
    route unchanged. Otherwise it goes to the same client with the adapter's own log line and metrics: its
    ``ol.emit.attempts`` timer with the same tags (``ol.emit.failed`` on a failure), not started when Airflow's
    metrics backend is its ``NoStatsLogger`` (no statsd or OpenTelemetry metrics), which records nothing.
    """
    stock = _stock()
    adapter = stock.get_openlineage_listener().adapter
    redacter = getattr(adapter, "_redacter", None)
    get_client = getattr(adapter, "get_or_create_openlineage_client", None)
    if redacter is None or get_client is None or needs_redaction(event, redacter):
        # The stock redactor rewrites attrs objects in place: give it a copy, as facets this package reuses
        # between events (the job type, a run's parent) must not take one event's redaction into the next.
        stock.emit(copy.deepcopy(event))
        return
    ol_client = get_client()
    event_type = event.eventType.value.lower() if getattr(event, "eventType", None) else ""
    try:
        if stock.metrics_off():  # the adapter's timer would record nothing: not started
            ol_client.emit(event)
            adapter.log.info(_EMITTED, event_type.upper(), event.run.runId)
        else:
            key = (event_type, f"{ol_client.transport.kind}".lower(), _team_name(event))
            tags = stock.timer_tags.get(key)
            if tags is None:
                tags = stock.timer_tags[key] = stock.prune_dict(
                    {"event_type": key[0], "transport_type": key[1], "team_name": key[2]}
                )
            with stock.Stats.timer("ol.emit.attempts", tags=dict(tags)):
                ol_client.emit(event)
                adapter.log.info(_EMITTED, event_type.upper(), event.run.runId)
    except Exception as error:  # as the adapter: logged, never raised
        stock.Stats.incr("ol.emit.failed", tags=stock.prune_dict({"team_name": _team_name(event)}))
        adapter.log.warning(
            "Failed to emit OpenLineage `%s` event of id `%s` with the following exception: `%s`",
            event_type.upper(),
            event.run.runId,
            error,
        )
        adapter.log.debug("OpenLineage emission failure details:", exc_info=True)


def _team_name(event: Any) -> Any:
    """The ``team_name`` tag the stock adapter gives its metrics: from the event's ``airflow`` or ``airflowDagRun``
    run facet (``None`` without them, as for this package's own events)."""
    try:
        facets = event.run.facets or {}
        airflow_facet = facets.get("airflow")
        if airflow_facet is not None:
            return airflow_facet.dagRun.get("dag_team_name")
        dag_run_facet = facets.get("airflowDagRun")
        if dag_run_facet is not None:
            dag_run = dag_run_facet.dagRun
            if isinstance(dag_run, dict):
                return dag_run.get("dag_team_name")
            return getattr(dag_run, "dag_team_name", None)
    except Exception:
        return None
    return None


_PLAIN = (int, float, bool, type(None))
#: The redactor the caches below are for, its settings, ``hides`` (see :func:`_hidden_caches`), per key name whether
#: it hides the value, per attrs class the plan of :func:`_class_plan`.
_hidden: tuple[Any, Any, Any, dict[str, bool], dict[type, tuple[bool, Any]]] = (None, None, None, {}, {})


def _hidden_caches(redacter: Any) -> tuple[Any, dict[str, bool], dict[type, tuple[bool, Any]]]:
    """``(hides, by_name, by_class)``: ``hides(name)`` asks ``redacter`` whether it hides the value under a key;
    the dicts cache it per name and, per attrs class, :func:`_class_plan`."""
    global _hidden
    settings = (tuple(getattr(redacter, "sensitive_variables_fields", None) or ()),
                getattr(redacter, "hide_sensitive_var_conn_fields", None))  # fmt: skip
    cached = _hidden
    if cached[0] is not redacter or cached[1] != settings:
        by_name: dict[str, bool] = {}
        check = getattr(redacter, "_should_hide_value_for_key", None) or redacter.should_hide_value_for_key

        def hides(name: str) -> bool:
            found = by_name.get(name)
            if found is None:
                found = by_name[name] = bool(check(name))
            return found

        cached = _hidden = (redacter, settings, hides, by_name, {})
    return cached[2], cached[3], cached[4]


def _skip_redact_properties() -> tuple[Any, ...]:
    """The ``skip_redact`` properties of openlineage-python's base classes: each returns lists kept on the class
    (``_skip_redact``, ``_base_skip_redact + _additional_skip_redact``), the same for every instance."""
    found = []
    for module, name in (
        ("openlineage.client.utils", "RedactMixin"),
        ("openlineage.client.generated.base", "BaseEvent"),
        ("openlineage.client.generated.base", "BaseFacet"),
        ("openlineage.client.facet", "BaseFacet"),
    ):
        try:
            cls = getattr(importlib.import_module(module), name)
            found.append(cls.__dict__["skip_redact"])
        except Exception:  # pragma: no cover - another openlineage-python layout: those classes are walked whole
            continue
    return tuple(found)


_known_skip: tuple[Any, ...] | None = None


def _class_skips(kind: type) -> frozenset[str] | None:
    """The attribute names the stock redactor never looks at in instances of ``kind``: those its
    ``_is_name_redactable`` rejects. ``None`` when that is not the same for every instance (a ``skip_redact``
    other than openlineage-python's own): then every field is checked."""
    global _known_skip
    if _known_skip is None:
        _known_skip = _skip_redact_properties()
    try:
        from openlineage.client.utils import RedactMixin
    except ImportError:  # pragma: no cover
        return None
    if not issubclass(kind, RedactMixin):
        return frozenset(name for name in _stock().attrs_fields(kind)[0] if name.startswith("_"))
    prop = next((klass.__dict__["skip_redact"] for klass in kind.__mro__ if "skip_redact" in klass.__dict__), None)
    if prop is None or prop not in _known_skip:
        return None
    try:
        return frozenset(prop.fget(kind))  # class lists: the class answers as its instances do
    except Exception:
        return None


def _class_plan(kind: type, hides: Any) -> tuple[bool, Any]:
    """``(hidden, values)`` for an attrs class: whether the redactor hides one of the fields it looks at (their
    names are sensitive keys), and a function giving those fields' values as a tuple. Fields it never looks at
    (``skip_redact``: producer, schema URL, event time and type, run id, job and dataset names, ...) are left
    out of both."""
    names, values = _stock().attrs_fields(kind)
    skips = _class_skips(kind)
    walked = tuple(name for name in names if skips is None or name not in skips)
    hidden = any(hides(name) for name in walked)
    if walked == names:
        return hidden, values
    if not walked:
        return hidden, _no_values
    if len(walked) == 1:
        only = walked[0]
        return hidden, lambda obj: (getattr(obj, only),)
    return hidden, operator.attrgetter(*walked)


def _no_values(obj: Any) -> tuple[Any, ...]:
    return ()


def needs_redaction(event: Any, redacter: Any) -> bool:
    """Whether the stock OpenLineage redactor could change ``event``'s JSON (see :func:`_send_through_listener`).

    ``True`` for any key it would hide the value of (a dict key, or an attrs field it looks at), any string its
    ``replacer`` matches among the values it looks at, and any value other than strings, numbers, booleans,
    ``None``, enums of those, lists, tuples, dicts and attrs objects. Like the redactor, it leaves out the
    fields an openlineage-python class marks ``skip_redact`` (the redactor never changes those); it checks
    every depth (the redactor masks strings down to a depth of 20 only: more is only ever a needless stock
    route).
    """
    replacer = getattr(redacter, "replacer", None)
    hides, _by_name, by_class = _hidden_caches(redacter)
    strings: list[str] = []
    stack = [event]
    while stack:  # strings and plain values are taken where they are found: the stack has containers only
        value = stack.pop()
        kind = type(value)
        plan = by_class.get(kind)
        if plan is None and kind is not dict and kind is not list and hasattr(kind, "__attrs_attrs__"):
            plan = by_class[kind] = _class_plan(kind, hides)
        if plan is not None:
            if plan[0]:
                return True
            items: Any = plan[1](value)
        elif kind is dict:
            items = value.values()
            for key in value:
                if type(key) is not str or hides(key):
                    return True
        elif kind is list or kind is tuple:
            items = value
        elif kind is str:
            strings.append(value)
            continue
        elif kind in _PLAIN:
            continue
        elif isinstance(value, Enum):
            stack.append(value.value)
            continue
        else:
            return True
        for item in items:
            item_kind = type(item)
            if item_kind is str:
                strings.append(item)
            elif item_kind is dict or item_kind is list:
                if item:  # an empty one holds nothing to check (most facet dicts of an event)
                    stack.append(item)
            elif item_kind not in _PLAIN:
                stack.append(item)
    # One search over all the strings: a secret found in one string is found in the joined text (a match
    # across the separator can only send an event the stock route needlessly).
    return replacer is not None and bool(strings) and replacer.search("\x00".join(strings)) is not None


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
            cache_clear = getattr(getattr(ol_conf, name), "cache_clear", None)
            if callable(cache_clear):
                cache_clear()
        listener.get_openlineage_listener.cache_clear()
    except Exception:  # pragma: no cover - an older provider layout
        pass
