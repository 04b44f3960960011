"""The Egeria settings of a task: which supply chain and governance action its events name.

Two params, set where Airflow params are set (the DAG's ``params``, a task's ``params``,
``default_args["params"]``):

* ``information_supply_chain``: a string, the qualified name of an Egeria information supply chain;
* ``egeria_governance_action``: a dict of the ``egeria_governanceAction`` fields
  (:data:`~airflow_lineage_provider.facets.egeria.GOVERNANCE_ACTION_FIELDS`, all strings).

Precedence, highest first: the run's resolved params (Airflow lets a DAG run's conf override params when
``[core] dag_run_conf_overrides_params`` is on), the task's own params, the DAG's params, then the
``[lineage_provider] information_supply_chain`` / ``egeria_governance_action`` defaults. A param set to
``None`` opts the task out (no facet, and the default does not apply). A malformed value is logged as a
warning naming the DAG, the task and the value, and gives no facet; the task is never affected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openlineage.client.facet_v2 import RunFacet

from airflow_lineage_provider import conf
from airflow_lineage_provider.airflow_compat import param_is_set, param_source
from airflow_lineage_provider.facets.egeria import (
    GOVERNANCE_ACTION_FIELDS,
    GOVERNANCE_ACTION_KEY,
    INFORMATION_SUPPLY_CHAIN_KEY,
    governance_action_facet,
    information_supply_chain_facet,
)
from airflow_lineage_provider.reporting import warn_once

#: DAG/task param naming the information supply chain (a string).
SUPPLY_CHAIN_PARAM = "information_supply_chain"
#: DAG/task param describing the governance action (a dict of :data:`GOVERNANCE_ACTION_FIELDS`).
GOVERNANCE_ACTION_PARAM = "egeria_governance_action"


@dataclass(frozen=True)
class EgeriaSettings:
    """The Egeria settings in force for one task, already validated."""

    information_supply_chain: str | None = None
    """Qualified name of the information supply chain, or ``None`` for no ``egeria_informationSupplyChain``."""
    governance_action: dict[str, str] | None = None
    """Fields of the governance action, or ``None`` for no ``egeria_governanceAction`` facet."""


@dataclass(frozen=True)
class _Setting:
    value: Any
    origin: str  # where the value was set, for messages


@dataclass(frozen=True)
class _Malformed:
    """A configured default that could not even be parsed."""

    raw: str
    reason: str


def _describe(task: Any) -> tuple[str, str]:
    return str(getattr(task, "dag_id", None) or "?"), str(getattr(task, "task_id", None) or "?")


def _declared(task: Any, key: str) -> tuple[bool, Any, str | None]:
    """Whether the task's params (which include the DAG's) or the DAG's declare ``key``: (found, value, source)."""
    task_params = getattr(task, "params", None) or {}
    dag_params = getattr(getattr(task, "dag", None), "params", None) or {}
    holders: tuple[tuple[Any, str], ...] = ((task_params, "task"), (dag_params, "dag"))  # dicts or ParamsDicts
    for holder, default_source in holders:
        if key not in holder:
            continue
        if not hasattr(holder, "get_param"):  # a plain dict
            return True, holder[key], default_source
        param = holder.get_param(key)
        if not param_is_set(param):  # "no default"; None is a value here
            continue
        return True, param.value, param_source(param, key, dag_params) or default_source
    return False, None, None


def _lookup(task: Any, key: str, params: Mapping[str, Any] | None) -> _Setting | None:
    dag_id, task_id = _describe(task)
    found, value, source = _declared(task, key)
    if params is not None and key in params and (not found or params[key] != value):
        source, value, found = "run", params[key], True  # e.g. a DAG run's conf overriding the param
    if not found:
        return None
    origin = {
        "task": f"param {key!r} of task {task_id!r} in DAG {dag_id!r}",
        "dag": f"param {key!r} of DAG {dag_id!r} (task {task_id!r})",
    }.get(source or "run", f"param {key!r} of the run of DAG {dag_id!r} (task {task_id!r})")
    return _Setting(value, origin)


def _default_governance_action() -> _Setting | None:
    raw = conf.egeria_governance_action()
    if not raw:
        return None
    origin = f"[lineage_provider] {GOVERNANCE_ACTION_PARAM}"
    try:
        return _Setting(json.loads(raw), origin)
    except ValueError as error:
        return _Setting(_Malformed(raw, f"it is not JSON ({error})"), origin)


def _warn(setting: _Setting, problem: str, facet_key: str) -> None:
    value = setting.value
    shown = f"{value.raw!r} (text)" if isinstance(value, _Malformed) else f"{value!r} ({type(value).__name__})"
    warn_once(
        f"Lineage: {setting.origin} is {shown}: {problem}. "
        f"No {facet_key} facet is attached; the task itself is not affected."
    )


def _supply_chain(setting: _Setting | None) -> str | None:
    if setting is None or setting.value is None:
        return None
    value = setting.value
    if not isinstance(value, str) or not value.strip():
        _warn(
            setting,
            "it must be a non-empty string, the qualified name of an Egeria information supply chain",
            INFORMATION_SUPPLY_CHAIN_KEY,
        )
        return None
    return value.strip()


def _governance_action(setting: _Setting | None) -> dict[str, str] | None:
    if setting is None or setting.value is None:
        return None
    value = setting.value
    accepted = ", ".join(GOVERNANCE_ACTION_FIELDS)
    if isinstance(value, _Malformed):
        problem = f"{value.reason}; it must be a JSON object with any of {accepted}"
    elif not isinstance(value, Mapping) or not value:
        problem = f"it must be a non-empty dict with any of the keys {accepted}"
    elif unknown := sorted(str(k) for k in value if k not in GOVERNANCE_ACTION_FIELDS):
        problem = f"unknown key(s) {', '.join(unknown)}; the accepted keys are {accepted}"
    elif bad := sorted(k for k, v in value.items() if v is not None and (not isinstance(v, str) or not v.strip())):
        problem = f"the value of {', '.join(bad)} must be a non-empty string"
    else:
        fields = {k: v.strip() for k, v in value.items() if v is not None}
        if fields:
            return fields
        problem = f"every field is None; set at least one of {accepted}"
    _warn(setting, problem, GOVERNANCE_ACTION_KEY)
    return None


def resolve_egeria_settings(task: Any, params: Mapping[str, Any] | None = None) -> EgeriaSettings:
    """The validated Egeria settings of ``task`` (an operator), warning about malformed values.

    ``params`` are the run's resolved params (``context["params"]``) when known; without them the task's
    and DAG's declared params are read. Never raises for a malformed setting.
    """
    supply_chain = _lookup(task, SUPPLY_CHAIN_PARAM, params)
    if supply_chain is None and (default := conf.information_supply_chain()):
        supply_chain = _Setting(default, f"[lineage_provider] {SUPPLY_CHAIN_PARAM}")
    action = _lookup(task, GOVERNANCE_ACTION_PARAM, params)
    if action is None:
        action = _default_governance_action()
    return EgeriaSettings(_supply_chain(supply_chain), _governance_action(action))


def egeria_facets(task: Any, params: Mapping[str, Any] | None = None) -> dict[str, RunFacet]:
    """The Egeria run facets of ``task``'s events, keyed as they go into ``run.facets``.

    ``task`` is an operator (``BaseOperator``, a mapped task's unmapped operator, or any object with
    ``params``, ``dag``, ``dag_id`` and ``task_id``); ``params`` the run's resolved params
    (``context["params"]``) if known. Returns ``{}`` when nothing is set. Never raises: malformed settings
    and unexpected errors are logged.

    Example (in an operator's ``get_openlineage_facets_on_complete``)::

        run_facets.update(egeria_facets(self, task_instance.get_template_context()["params"]))
    """
    try:
        settings = resolve_egeria_settings(task, params)
        facets: dict[str, RunFacet] = {}
        if settings.information_supply_chain is not None:
            facets[INFORMATION_SUPPLY_CHAIN_KEY] = information_supply_chain_facet(settings.information_supply_chain)
        if settings.governance_action is not None:
            facets[GOVERNANCE_ACTION_KEY] = governance_action_facet(settings.governance_action)
        return facets
    except Exception as error:
        dag_id, task_id = _describe(task)
        warn_once(f"Lineage: could not build the Egeria facets of task {task_id!r} in DAG {dag_id!r}: {error}")
        return {}
